package cli

import (
	"testing"
)

// requestCount is how many requests the emulator answered for endpoint
// (as Requests names it: "GET /nodes/{node}/network").
func (c *cluster) requestCount(endpoint string) int {
	stats, _ := c.srv.Requests()
	for _, s := range stats {
		if s.Endpoint == endpoint {
			return s.Count
		}
	}
	return 0
}

// TestApplyAndDestroyReadTheSetupOnce: one corral apply reads the cluster
// for its preflight, the plan it shows, the plan under the lock and the
// final check, and destroy for its plans and checks; the node list, a
// node's bridges and its storage list are read once per run, not once per
// read of the cluster (issue 30: 4 of each in a one-app apply).
func TestApplyAndDestroyReadTheSetupOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	for _, cmd := range [][]string{{"apply", "-f", m, "--auto-approve"}, {"destroy", "-f", m, "--auto-approve"}} {
		c.srv.ResetRequests()
		c.mustRun(cmd...)
		_, total := c.srv.Requests()
		for _, ep := range []string{"GET /nodes", "GET /nodes/{node}/network", "GET /nodes/{node}/storage"} {
			if n := c.requestCount(ep); n != 1 {
				t.Errorf("corral %s (%d requests): %s read %d times, want once (one node)", cmd[0], total, ep, n)
			}
		}
	}
}
