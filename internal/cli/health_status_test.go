package cli

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
)

// statusHealthManifest's check counts its runs in /srv/data/ran, so a
// test can tell whether status ran it.
const statusHealthManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    volumes:
      - {name: data, size: 1G, mount: /srv/data}
    health:
      - name: not broken
        command: echo run >> /srv/data/ran; if test -e /srv/data/broken; then echo "broken since $(cat /srv/data/broken)"; exit 1; fi
        retries: 1
        interval: 1s
`

// healthJSON is the health part of `corral status -o json`.
type healthJSON struct {
	InSync bool `json:"in_sync"`
	Apps   []struct {
		App          string `json:"app"`
		Health       string `json:"health"`
		HealthDetail string `json:"health_detail"`
	} `json:"apps"`
}

// healthCluster applies statusHealthManifest on a cluster whose guests run
// commands, and returns it with the manifest and the app's volume.
func healthCluster(t *testing.T) (*cluster, string, string) {
	t.Helper()
	testenv.NeedRoot(t, "the emulator's guest view")
	c := newGuestCluster(t)
	m := writeManifest(t, statusHealthManifest)
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code != 0 {
		needGuestExec(t, r.stderr)
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	return c, m, c.status(m).Apps[0].Volumes[0].VolID
}

// statusHealth runs corral status -o json with args and decodes it.
func (c *cluster) statusHealth(m string, args ...string) healthJSON {
	c.t.Helper()
	r := c.run(append([]string{"status", "-f", m, "-o", "json"}, args...)...)
	if r.code != 0 {
		c.t.Fatalf("status %v: exit %d\n%s", args, r.code, r.stderr)
	}
	var h healthJSON
	if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
		c.t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	return h
}

// runs counts the runs of the health check, from the file it appends to.
func runs(t *testing.T, c *cluster, vol string) int {
	t.Helper()
	b, err := os.ReadFile(c.file(vol, "ran"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

// Issue 28: status shows each app's health from its checks (text and
// JSON), --no-health skips them, an unhealthy app leaves status's exit
// code (and --exit-code) alone, and start/restart wait for health and
// fail naming the check and its output when it does not come.
func TestStatus_healthFromChecks(t *testing.T) {
	t.Parallel()
	c, m, vol := healthCluster(t)

	h := c.statusHealth(m)
	if h.Apps[0].Health != "healthy" || !h.InSync {
		t.Fatalf("healthy app: %+v", h)
	}
	if r := c.mustRun("status", "-f", m); !strings.Contains(r.stdout, "HEALTH") || !strings.Contains(r.stdout, "healthy") {
		t.Errorf("status text has no HEALTH column:\n%s", r.stdout)
	}

	if err := os.WriteFile(c.file(vol, "broken"), []byte("noon"), 0o644); err != nil {
		t.Fatal(err)
	}
	h = c.statusHealth(m)
	if a := h.Apps[0]; a.Health != "unhealthy" || !strings.Contains(a.HealthDetail, "not broken") || !strings.Contains(a.HealthDetail, "broken since noon") {
		t.Fatalf("broken app: %+v", a)
	}
	if !h.InSync {
		t.Errorf("in_sync is about the manifest, not health: %+v", h)
	}
	r := c.run("status", "-f", m, "--exit-code")
	if r.code != 0 || !strings.Contains(r.stdout, "unhealthy") || !strings.Contains(r.stdout, "not broken") {
		t.Errorf("status --exit-code of an unhealthy app in sync: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	before := runs(t, c, vol)
	h = c.statusHealth(m, "--no-health")
	if a := h.Apps[0]; a.Health != "unknown" || !strings.Contains(a.HealthDetail, "--no-health") {
		t.Errorf("--no-health: %+v", a)
	}
	if got := runs(t, c, vol); got != before {
		t.Errorf("--no-health ran the check: %d runs, was %d", got, before)
	}

	for _, verb := range []string{"restart", "start"} {
		if verb == "start" {
			c.mustC("stop", "web", "-f", m)
		}
		r := c.runC(verb, "web", "-f", m)
		if r.code == 0 || !strings.Contains(r.stderr, `health check "not broken" did not pass`) || !strings.Contains(r.stderr, "broken since noon") {
			t.Errorf("%s of an unhealthy app: exit %d\n%s%s", verb, r.code, r.stdout, r.stderr)
		}
	}

	if err := os.Remove(c.file(vol, "broken")); err != nil {
		t.Fatal(err)
	}
	if r := c.runC("restart", "web", "-f", m, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"health": "healthy"`) {
		t.Errorf("restart of a repaired app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Issue 28: the agent's in sync excludes an app that is not healthy.
func TestAgent_unhealthyAppIsNotInSync(t *testing.T) {
	t.Parallel()
	c, m, vol := healthCluster(t)
	r := c.newAgentRig(m, "observe", time.Now(), nil)
	r.tick()
	if st := r.ag.Status(); !st.InSync || r.app("web").Health != "healthy" {
		t.Fatalf("before the break: in sync %v, %+v\n%s", st.InSync, r.app("web"), r.stderr)
	}
	if v := r.metric("corral_agent_in_sync"); v != 1 {
		t.Fatalf("corral_agent_in_sync = %v before the break", v)
	}
	if err := os.WriteFile(c.file(vol, "broken"), []byte("noon"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.clock.Add(time.Minute)
	r.tick()
	if st := r.ag.Status(); st.InSync || r.app("web").Health != "unhealthy" {
		t.Errorf("unhealthy app: in sync %v, %+v\n%s", st.InSync, r.app("web"), r.stderr)
	}
	if v := r.metric("corral_agent_in_sync"); v != 0 {
		t.Errorf("corral_agent_in_sync = %v while web is unhealthy", v)
	}
	w := httptest.NewRecorder()
	r.ag.Handler("").ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if page := w.Body.String(); !strings.Contains(page, `id="sync">not in sync<`) {
		t.Errorf("the status page does not say not in sync:\n%s", page)
	}
}
