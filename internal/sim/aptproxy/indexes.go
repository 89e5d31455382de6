package aptproxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// What the proxy learns from the indexes that pass through it, so that
// it knows the SHA256 a URL's content must have (the cache's key; see
// store). The chain is apt's own: a suite's InRelease (or Release)
// lists each index file of the suite with its SHA256; a Packages index
// lists each package file (Filename, relative to the archive root: the
// directory holding dists/ and pool/) with its SHA256. apt fetches the
// indexes by hash (by-hash/SHA256/<sum>, Debian's Acquire-By-Hash), so
// those URLs name their own key. For package files the proxy reads the
// Packages indexes the CTs asked for, in their gzip form (the standard
// library reads it; apt itself fetches .xz): from the cache when its
// hash is there, else once from the mirror. A Release that changes
// (a new point release, a security upload) names new hashes, so the
// lookups follow it.

// releaseMax bounds a Release file read for its hashes (Debian's are
// a few hundred KB).
const releaseMax = 32 << 20

// indexes is one proxy's knowledge; its methods are safe for concurrent
// requests.
type indexes struct {
	mu       sync.Mutex
	releases map[string]map[string]string // dists directory URL → path below it → SHA256
	wanted   map[string]bool              // Packages index URL (no compression suffix) a CT asked for
	packages map[string]*packagesIndex    // that URL → its parsed files
}

// packagesIndex is a parsed Packages index: the SHA256 of the form read
// (to know when the Release moved on) and each file's SHA256 by URL.
type packagesIndex struct {
	sum   string
	files map[string]string
}

func newIndexes() *indexes {
	return &indexes{releases: map[string]map[string]string{}, wanted: map[string]bool{}, packages: map[string]*packagesIndex{}}
}

// splitDists splits a URL under a suite's directory, ".../dists/SUITE/REL",
// into the suite's directory URL and REL; ok is false outside dists/.
func splitDists(u *url.URL) (dir, rel string, ok bool) {
	i := strings.Index(u.Path, "/dists/")
	if i < 0 {
		return "", "", false
	}
	suite, rel, ok := strings.Cut(u.Path[i+len("/dists/"):], "/")
	if !ok || suite == "" || rel == "" {
		return "", "", false
	}
	base := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path[:i] + "/dists/" + suite}
	return base.String(), rel, true
}

// isRelease reports whether rel names a suite's Release file.
func isRelease(rel string) bool { return rel == "InRelease" || rel == "Release" }

// observe notes a CT's request for t: a Packages index (by name or by
// hash) is wanted for the package lookups of its archive.
func (ix *indexes) observe(t *url.URL) {
	dir, rel, ok := splitDists(t)
	if !ok {
		return
	}
	parts := strings.Split(rel, "/")
	if len(parts) < 3 || !strings.HasPrefix(parts[1], "binary-") {
		return
	}
	if !strings.HasPrefix(parts[2], "Packages") && parts[2] != "by-hash" {
		return
	}
	ix.mu.Lock()
	ix.wanted[dir+"/"+parts[0]+"/"+parts[1]+"/Packages"] = true
	ix.mu.Unlock()
}

// learnRelease records the SHA256 list of a suite's Release as passed to
// a CT.
func (ix *indexes) learnRelease(t *url.URL, body []byte) {
	dir, _, ok := splitDists(t)
	if !ok {
		return
	}
	sums := map[string]string{}
	inSHA256 := false
	for _, line := range strings.Split(string(body), "\n") {
		line = strings.TrimRight(line, "\r")
		if !strings.HasPrefix(line, " ") {
			inSHA256 = line == "SHA256:"
			continue
		}
		if f := strings.Fields(line); inSHA256 && len(f) == 3 && validSum(f[0]) {
			sums[f[2]] = f[0]
		}
	}
	if len(sums) == 0 {
		return
	}
	ix.mu.Lock()
	ix.releases[dir] = sums
	ix.mu.Unlock()
}

// expected is the SHA256 t's content must have, or "" when the indexes
// do not say (then t is forwarded and not cached). fetch reads an index
// file the proxy needs for the lookup.
func (ix *indexes) expected(ctx context.Context, t *url.URL, s store, fetch fetchFunc) string {
	if dir, rel, ok := splitDists(t); ok {
		if i := strings.LastIndex(rel, "/by-hash/SHA256/"); i >= 0 {
			return rel[i+len("/by-hash/SHA256/"):]
		}
		if isRelease(rel) {
			return ""
		}
		ix.mu.Lock()
		defer ix.mu.Unlock()
		return ix.releases[dir][rel]
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for idx := range ix.wanted {
		root := strings.SplitN(idx, "/dists/", 2)[0] + "/"
		if !strings.HasPrefix(t.String(), root) {
			continue
		}
		if p := ix.loadPackages(ctx, idx, s, fetch); p != nil {
			if sum := p.files[strings.TrimPrefix(t.String(), root)]; sum != "" {
				return sum
			}
		}
	}
	return ""
}

// fetchFunc GETs a URL from the mirror.
type fetchFunc func(ctx context.Context, u string) (io.ReadCloser, error)

// loadPackages returns the Packages index idx as its suite's current
// Release lists it (gzip form, else plain), parsed, or nil when it
// cannot be had. Called with ix.mu held: concurrent lookups wait for one
// read.
func (ix *indexes) loadPackages(ctx context.Context, idx string, s store, fetch fetchFunc) *packagesIndex {
	dirURL, base, _ := strings.Cut(idx, "/dists/")
	suite, rel, _ := strings.Cut(base, "/")
	dir := dirURL + "/dists/" + suite
	for _, name := range []string{rel + ".gz", rel} {
		sum := ix.releases[dir][name]
		if sum == "" {
			continue
		}
		if p := ix.packages[idx]; p != nil && p.sum == sum {
			return p
		}
		data, err := readVerified(ctx, dir+"/"+name, sum, s, fetch)
		if err != nil {
			ix.packages[idx] = &packagesIndex{sum: sum} // not again for this Release
			return nil
		}
		files, err := parsePackages(data, strings.HasSuffix(name, ".gz"))
		if err != nil {
			ix.packages[idx] = &packagesIndex{sum: sum}
			return nil
		}
		ix.packages[idx] = &packagesIndex{sum: sum, files: files}
		return ix.packages[idx]
	}
	return nil
}

// readVerified is the content of u, which must hash to sum: from the
// cache, else from the mirror (then cached).
func readVerified(ctx context.Context, u, sum string, s store, fetch fetchFunc) ([]byte, error) {
	if f := s.open(sum); f != nil {
		defer f.Close()
		return io.ReadAll(f)
	}
	body, err := fetch(ctx, u)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	e := s.create(sum)
	var buf bytes.Buffer
	if _, err := io.Copy(io.MultiWriter(&buf, e), body); err != nil {
		e.commit(false)
		return nil, err
	}
	if !e.commit(true) && verify(buf.Bytes()) != sum {
		return nil, fmt.Errorf("%s does not have the SHA256 its Release names", u)
	}
	return buf.Bytes(), nil
}

// parsePackages maps each Filename of a Packages index to its SHA256.
func parsePackages(data []byte, gz bool) (map[string]string, error) {
	var r io.Reader = bytes.NewReader(data)
	if gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	}
	files := map[string]string{}
	var name, sum string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name != "" && validSum(sum) {
				files[name] = sum
			}
			name, sum = "", ""
		case strings.HasPrefix(line, "Filename: "):
			name = strings.TrimPrefix(line, "Filename: ")
		case strings.HasPrefix(line, "SHA256: "):
			sum = strings.TrimPrefix(line, "SHA256: ")
		}
	}
	if name != "" && validSum(sum) {
		files[name] = sum
	}
	return files, sc.Err()
}

// httpFetch is fetchFunc over the proxy's transport.
func (p *Proxy) httpFetch(ctx context.Context, u string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return resp.Body, nil
}
