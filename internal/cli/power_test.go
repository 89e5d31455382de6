package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// corral stop, start and restart (issue 16, item 13).
func TestPowerVerbs(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, threeVolumes("alpha"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	r := c.mustC("stop", "alpha", "-f", m)
	if !strings.Contains(r.stdout, "is stopped") {
		t.Errorf("stop: %s", r.stdout)
	}
	if st := c.status(m).Apps[0]; st.Containers[0].Status != "stopped" || st.Drift != "update" {
		t.Errorf("after stop: %+v", st)
	}
	var out struct {
		Status string `json:"status"`
	}
	r = c.mustC("start", "alpha", "-f", m, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Status != "running" {
		t.Errorf("start -o json: %s (%v)", r.stdout, err)
	}
	r = c.mustC("restart", "alpha", "-f", m)
	if !strings.Contains(r.stdout, "is running") || !strings.Contains(r.stderr, "stop") {
		t.Errorf("restart:\n%s\n%s", r.stdout, r.stderr)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after restart: exit %d\n%s", r.code, r.stdout)
	}
	if r := c.runC("stop", "nosuch", "-f", m); r.code != ExitError || !strings.Contains(r.stderr, "no container") {
		t.Errorf("stop of an unknown app: exit %d\n%s", r.code, r.stderr)
	}
}

// status --exit-code: 0 in sync, 2 drift (issue 16, item 7).
func TestStatusExitCode(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, threeVolumes("alpha"))
	if r := c.run("status", "-f", m, "--exit-code"); r.code != ExitChanges {
		t.Errorf("status --exit-code before apply: exit %d", r.code)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if r := c.run("status", "-f", m, "--exit-code", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"in_sync": true`) {
		t.Errorf("status --exit-code in sync: exit %d\n%s", r.code, r.stdout)
	}
	c.mustC("stop", "alpha", "-f", m)
	if r := c.run("status", "-f", m, "--exit-code"); r.code != ExitChanges {
		t.Errorf("status --exit-code after stop: exit %d", r.code)
	}
	if r := c.run("status", "-f", m); r.code != 0 {
		t.Errorf("status without --exit-code: exit %d", r.code)
	}
}

// Commands without a JSON form refuse -o json rather than ignore it
// (issue 16, item 14).
func TestNoJSONFormRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, threeVolumes("alpha"))
	for _, args := range [][]string{{"exec", "alpha", "-f", m, "-o", "json", "--", "true"}, {"logs", "alpha", "-f", m, "-o", "json"}} {
		if r := c.runC(args...); r.code != ExitError || !strings.Contains(r.stderr, "no JSON form") {
			t.Errorf("corral %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
