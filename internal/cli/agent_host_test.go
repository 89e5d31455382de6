package cli

import (
	"bytes"
	"context"
	"github.com/corralhq/corral/internal/testenv"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/agent"
)

// corral agent answers only its own names in the Host header: a request
// to its loopback address under another name (what a web page that
// rebinds its name to 127.0.0.1 sends) gets 421 on every path, while
// the address, localhost, an --allowed-host name and corral agent status
// still get through.
func TestAgent_hostAllowList(t *testing.T) {
	c := newCluster(t)
	m := manifestWith(t, "512")
	started := make(chan net.Addr, 1)
	agentStarted = func(_ *agent.Agent, addr net.Addr) { started <- addr }
	t.Cleanup(func() { agentStarted = nil })
	stop := make(chan struct{})
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		args := append([]string{"agent", "-f", m, "--listen", "127.0.0.1:0", "--allowed-host", "status.example"}, c.connArgs()...)
		done <- Run(WithStop(context.Background(), stop), args, strings.NewReader(""), io.Discard, &lockedWriter{w: &stderr})
	}()
	var addr net.Addr
	select {
	case addr = <-started:
	case code := <-done:
		t.Fatalf("agent exited %d before serving\n%s", code, stderr.String())
	}
	defer func() { close(stop); <-done }()
	_, port, _ := net.SplitHostPort(addr.String())
	get := func(path, host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr.String()+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/", "/api/v1/apps", "/api/v1/events", "/metrics", "/healthz"} {
		code, body := get(path, "evil.example:"+port)
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--allowed-host evil.example") || strings.Contains(body, "notes") {
			t.Errorf("%s with Host evil.example: %d %q", path, code, body)
		}
		for _, host := range []string{addr.String(), "localhost:" + port, "status.example:" + port} {
			if code, body := get(path, host); code != http.StatusOK {
				t.Errorf("%s with Host %s: %d %q", path, host, code, body)
			}
		}
	}
	// The agent lists its apps once its first look at the cluster is
	// done, which a loaded machine delays: wait for it, not a guess.
	var r result
	testenv.WaitFor(t, "agent status to list the app", func() bool {
		r = runCorral(t, "agent", "status", "--url", "http://"+addr.String())
		return r.code != 0 || strings.Contains(r.stdout, "notes")
	})
	if r.code != 0 || !strings.Contains(r.stdout, "notes") {
		t.Errorf("agent status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// --allowed-host takes a host name; a URL is refused, naming the flag,
// by each command that takes it, before anything is read or served.
func TestAgent_allowedHostRefused(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"agent", "-f", "nope.yaml"},
		{"agent", "install", "-f", "nope.yaml"},
		{"sim", "serve", "--state", t.TempDir()},
	} {
		r := runCorral(t, append(args, "--allowed-host", "http://status.example/")...)
		if r.code == 0 || !strings.Contains(r.stderr, `--allowed-host "http://status.example/": want a host name`) {
			t.Errorf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}
}
