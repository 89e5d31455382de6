package sim

import (
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
// makes the kept answer unreachable rather than stale.
func (s *Server) cachedRead(req *http.Request, r *request, h handler) (any, error) {
	k := s.cluster.ReadKey()
	e := readCacheEntry{uri: req.URL.RequestURI(), caller: r.auth.ID()}
	if b, ok := s.reads.get(k, e); ok {
		return encodedAnswer(b), nil
	}
	out, err := h(r)
	if err != nil {
		return nil, err
	}
	body, err := encodeData(out)
	if err != nil {
		return nil, err
	}
	s.reads.put(k, e, body)
	return encodedAnswer(body), nil
}
