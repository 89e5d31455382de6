package cli

import (
	"strings"
	"testing"
)

// TestNoopPlanReadsNoSetup: a plan that changes nothing needs neither the
// node's bridges nor its templates (both are checked only for a change:
// a create, a replace, a move), nor the HA resources when the listing's
// hastate shows no container under HA and no app asks for ha: (issue 30:
// 10 requests for a one-app no-op plan, the peer 3). Nor the node's
// storage list: the storages the keepers' records name are listed
// directly, as a volume's size and presence can make a change.
func TestNoopPlanReadsNoSetup(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.srv.ResetRequests()
	r := c.run("plan", "-f", m)
	stats, total := c.srv.Requests()
	for _, s := range stats {
		t.Logf("%s %d", s.Endpoint, s.Count)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "No changes") {
		t.Fatalf("plan after apply: exit %d, want 0 and No changes\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := map[string]int{"GET /nodes/{node}/network": 0, "GET /cluster/ha/resources": 0, "GET /nodes/{node}/storage": 0,
		"GET /nodes/{node}/storage/{storage}/content": 1}
	for ep, n := range want {
		if got := c.requestCount(ep); got != n {
			t.Errorf("no-op plan (%d requests): %s read %d times, want %d", total, ep, got, n)
		}
	}
	if total > 6 {
		t.Errorf("no-op plan made %d requests, want at most 6", total)
	}
}

// TestPlanWithAChangeStillChecksTheBridge: the setup left out of a no-op
// plan is read as soon as the plan has a change, so a change to a bridge
// the node lacks is still refused before apply, not by PVE.
func TestPlanWithAChangeStillChecksTheBridge(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	changed := writeManifest(t, strings.Replace(strings.ReplaceAll(appManifest, "MEMORY", "512"), "    cores: 1\n", "    cores: 1\n    network:\n      bridge: vmbr9\n", 1))
	c.srv.ResetRequests()
	r := c.run("plan", "-f", changed)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "bridge vmbr9 does not exist on node") {
		t.Fatalf("plan with a missing bridge: exit %d, want a refusal naming the bridge\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := c.requestCount("GET /nodes/{node}/network"); n != 1 {
		t.Errorf("plan with a change read the bridges %d times, want once", n)
	}
}

// TestPlanOfAGrowReadsTheSetup: a change found on the records' storages
// alone (a volume grown in the manifest) is planned again on the whole
// setup, the storage list read once.
func TestPlanOfAGrowReadsTheSetup(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	grown := writeManifest(t, strings.Replace(strings.ReplaceAll(appManifest, "MEMORY", "512"), "size: 1G", "size: 2G", 1))
	c.srv.ResetRequests()
	r := c.run("plan", "-f", grown)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "2 GiB, was 1 GiB") {
		t.Fatalf("plan of a grown volume: exit %d, want %d\n%s%s", r.code, ExitChanges, r.stdout, r.stderr)
	}
	for _, ep := range []string{"GET /nodes/{node}/storage", "GET /nodes/{node}/network"} {
		if n := c.requestCount(ep); n != 1 {
			t.Errorf("plan of a grown volume read %s %d times, want once", ep, n)
		}
	}
}
