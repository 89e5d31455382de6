package aptproxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"
)

// The package cache on disk. The examples' tests (and a user's repeated
// applies) install the same Debian packages into fresh containers again
// and again: hundreds of MB from the mirror each time. The proxy keeps
// what it forwarded in $XDG_CACHE_HOME/corral/apt (~/.cache/corral/apt,
// beside the template cache), content-addressed: a file is stored under
// its SHA256, and only when that SHA256 is the one the mirror's own
// index (Release, then Packages) names for the URL (see indexes). A
// request is served from the cache only when the index in effect names
// a hash whose file is there and still hashes to it, so a stale or
// damaged entry can never be served: a new upload has a new hash, and
// the old file is simply not asked for. Files unused for cacheMaxAge are
// removed when a proxy starts; `rm -rf ~/.cache/corral/apt` empties it.

// cacheMaxAge is how long an unused cached file is kept.
const cacheMaxAge = 30 * 24 * time.Hour

// DefaultCacheDir is where the proxy caches packages:
// $XDG_CACHE_HOME/corral/apt, or "" (no cache) without a cache directory.
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "corral", "apt")
}

// store is the cache directory; its zero value caches nothing.
type store struct{ dir string }

func validSum(sum string) bool {
	if len(sum) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(sum)
	return err == nil
}

func (s store) path(sum string) string { return filepath.Join(s.dir, "sha256", sum) }

// open returns the cached file whose SHA256 is sum, checked against sum
// and positioned at its start, or nil. A file that no longer hashes to
// its name is removed.
func (s store) open(sum string) *os.File {
	if s.dir == "" || !validSum(sum) {
		return nil
	}
	p := s.path(sum)
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil || hex.EncodeToString(h.Sum(nil)) != sum {
		f.Close()
		os.Remove(p)
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil
	}
	now := time.Now()
	os.Chtimes(p, now, now) // used: kept another cacheMaxAge
	return f
}

// create starts sum's entry: what is written goes to a temporary file
// that becomes the entry at commit, if it hashes to sum. Nil without a
// cache (its methods then do nothing).
func (s store) create(sum string) *entry {
	if s.dir == "" || !validSum(sum) {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "sha256"), 0o755); err != nil {
		return nil
	}
	f, err := os.CreateTemp(filepath.Join(s.dir, "sha256"), ".part-*")
	if err != nil {
		return nil
	}
	return &entry{f: f, h: sha256.New(), sum: sum, dest: s.path(sum)}
}

// entry is a cache file being written (by the proxy, as it forwards).
type entry struct {
	f      *os.File
	h      hash.Hash
	sum    string
	dest   string
	failed bool
}

// Write never fails: a full disk costs the cache entry, never the
// client's download, which the entry only copies.
func (e *entry) Write(p []byte) (int, error) {
	if e == nil || e.failed {
		return len(p), nil
	}
	if _, err := e.f.Write(p); err != nil {
		e.failed = true
	}
	e.h.Write(p)
	return len(p), nil
}

// commit makes the entry the cached file when the download was complete
// and hashes to its sum (concurrent writers of the same sum, other
// emulators' proxies, each rename a whole file); else it is dropped.
// It reports whether the entry is now cached.
func (e *entry) commit(complete bool) bool {
	if e == nil {
		return false
	}
	ok := complete && !e.failed && hex.EncodeToString(e.h.Sum(nil)) == e.sum
	if err := e.f.Close(); err != nil {
		ok = false
	}
	if ok && os.Rename(e.f.Name(), e.dest) == nil {
		return true
	}
	os.Remove(e.f.Name())
	return false
}

// prune removes cached files unused for maxAge, and temporary files of
// downloads that never finished (a killed emulator's) after a day.
func (s store) prune(maxAge time.Duration) {
	if s.dir == "" {
		return
	}
	dir := filepath.Join(s.dir, "sha256")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	now := time.Now()
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		age := now.Sub(fi.ModTime())
		if age > maxAge || (!validSum(e.Name()) && age > 24*time.Hour) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// verify is data's SHA256, as the indexes write it.
func verify(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// limitedBuffer keeps the first n bytes written to it and accepts (drops)
// the rest, so a huge answer never fails the client's copy.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
