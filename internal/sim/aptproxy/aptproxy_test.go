package aptproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHostSources(t *testing.T) {
	got, err := HostSources("testdata/host")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"http://deb.debian.org/debian",
		"https://apt.example.com/repo",
		"http://deb.debian.org/debian",
		"http://deb.debian.org/debian-security",
		"http://mirror.example.net:8080/debian/",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("HostSources:\n got %q\nwant %q", got, want)
	}
}

func TestTarget(t *testing.T) {
	p, err := New([]string{
		"http://deb.debian.org/debian",
		"http://deb.debian.org/debian-security/",
		"https://apt.example.com/repo",
		"http://127.0.0.1:9999/",
		"file:/srv/local",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"http://deb.debian.org/debian/dists/bookworm/InRelease", "http://deb.debian.org/debian/dists/bookworm/InRelease"},
		{"http://deb.debian.org:80/debian/pool/main/h/hello/hello.deb", "http://deb.debian.org/debian/pool/main/h/hello/hello.deb"},
		{"http://security.debian.org/debian-security/dists/bookworm-security/InRelease", "http://deb.debian.org/debian-security/dists/bookworm-security/InRelease"},
		{"http://ftp.debian.org/debian/dists/bookworm/Release", "http://deb.debian.org/debian/dists/bookworm/Release"},
		{"http://apt.example.com/repo/dists/stable/InRelease", "https://apt.example.com/repo/dists/stable/InRelease"},
		{"http://127.0.0.1:9999/Packages", "http://127.0.0.1:9999/Packages"},
		// refused: other hosts, other paths, other ports
		{"http://deb.debian.org/debianx/dists", ""},
		{"http://deb.debian.org/etc/passwd", ""},
		{"http://evil.example/debian/dists/bookworm/InRelease", ""},
		{"http://127.0.0.1:22/", ""},
		{"http://10.0.0.1:8006/api2/json/version", ""},
		{"http://security.debian.org/other/x", ""},
		{"http://apt.example.com/other", ""},
		// "." segments are dropped (a flat repository's ./Packages)
		{"http://127.0.0.1:9999/./Packages", "http://127.0.0.1:9999/Packages"},
		{"http://deb.debian.org/debian/./dists/bookworm/Release", "http://deb.debian.org/debian/dists/bookworm/Release"},
		// refused: out of a source's directory through "..", plain or
		// encoded
		{"http://deb.debian.org/debian/../etc/passwd", ""},
		{"http://deb.debian.org/debian/%2e%2e/admin", ""},
		{"http://deb.debian.org/debian%2F..%2Fadmin", ""},
		{"http://security.debian.org/debian-security/../x", ""},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.in)
		got := ""
		if tg := p.target(u); tg != nil {
			got = tg.String()
		}
		if got != tt.want {
			t.Errorf("target(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for hp, want := range map[string]bool{"apt.example.com:443": true, "apt.example.com:8443": false, "deb.debian.org:443": false, "127.0.0.1:22": false} {
		if got := p.allowConnect(hp); got != want {
			t.Errorf("allowConnect(%s) = %v, want %v", hp, got, want)
		}
	}
}

func TestNew_noSources(t *testing.T) {
	if _, err := New([]string{"file:/x", "cdrom:[a]/"}, nil); err == nil || !strings.Contains(err.Error(), "no http(s) package source") {
		t.Fatalf("New: %v", err)
	}
}

// TestProxy: through the proxy, an allowed source answers with its own
// status and body; any other destination gets the proxy's refusal with
// a reason in the status line, and never a connection.
func TestProxy(t *testing.T) {
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debian/Packages" {
			io.WriteString(w, "Package: hello\n")
			return
		}
		http.NotFound(w, r)
	}))
	defer mirror.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the proxy reached a host that is no source: %s", r.URL)
	}))
	defer other.Close()
	p, err := New([]string{mirror.URL + "/debian"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	pu, _ := url.Parse(front.URL)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	tests := []struct {
		url        string
		wantStatus string
		wantBody   string
	}{
		{mirror.URL + "/debian/Packages", "200 OK", "Package: hello\n"},
		{mirror.URL + "/debian/nothing", "404 Not Found", "404 page not found\n"},
		{other.URL + "/debian/Packages", "403 corral sim apt proxy: " + strings.TrimPrefix(other.URL, "http://") + " is not one of the host's package sources (" + mirror.URL + "/debian)", ""},
		{mirror.URL + "/etc/passwd", "403 corral sim apt proxy: ", ""},
	}
	for _, tt := range tests {
		resp, err := c.Get(tt.url)
		if err != nil {
			t.Fatalf("GET %s: %v", tt.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(resp.Status, tt.wantStatus) {
			t.Errorf("GET %s: status %q, want %q", tt.url, resp.Status, tt.wantStatus)
		}
		if tt.wantBody != "" && string(body) != tt.wantBody {
			t.Errorf("GET %s: body %q, want %q", tt.url, body, tt.wantBody)
		}
	}
	// CONNECT to anything but an https source is refused.
	conn, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "CONNECT "+strings.TrimPrefix(other.URL, "http://")+" HTTP/1.1\r\nHost: x\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 403 corral sim apt proxy: ") {
		t.Errorf("CONNECT to a non-source: %q", line)
	}
}

// TestProxy_connectNeedsPort: a CONNECT without a port is refused with
// 400 and the reason (it passed the source check as port 443 and then
// failed to dial, a 502 that blamed the host's network).
func TestProxy_connectNeedsPort(t *testing.T) {
	p, err := New([]string{"https://apt.example.com/repo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	for _, target := range []string{"apt.example.com", "apt.example.com:", ":443"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if want := "HTTP/1.1 400 corral sim apt proxy: CONNECT needs host:port, got \"" + target + "\""; strings.TrimSpace(line) != want {
			t.Errorf("CONNECT %s: %q, want %q", target, line, want)
		}
	}
}

// TestProxy_close: Close ends the proxy's server (Serve returns, the
// listener is closed) and every open CONNECT tunnel, so a CT keeps no
// way out after its emulator stopped.
func TestProxy_close(t *testing.T) {
	// An "https source" that echoes what the tunnel carries.
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p, err := New([]string{"https://" + up.Addr().String() + "/debian"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute)) // a hang fails, not blocks the suite
	io.WriteString(conn, "CONNECT "+up.Addr().String()+" HTTP/1.1\r\nHost: "+up.Addr().String()+"\r\n\r\n")
	br := bufio.NewReader(conn)
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 200 ") {
		t.Fatalf("CONNECT to the https source: %q", line)
	}
	br.ReadString('\n') // the header's end
	io.WriteString(conn, "ping\n")
	if line, _ := br.ReadString('\n'); line != "ping\n" {
		t.Fatalf("through the tunnel: %q", line)
	}

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the proxy's listener still accepts after Close")
	}
	if n, err := br.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the open tunnel still runs after Close: read %q, %v", n, err)
	}
	if err := p.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Close: %v, want http.ErrServerClosed", err)
	}
}

// TestProxy_hostCheck: served on its listener, the proxy answers a
// request for itself under a name not its own (a page rebinding its
// name to the proxy's address) with 421, and still forwards apt's
// absolute-form requests, whose Host is the mirror's.
func TestProxy_hostCheck(t *testing.T) {
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "Package: hello\n")
	}))
	defer mirror.Close()
	p, err := New([]string{mirror.URL + "/debian"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/debian/Packages", nil)
	req.Host = "evil.example:" + port
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(body), "evil.example") {
		t.Errorf("rebinding request: %s %q", resp.Status, body)
	}
	pu, _ := url.Parse("http://" + ln.Addr().String())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err = c.Get(mirror.URL + "/debian/Packages")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "Package: hello\n" {
		t.Errorf("apt's request through the proxy: %s %q", resp.Status, body)
	}
}
