package hostcheck

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestAllowed(t *testing.T) {
	hostname, _ := os.Hostname()
	cases := []struct {
		listen string
		extra  []string
		host   string
		want   bool
	}{
		{"127.0.0.1:9120", nil, "127.0.0.1:9120", true},
		{"127.0.0.1:9120", nil, "localhost:9120", true},
		{"127.0.0.1:9120", nil, "LOCALHOST.:8000", true}, // a port forward changes the port
		{"127.0.0.1:9120", nil, "[::1]:9120", true},
		{"127.0.0.1:9120", nil, "10.0.0.1:8006", true}, // any address: NAT, the bridge's forward
		{"127.0.0.1:9120", nil, "", true},
		{"127.0.0.1:9120", nil, "evil.example:9120", false},
		{"127.0.0.1:9120", nil, "evil.example", false},
		{"127.0.0.1:9120", nil, "localhost.evil.example:9120", false},
		{"127.0.0.1:9120", nil, hostname + ":9120", hostname == "localhost"},
		{"0.0.0.0:9120", nil, hostname + ":9120", true},
		{"192.0.2.7:9120", nil, strings.ToUpper(hostname), true},
		{"localhost:9120", nil, "localhost:9120", true},
		{"agent.lan:9120", nil, "agent.lan:9120", true},
		{"127.0.0.1:9120", []string{"status.example"}, "status.example:9120", true},
		{"127.0.0.1:9120", []string{"status.example:443"}, "Status.Example", true},
		{"127.0.0.1:9120", []string{"status.example"}, "other.example", false},
	}
	for _, c := range cases {
		a := ForListen(c.listen, c.extra, "--allowed-host")
		if got := a.Allowed(c.host); got != c.want {
			t.Errorf("listen %s extra %v: Allowed(%q) = %v, want %v (names %v)", c.listen, c.extra, c.host, got, c.want, a.Names())
		}
	}
}

// A rebinding-style request (to 127.0.0.1:port, Host evil.example:port)
// is refused with 421 and a text that names the flag; the same request
// under the server's address passes.
func TestHandler_rebinding(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret status") })
	srv := httptest.NewServer(ForListen("127.0.0.1:0", nil, "--allowed-host").Handler(next, false))
	defer srv.Close()
	get := func(host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/apps", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	code, body := get("evil.example:" + port)
	if code != http.StatusMisdirectedRequest || strings.Contains(body, "secret") || !strings.Contains(body, "--allowed-host evil.example") {
		t.Errorf("rebinding request: %d %q", code, body)
	}
	for _, h := range []string{"", "127.0.0.1:" + port, "localhost:" + port} {
		if code, body := get(h); code != http.StatusOK || body != "secret status" {
			t.Errorf("Host %q: %d %q", h, code, body)
		}
	}
}

// As a proxy's guard, absolute-form requests and CONNECT pass (their
// Host is the target); an origin-form request is checked.
func TestHandler_proxy(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "proxied") })
	h := ForListen("10.0.0.1:3142", nil, "").Handler(next, true)
	for _, c := range []struct {
		method, target, host string
		want                 int
	}{
		{"GET", "http://deb.debian.org/debian/dists/bookworm/InRelease", "deb.debian.org", 200},
		{"CONNECT", "deb.debian.org:443", "deb.debian.org:443", 200},
		{"GET", "/debian/dists/bookworm/InRelease", "evil.example:3142", 421},
		{"GET", "/debian/dists/bookworm/InRelease", "10.0.0.1:3142", 200},
	} {
		req := httptest.NewRequest(c.method, c.target, nil)
		req.Host = c.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s %s Host %s: %d, want %d: %s", c.method, c.target, c.host, w.Code, c.want, w.Body)
		}
	}
}

func TestCheckNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"status.example", true},
		{"Status.Example:8443", true},
		{"[::1]:9120", true},
		{"my_host", true},
		{"", false},
		{":8080", false},
		{"http://status.example", false},
		{"status.example/path", false},
		{"two words", false},
	} {
		err := CheckNames("--allowed-host", []string{c.name})
		if (err == nil) != c.ok {
			t.Errorf("CheckNames(%q) = %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--allowed-host") {
			t.Errorf("CheckNames(%q): %v does not name the flag", c.name, err)
		}
	}
}
