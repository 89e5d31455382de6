package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/testenv"
)

// keeperVMID is the VMID of the node's first keeper (it holds the lock).
func (c *cluster) keeperVMID(m string) int {
	c.t.Helper()
	r := c.mustRun("status", "-f", m, "-o", "json")
	var st struct {
		Keepers []struct{ VMID int } `json:"keepers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Keepers) == 0 {
		c.t.Fatalf("keepers: %v\n%s", err, r.stdout)
	}
	return st.Keepers[0].VMID
}

// corral agent as a process runs: it serves, reconciles a drift on its
// own, logs JSON with --log-format json, answers corral agent status, and
// on a stop request (SIGTERM, Ctrl-C) in the middle of a reconcile it
// finishes the step under way, releases corral's lock and exits 0.
func TestAgent_runAndGracefulStop(t *testing.T) {
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	keeper := c.keeperVMID(m)
	vmid := c.drift(m, "1024")
	c.srv.SetFaults(sim.FaultSpec{Latency: 20 * time.Millisecond})

	started := make(chan net.Addr, 1)
	agentStarted = func(_ *agent.Agent, addr net.Addr) { started <- addr }
	t.Cleanup(func() { agentStarted = nil })
	stop := make(chan struct{})
	var stderr bytes.Buffer
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() {
		args := append([]string{"agent", "-f", m, "--listen", "127.0.0.1:0", "--mode", "reconcile", "--log-format", "json"}, c.connArgs()...)
		done <- Run(WithStop(context.Background(), stop), args, strings.NewReader(""), &stdout, &lockedWriter{w: &stderr})
	}()
	var addr net.Addr
	select {
	case addr = <-started:
	case code := <-done:
		t.Fatalf("agent exited %d before serving\n%s", code, stderr.String())
	}
	// Stop it as soon as it holds the lock: in the middle of its
	// reconcile (or, if that was too quick to see, right after it).
	sawLock := false
	testenv.WaitFor(t, "the agent's lock or its change", func() bool {
		text, err := c.srv.Cluster().ConfigText(keeper)
		if err != nil {
			t.Fatal(err)
		}
		sawLock = strings.Contains(text, "corral-lock")
		return sawLock || c.config(vmid)["memory"] == "512"
	})
	c.srv.SetFaults(sim.FaultSpec{})

	// agent status reads the running agent's API.
	url := "http://" + addr.String()
	r := runCorral(t, "agent", "status", "--url", url, "-o", "json")
	var st struct {
		Status agent.Status  `json:"status"`
		Events []agent.Event `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); r.code != 0 || err != nil || st.Status.Mode != "reconcile" || len(st.Status.Apps) != 1 {
		t.Errorf("agent status -o json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if r := runCorral(t, "agent", "status", "--url", url); r.code != 0 || !strings.Contains(r.stdout, "notes") || !strings.Contains(r.stdout, "reconcile mode") {
		t.Errorf("agent status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	close(stop)
	code := <-done
	if code != 0 {
		t.Fatalf("agent exit %d after a stop request, want 0\n%s", code, stderr.String())
	}
	t.Logf("stop requested while the agent held the lock: %v", sawLock)
	text, err := c.srv.Cluster().ConfigText(keeper)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "corral-lock") {
		t.Errorf("the agent left its lock behind:\n%s", text)
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Errorf("the server still answers after the agent exited")
	}
	// Every log line is JSON; the stop is logged.
	stopped := false
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("log line not JSON: %q", sc.Text())
			continue
		}
		if line["msg"] == "agent stopped on request" {
			stopped = true
		}
	}
	if !stopped {
		t.Errorf("no stop logged:\n%s", stderr.String())
	}
	// Whatever the stop interrupted, the next apply finishes it.
	c.mustRun("apply", "-f", m, "--auto-approve")
	if got := c.config(vmid)["memory"]; got != "512" {
		t.Errorf("memory = %s", got)
	}
}
