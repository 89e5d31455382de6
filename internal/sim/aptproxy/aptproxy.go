// Package aptproxy is the emulator's package proxy for its containers:
// an HTTP proxy on the guests' bridge that forwards only to the host's
// own Debian package sources (its /etc/apt/sources.list and
// sources.list.d), so that `apt-get install` inside an isolated CT works
// wherever apt-get works on the host, while the CT reaches nothing else.
//
// It is never an open proxy: a request is forwarded only when its URL is
// under one of the sources' URIs (same host and port, path below the
// URI's path), or when it names an official Debian archive host
// (*.debian.org) and one of the host's sources serves the same archive
// path (/debian, /debian-security, …); the request then goes to that
// source instead, as apt-cacher-ng's backend remapping does. This is why
// a template whose sources.list says security.debian.org works on a host
// that reaches deb.debian.org/debian-security. Everything else, and
// CONNECT to any host:port that is not an https source, is refused with
// a status line that says why (apt prints it).
package aptproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/hostcheck"
)

// Port is where the emulator serves the proxy on its bridge gateway
// (apt-cacher-ng's port, which apt users know).
const Port = 3142

// Proxy forwards CTs' apt requests to the allowed sources.
type Proxy struct {
	sources   []*url.URL
	transport *http.Transport
	log       *slog.Logger
	store     store    // the package cache (store.go)
	ix        *indexes // what the indexes passed through say (indexes.go)

	// What Close ends: the servers Serve runs and the open CONNECT
	// tunnels (hijacked connections, which http.Server.Close leaves
	// alone), both ends of each.
	mu      sync.Mutex
	closed  bool
	servers []*http.Server
	tunnels map[net.Conn]struct{}
}

// New makes a proxy for the source URIs (http:// or https://).
func New(uris []string, log *slog.Logger) (*Proxy, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{log: log, tunnels: map[net.Conn]struct{}{}, store: store{dir: DefaultCacheDir()}, ix: newIndexes()}
	seen := map[string]bool{}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue // file:, cdrom:, mirror+… are not for the network
		}
		u.Path = "/" + strings.Trim(u.Path, "/")
		u.RawQuery, u.Fragment, u.User = "", "", nil
		if seen[u.String()] {
			continue
		}
		seen[u.String()] = true
		p.sources = append(p.sources, u)
	}
	if len(p.sources) == 0 {
		return nil, errors.New("apt proxy: the host has no http(s) package source in /etc/apt/sources.list(.d)")
	}
	// Longest path first, so the most specific source wins.
	sort.SliceStable(p.sources, func(i, j int) bool { return len(p.sources[i].Path) > len(p.sources[j].Path) })
	p.transport = &http.Transport{
		Proxy:                 http.ProxyFromEnvironment, // the host's own proxy, as its apt may use
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: 2 * time.Minute,
		MaxIdleConnsPerHost:   4,
	}
	p.store.prune(cacheMaxAge)
	return p, nil
}

// Sources are the URIs the proxy forwards to.
func (p *Proxy) Sources() []string {
	out := make([]string, len(p.sources))
	for i, u := range p.sources {
		out[i] = u.String()
	}
	return out
}

// HostSources reads the http(s) URIs of the package sources configured
// under root (the host: "/"): one-line entries in etc/apt/sources.list
// and sources.list.d/*.list, deb822 entries in sources.list.d/*.sources
// (apt reads no other file names there).
func HostSources(root string) ([]string, error) {
	dir := filepath.Join(root, "etc", "apt")
	files := []string{filepath.Join(dir, "sources.list")}
	ents, _ := os.ReadDir(filepath.Join(dir, "sources.list.d"))
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources") {
			files = append(files, filepath.Join(dir, "sources.list.d", n))
		}
	}
	var uris []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("apt sources: %w", err)
		}
		if strings.HasSuffix(f, ".sources") {
			uris = append(uris, deb822URIs(string(data))...)
		} else {
			uris = append(uris, oneLineURIs(string(data))...)
		}
	}
	return uris, nil
}

// oneLineURIs: "deb [options] uri suite [component…]".
func oneLineURIs(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != "deb" && f[0] != "deb-src") {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// deb822URIs: the URIs fields of stanzas not marked Enabled: no.
func deb822URIs(text string) []string {
	var out []string
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r", ""), "\n\n") {
		var uris []string
		enabled := true
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "uris":
				uris = strings.Fields(v)
			case "enabled":
				enabled = strings.TrimSpace(strings.ToLower(v)) != "no"
			}
		}
		if enabled {
			out = append(out, uris...)
		}
	}
	return out
}

// hostPort is u's host with the scheme's default port made explicit.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return strings.ToLower(u.Host)
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	return dir == "/" || path == dir || strings.HasPrefix(path, dir+"/")
}

// target is where the proxy sends a request for u, or nil when u is
// none of the sources.
func (p *Proxy) target(u *url.URL) *url.URL {
	// u.Path is decoded (%2e%2e, %2F): a ".." segment would take the
	// source host's server out of the source's directory, so it is
	// refused; "." segments (apt asks a flat repository "deb URI ./" for
	// /./Packages) are dropped.
	var segs []string
	for _, seg := range strings.Split(strings.TrimLeft(u.Path, "/"), "/") {
		switch seg {
		case "..":
			return nil
		case ".":
			continue
		}
		segs = append(segs, seg)
	}
	path := "/" + strings.Join(segs, "/")
	for _, s := range p.sources {
		if hostPort(&url.URL{Scheme: "http", Host: u.Host}) == hostPort(&url.URL{Scheme: "http", Host: s.Host}) && under(path, s.Path) {
			return &url.URL{Scheme: s.Scheme, Host: s.Host, Path: path, RawQuery: u.RawQuery}
		}
	}
	// An official Debian archive host: the host's source of the same
	// archive serves it.
	if h := strings.ToLower(u.Hostname()); h == "debian.org" || strings.HasSuffix(h, ".debian.org") {
		for _, s := range p.sources {
			if s.Path != "/" && under(path, s.Path) {
				return &url.URL{Scheme: s.Scheme, Host: s.Host, Path: path, RawQuery: u.RawQuery}
			}
		}
	}
	return nil
}

// allowConnect reports whether hostport is an https source (apt's https
// method tunnels through the proxy with CONNECT).
func (p *Proxy) allowConnect(hostport string) bool {
	for _, s := range p.sources {
		if s.Scheme == "https" && hostPort(s) == hostPort(&url.URL{Scheme: "https", Host: hostport}) {
			return true
		}
	}
	return false
}

// hop-by-hop headers, which a proxy does not forward.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if r.URL.Host == "" || (r.URL.Scheme != "http" && r.URL.Scheme != "") {
		refuse(w, http.StatusBadRequest, "this is corral sim's apt proxy: use it as apt's Acquire::http::Proxy")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		refuse(w, http.StatusMethodNotAllowed, "corral sim apt proxy forwards GET and HEAD only")
		return
	}
	t := p.target(r.URL)
	if t == nil {
		p.log.Info("apt proxy refused", "url", r.URL.Redacted())
		refuse(w, http.StatusForbidden, fmt.Sprintf("corral sim apt proxy: %s is not one of the host's package sources (%s)", r.URL.Host, strings.Join(p.Sources(), " ")))
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, t.String(), nil)
	if err != nil {
		refuse(w, http.StatusBadGateway, "corral sim apt proxy: "+err.Error())
		return
	}
	for k, vs := range r.Header {
		out.Header[k] = vs
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	sum := ""
	if r.Method == http.MethodGet {
		p.ix.observe(t)
		sum = p.ix.expected(r.Context(), t, p.store, p.httpFetch)
		if sum != "" && p.serveCached(w, r, sum) {
			return
		}
	}
	p.forward(w, out, sum)
}

// serveCached answers r with the cached file whose SHA256 is sum (the
// one the mirror's index in effect names for the URL); false when the
// cache has no such file.
func (p *Proxy) serveCached(w http.ResponseWriter, r *http.Request, sum string) bool {
	f := p.store.open(sum)
	if f == nil {
		return false
	}
	defer f.Close()
	p.log.Debug("apt proxy: from the cache", "url", r.URL.Redacted(), "sha256", sum)
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", time.Time{}, f)
	return true
}

// forward sends out to the source and its answer back. A whole answer
// whose SHA256 should be sum is cached on the way (when it has that
// SHA256); a suite's Release is read for its hashes on the way.
func (p *Proxy) forward(w http.ResponseWriter, out *http.Request, sum string) {
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.log.Warn("apt proxy: the host's package source failed", "url", out.URL.String(), "err", err)
		refuse(w, http.StatusBadGateway, fmt.Sprintf("corral sim apt proxy: the host cannot reach %s either (%v)", out.URL.Host, err))
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	whole := resp.StatusCode == http.StatusOK && out.Method == http.MethodGet && out.Header.Get("Range") == ""
	var e *entry
	var release *bytes.Buffer
	var to io.Writer = w
	if _, rel, ok := splitDists(out.URL); whole && ok && isRelease(rel) {
		release = new(bytes.Buffer)
		to = io.MultiWriter(w, &limitedBuffer{b: release, n: releaseMax})
	} else if whole && sum != "" {
		e = p.store.create(sum)
		to = io.MultiWriter(w, e)
	}
	_, err = io.Copy(to, resp.Body)
	if e.commit(err == nil) {
		p.log.Debug("apt proxy: cached", "url", out.URL.String(), "sha256", sum)
	}
	if release != nil && err == nil {
		p.ix.learnRelease(out.URL, release.Bytes())
	}
}

// connect tunnels to an https source.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	// CONNECT names host:port (RFC 9110 9.3.6); without a port the
	// source check would assume 443 and the dial then fail.
	if h, port, err := net.SplitHostPort(r.Host); err != nil || h == "" || port == "" {
		p.log.Info("apt proxy refused", "connect", r.Host)
		refuse(w, http.StatusBadRequest, fmt.Sprintf("corral sim apt proxy: CONNECT needs host:port, got %q", r.Host))
		return
	}
	if !p.allowConnect(r.Host) {
		p.log.Info("apt proxy refused", "connect", r.Host)
		refuse(w, http.StatusForbidden, fmt.Sprintf("corral sim apt proxy: %s is not one of the host's https package sources", r.Host))
		return
	}
	up, err := net.DialTimeout("tcp", r.Host, 30*time.Second)
	if err != nil {
		refuse(w, http.StatusBadGateway, fmt.Sprintf("corral sim apt proxy: the host cannot reach %s either (%v)", r.Host, err))
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		refuse(w, http.StatusInternalServerError, "corral sim apt proxy: cannot tunnel")
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	if !p.track(c, up) {
		return // the proxy closed meanwhile
	}
	defer p.untrack(c, up)
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, buf); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// refuse answers with code and a status line that carries the reason:
// apt prints the reason phrase ("403  corral sim apt proxy: …").
func refuse(w http.ResponseWriter, code int, reason string) {
	reason = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, reason)
	if hj, ok := w.(http.Hijacker); ok {
		if c, buf, err := hj.Hijack(); err == nil {
			defer c.Close()
			body := reason + "\n"
			fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, reason, len(body), body)
			buf.Flush()
			return
		}
	}
	http.Error(w, reason, code)
}

// track registers a tunnel's two connections for Close; false when the
// proxy is closed already.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.tunnels, c)
	}
}

// Serve serves the proxy on ln until ln or the proxy closes. A request
// for the proxy itself (origin form, not a proxy request) must name it
// in its Host, as every corral server's (package hostcheck); apt's
// requests name their target and pass to ServeHTTP's source check.
func (p *Proxy) Serve(ln net.Listener) error {
	guard := hostcheck.ForListen(ln.Addr().String(), nil, "").Handler(p, true)
	srv := &http.Server{Handler: guard, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	p.servers = append(p.servers, srv)
	p.mu.Unlock()
	return srv.Serve(ln)
}

// Close ends the proxy: its listeners, the requests being forwarded, and
// every open CONNECT tunnel (both ends), so no CT keeps a way out after
// the emulator that gave it one has stopped.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	servers, tunnels := p.servers, p.tunnels
	p.servers, p.tunnels = nil, map[net.Conn]struct{}{}
	p.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Close())
	}
	for c := range tunnels {
		c.Close()
	}
	p.transport.CloseIdleConnections()
	return errors.Join(errs...)
}
