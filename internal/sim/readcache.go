package sim

import (
	"errors"
	"net/http"
	"sync"

	"github.com/corralhq/corral/internal/sim/model"
)

// cachedReads are the GET routes whose encoded answers readCache keeps:
// the lists (linear in the guests, volumes or tasks: a thousand guests'
// /cluster/resources is a 300 KB answer) and the per-CT reads that
// refreshes repeat. Each answer depends only on the State, the clock's
// second, the disk-usage figures (model.ReadKey), the request's path and
// query, and the caller's identity (whose privileges filter the lists).
// GET .../interfaces is not here: its answer depends on where the
// request comes from.
var cachedReads = map[string]bool{
	"/version":             true,
	"/cluster/resources":   true,
	"/cluster/status":      true,
	"/nodes":               true,
	"/nodes/{node}/status": true,
	"/nodes/{node}/lxc":    true,
	"/nodes/{node}/lxc/{vmid}/status/current": true,
	"/nodes/{node}/lxc/{vmid}/config":         true,
	"/nodes/{node}/lxc/{vmid}/pending":        true,
	"/nodes/{node}/storage":                   true,
	"/nodes/{node}/storage/{storage}/content": true,
	"/nodes/{node}/tasks":                     true,
}

// Bounds of the cache: past either, answers are still served, just not
// kept (5,000 CTs' per-CT reads are about 15 MB).
const (
	readCacheMaxEntries = 32 << 10
	readCacheMaxBytes   = 64 << 20
)

// readCache keeps encoded 200 answers of cachedReads under the
// model.ReadKey they were read at. Every change of the State moves the
// key, and an answer is served only under the key it was stored with,
// so a read that starts after a write never gets an answer from before
// it. Answers are kept per caller (token or user), never shared between
// callers whose privileges may differ.
type readCache struct {
	mu    sync.Mutex
	key   model.ReadKey
	bytes int
	m     map[readCacheEntry][]byte
	// reading are the answers being read now: clients that ask for the
	// same one under the same key wait for it instead of reading it too
	// (8 clients asking for a 300 KB list each second all missed at once).
	reading map[readCacheEntry]*pendingRead
}

// pendingRead is one answer being read, under key; done closes when
// body (or err) is there.
type pendingRead struct {
	key  model.ReadKey
	done chan struct{}
	body []byte
	err  error
}

// join returns the read of e under k in progress, or starts one: lead
// says the caller reads it and must end it with land.
func (rc *readCache) join(k model.ReadKey, e readCacheEntry) (p *pendingRead, lead bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if p := rc.reading[e]; p != nil && p.key == k {
		return p, false
	}
	p = &pendingRead{key: k, done: make(chan struct{})}
	if rc.reading == nil {
		rc.reading = map[readCacheEntry]*pendingRead{}
	}
	rc.reading[e] = p
	return p, true
}

// land ends the read p of e: its answer is kept (put) and handed to the
// clients waiting for it.
func (rc *readCache) land(e readCacheEntry, p *pendingRead, body []byte, err error) {
	if err == nil {
		rc.put(p.key, e, body)
	}
	rc.mu.Lock()
	if rc.reading[e] == p {
		delete(rc.reading, e)
	}
	rc.mu.Unlock()
	p.body, p.err = body, err
	close(p.done)
}

// readCacheEntry names one answer: the request URI (path and query)
// and the caller.
type readCacheEntry struct{ uri, caller string }

// get returns the answer stored for e under key k.
func (rc *readCache) get(k model.ReadKey, e readCacheEntry) ([]byte, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if k != rc.key {
		return nil, false
	}
	b, ok := rc.m[e]
	return b, ok
}

// put stores body for e under k: a key later than the cache's drops
// every answer stored under the earlier one; an answer read under an
// earlier key than the cache's (a read that started before a write) is
// not kept.
func (rc *readCache) put(k model.ReadKey, e readCacheEntry, body []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if k != rc.key {
		if !k.After(rc.key) {
			return
		}
		rc.key, rc.m, rc.bytes = k, nil, 0
	}
	if len(rc.m) >= readCacheMaxEntries || rc.bytes+len(body) > readCacheMaxBytes {
		return
	}
	if rc.m == nil {
		rc.m = map[readCacheEntry][]byte{}
	}
	if _, ok := rc.m[e]; !ok {
		rc.m[e] = body
		rc.bytes += len(body)
	}
}

// encodedAnswer is a 200 answer's body, already encoded (a handler's
// result from readCache).
type encodedAnswer []byte

// cachedRead answers r from the cache, or with h's answer, encoded and
// kept: the key is taken before h reads, so a write during h's read
// makes the kept answer unreachable rather than stale. A client that
// asks for an answer another is reading under the same key waits for
// it; if that read failed, it reads for itself.
func (s *Server) cachedRead(req *http.Request, r *request, h handler) (any, error) {
	k := s.cluster.ReadKey()
	e := readCacheEntry{uri: req.URL.RequestURI(), caller: r.auth.ID()}
	if b, ok := s.reads.get(k, e); ok {
		return encodedAnswer(b), nil
	}
	p, lead := s.reads.join(k, e)
	if !lead {
		<-p.done
		if p.err == nil {
			return encodedAnswer(p.body), nil
		}
		return answerRead(encodeRead(r, h))
	}
	landed := false
	defer func() {
		if !landed { // h panicked: the waiting clients read for themselves
			s.reads.land(e, p, nil, errors.New("the read they waited for failed"))
		}
	}()
	body, err := encodeRead(r, h)
	s.reads.land(e, p, body, err)
	landed = true
	return answerRead(body, err)
}

// answerRead is a handler's result for an encoded answer.
func answerRead(body []byte, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return encodedAnswer(body), nil
}

// encodeRead is h's answer to r, encoded.
func encodeRead(r *request, h handler) ([]byte, error) {
	out, err := h(r)
	if err != nil {
		return nil, err
	}
	return encodeData(out)
}
