package sim

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// The emulator's API answers only its own names in the Host header: a
// request to its loopback port under another name (a web page that
// rebound its name to 127.0.0.1, with root's ticket in the browser) gets
// 421, while the address, the certificate's names and an --allowed-host
// name get the API.
func TestHostAllowList(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), AllowedHosts: []string{"pve.lan"}})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(k.srv.URL(), "https://"))
	get := func(host string) (int, string) {
		req := k.request(k.root(), http.MethodGet, "/nodes", nil)
		req.Host = host
		resp, err := k.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("evil.example:" + port)
	if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--allowed-host evil.example") || strings.Contains(body, `"node"`) {
		t.Errorf("Host evil.example: %d %q", code, body)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "pve.sim.invalid:" + port, "pve.lan:" + port, "10.0.0.1:8006"} {
		if code, body := get(host); code != http.StatusOK || !strings.Contains(body, `"node"`) {
			t.Errorf("Host %s: %d %q", host, code, body)
		}
	}
}
