package aptproxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// debMirror is a Debian-layout mirror on loopback (dists/ with by-hash
// indexes, pool/) whose files a test may change, and which counts the
// requests it serves.
type debMirror struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	got   []string
}

// newDebMirror serves /debian with suite bookworm and one package file;
// publish replaces that file (a new upload under the same name).
func newDebMirror(t *testing.T, deb string) *debMirror {
	t.Helper()
	m := &debMirror{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.got = append(m.got, r.URL.Path)
		data, ok := m.files[r.URL.Path]
		m.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(m.Close)
	m.publish(deb)
	return m
}

const debPath = "pool/main/h/hello/hello_2.10-3_amd64.deb"

func (m *debMirror) publish(deb string) {
	packages := fmt.Sprintf("Package: hello\nVersion: 2.10-3\nArchitecture: amd64\nFilename: %s\nSize: %d\nSHA256: %s\n\nPackage: other\nFilename: pool/main/o/other/other_1_all.deb\nSHA256: %s\n",
		debPath, len(deb), verify([]byte(deb)), verify([]byte("other")))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(packages))
	zw.Close()
	xz := []byte("not really xz: " + packages) // apt's form; the proxy never reads it
	idx := "main/binary-amd64/"
	release := fmt.Sprintf("Origin: Debian\nSuite: stable\nCodename: bookworm\nAcquire-By-Hash: yes\nMD5Sum:\n 00000000000000000000000000000000 1 %sPackages.gz\nSHA256:\n %s %d %sPackages.gz\n %s %d %sPackages.xz\n",
		idx, verify(gz.Bytes()), gz.Len(), idx, verify(xz), len(xz), idx)
	dists := "/debian/dists/bookworm/"
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files = map[string][]byte{
		dists + "InRelease":                                  []byte(release),
		dists + idx + "Packages.gz":                          gz.Bytes(),
		dists + idx + "by-hash/SHA256/" + verify(gz.Bytes()): gz.Bytes(),
		dists + idx + "by-hash/SHA256/" + verify(xz):         xz,
		"/debian/" + debPath:                                 []byte(deb),
		"/debian/pool/main/o/other/other_1_all.deb":          []byte("other"),
	}
	m.got = nil
}

// requests are the paths served since the last call.
func (m *debMirror) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	got := m.got
	m.got = nil
	return got
}

// aptRun does what apt-get update and install hello do through a proxy
// (a new one each time, as each emulator run has its own, on the same
// cache directory): the suite's InRelease, its Packages index by hash,
// the package. It returns the package's content.
func aptRun(t *testing.T, m *debMirror, cache string) string {
	t.Helper()
	p, err := New([]string{m.URL + "/debian"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.store = store{dir: cache}
	front := httptest.NewServer(p)
	defer front.Close()
	defer p.Close()
	pu, _ := url.Parse(front.URL)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	get := func(path string) []byte {
		t.Helper()
		resp, err := c.Get(m.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return body
	}
	release := get("/debian/dists/bookworm/InRelease")
	for _, line := range strings.Split(string(release), "\n") {
		if f := strings.Fields(line); len(f) == 3 && strings.HasSuffix(f[2], "Packages.xz") {
			get("/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/" + f[0])
		}
	}
	return string(get("/debian/" + debPath))
}

// TestCache_secondRunDownloadsNothing: the second apt run, through a new
// proxy on the same cache, gets the same index and package without
// downloading them again: only the suite's InRelease (what says what is
// current) reaches the mirror.
func TestCache_secondRunDownloadsNothing(t *testing.T) {
	m := newDebMirror(t, "hello 2.10-3")
	cache := t.TempDir()
	if got := aptRun(t, m, cache); got != "hello 2.10-3" {
		t.Fatalf("first run: %q", got)
	}
	first := m.requests()
	if !slices.Contains(first, "/debian/"+debPath) {
		t.Fatalf("first run never reached the mirror for the package: %q", first)
	}
	if got := aptRun(t, m, cache); got != "hello 2.10-3" {
		t.Fatalf("second run: %q", got)
	}
	if got, want := m.requests(), []string{"/debian/dists/bookworm/InRelease"}; !slices.Equal(got, want) {
		t.Errorf("second run downloaded %q, want only %q", got, want)
	}
}

// TestCache_neverStale: a package uploaded again under the same name (a
// new SHA256 in a new Release) is fetched, not served from the cache;
// a cached file damaged on disk is not served either; and a file that
// does not have the SHA256 its index names is passed on (apt rejects
// it) but never cached.
func TestCache_neverStale(t *testing.T) {
	m := newDebMirror(t, "hello 2.10-3")
	cache := t.TempDir()
	aptRun(t, m, cache)
	m.publish("hello 2.10-3, rebuilt")
	if got := aptRun(t, m, cache); got != "hello 2.10-3, rebuilt" {
		t.Fatalf("after a new upload: %q, want the new file", got)
	}
	if got := m.requests(); !slices.Contains(got, "/debian/"+debPath) {
		t.Errorf("the new upload did not come from the mirror: %q", got)
	}

	// Damage the cached package: it is fetched again.
	entry := filepath.Join(cache, "sha256", verify([]byte("hello 2.10-3, rebuilt")))
	if err := os.WriteFile(entry, []byte("hello 2.10-3, rebuild"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := aptRun(t, m, cache); got != "hello 2.10-3, rebuilt" {
		t.Fatalf("with a damaged cache entry: %q", got)
	}
	if got := m.requests(); !slices.Contains(got, "/debian/"+debPath) {
		t.Errorf("the damaged entry was served: mirror saw %q", got)
	}

	// The mirror serves a file that is not what its index says.
	m.mu.Lock()
	m.files["/debian/pool/main/o/other/other_1_all.deb"] = []byte("tampered")
	m.mu.Unlock()
	p, err := New([]string{m.URL + "/debian"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.store = store{dir: cache}
	front := httptest.NewServer(p)
	defer front.Close()
	pu, _ := url.Parse(front.URL)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	for _, path := range []string{"/debian/dists/bookworm/InRelease", "/debian/dists/bookworm/main/binary-amd64/Packages.gz", "/debian/pool/main/o/other/other_1_all.deb"} {
		resp, err := c.Get(m.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if _, err := os.Stat(filepath.Join(cache, "sha256", verify([]byte("tampered")))); err == nil {
		t.Error("a file with the wrong SHA256 was cached under its own")
	}
	if _, err := os.Stat(filepath.Join(cache, "sha256", verify([]byte("other")))); err == nil {
		t.Error("a file with the wrong SHA256 was cached under the index's")
	}
}

// TestCache_prune: files unused for cacheMaxAge, and leftovers of
// downloads that never finished, are removed; used ones stay.
func TestCache_prune(t *testing.T) {
	s := store{dir: t.TempDir()}
	dir := filepath.Join(s.dir, "sha256")
	os.MkdirAll(dir, 0o755)
	fresh, old, part := verify([]byte("a")), verify([]byte("b")), ".part-123"
	for _, n := range []string{fresh, old, part} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	long := time.Now().Add(-cacheMaxAge - time.Hour)
	os.Chtimes(filepath.Join(dir, old), long, long)
	os.Chtimes(filepath.Join(dir, part), long, long)
	s.prune(cacheMaxAge)
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{fresh}) {
		t.Errorf("after prune: %q, want only %s", names, fresh)
	}
}
