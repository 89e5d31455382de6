package cli

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/testenv"
)

const healthManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    volumes:
      - {name: data, size: 1G, mount: /srv/data}
    health:
      - name: not broken
        command: test ! -e /srv/data/broken
        retries: 2
        interval: 10s
`

// vzstarts counts the start tasks of vmid.
func (c *cluster) vzstarts(vmid int) int {
	c.t.Helper()
	tasks, err := c.pveClient().TaskList(context.Background(), "pve", pve.TaskFilter{VMID: vmid, Type: "vzstart", Source: "all", Limit: 1000})
	if err != nil {
		c.t.Fatal(err)
	}
	return len(tasks)
}

// A health check that fails retries+1 times in a row restarts the app's
// container (under corral's lock), the event and the metrics show it, a
// second restart waits for the backoff, and the check passing again is
// reported.
func TestAgent_healthRestartsApp(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "the emulator's guest view")
	c := newGuestCluster(t)
	m := writeManifest(t, healthManifest)
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code != 0 {
		needGuestExec(t, r.stderr)
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	st := c.status(m)
	vmid, vol := st.Apps[0].Containers[0].VMID, st.Apps[0].Volumes[0].VolID
	r := c.newAgentRig(m, "observe", time.Now(), func(a *agentArgs) { a.backoff = 5 * time.Minute })
	r.tick()
	if h := r.app("web"); h.Health != "healthy" || h.Checks[0].Status != "healthy" {
		t.Fatalf("health before the break: %+v\n%s", h, r.stderr)
	}
	starts := c.vzstarts(vmid)

	if err := os.WriteFile(c.file(vol, "broken"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	seq := r.lastSeq()
	// Not due before its interval: the check does not run again yet.
	r.clock.Add(5 * time.Second)
	r.tick()
	if h := r.app("web"); h.Health != "healthy" {
		t.Fatalf("check ran before its interval: %+v", h)
	}
	for i := 1; i <= 2; i++ {
		r.clock.Add(10 * time.Second)
		r.tick()
		if h := r.app("web"); h.Health != "unhealthy" || h.Checks[0].Failures != i || h.Restarts != 0 {
			t.Fatalf("after failure %d: %+v", i, h)
		}
	}
	if got := c.vzstarts(vmid); got != starts {
		t.Fatalf("restarted before 3 failures: %d starts, was %d", got, starts)
	}
	r.clock.Add(10 * time.Second)
	r.tick()
	restarts := r.events(agent.KindRestart, seq)
	if !hasEvent(restarts, "web", "failed 3 times in a row") || !hasEvent(restarts, "web", "app web restarted") {
		t.Fatalf("restart events: %+v\nall: %+v\n%s", restarts, r.events("", seq), r.stderr)
	}
	if got := c.vzstarts(vmid); got != starts+1 {
		t.Errorf("vzstart tasks = %d after the restart, want %d", got, starts+1)
	}
	if h := r.app("web"); h.Restarts != 1 || r.metric("corral_agent_restarts_total", "app", "web", "result", "ok") != 1 ||
		r.metric("corral_agent_app_healthy", "app", "web") != 0 || r.metric("corral_agent_health_check_failures_total", "app", "web") != 3 {
		t.Errorf("after the restart: %+v", h)
	}
	if !hasEvent(r.events(agent.KindHealth, seq), "web", `"not broken" of app web failed`) {
		t.Errorf("no health failure event: %+v", r.events("", seq))
	}

	// Still broken: three more failures, but the backoff (5m) holds the
	// next restart back.
	for i := 0; i < 3; i++ {
		r.clock.Add(10 * time.Second)
		r.tick()
	}
	if h := r.app("web"); h.Restarts != 1 || h.Checks[0].Failures != 3 {
		t.Fatalf("restarted within the backoff: %+v", h)
	}
	r.clock.Add(5 * time.Minute)
	r.tick()
	if h := r.app("web"); h.Restarts != 2 {
		t.Fatalf("no restart after the backoff: %+v\n%+v", h, r.events("", seq))
	}

	// Repaired: the next run passes and says so.
	if err := os.Remove(c.file(vol, "broken")); err != nil {
		t.Fatal(err)
	}
	r.clock.Add(10 * time.Second)
	r.tick()
	if h := r.app("web"); h.Health != "healthy" || !hasEvent(r.events(agent.KindHealth, seq), "web", "passes again") {
		t.Errorf("after the repair: %+v %+v", h, r.events("", seq))
	}
}
