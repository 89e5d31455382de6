package bench

import (
	"strings"
	"testing"
)

// TestPeerConfigSetsWhatTheWorkloadSets: the peer's containers are the
// workload's (nesting included: without it the create task ends with a
// warning that bpg's provider takes for a failure), so the two tools do
// the same work.
func TestPeerConfigSetsWhatTheWorkloadSets(t *testing.T) {
	w, p := workload(3, 1, false), peerConfig(3)
	for _, c := range []struct{ workload, peer string }{
		{"features: {nesting: true}", "nesting = true"},
		{"size: 1G", `size   = "1G"`},
		{"mount: /srv/data", `path   = "/srv/data"`},
		{"local:vztmpl/" + debian12, `"local:vztmpl/` + debian12 + `"`},
	} {
		if !strings.Contains(w, c.workload) || !strings.Contains(p, c.peer) {
			t.Errorf("workload has %q: %v; peer has %q: %v", c.workload, strings.Contains(w, c.workload), c.peer, strings.Contains(p, c.peer))
		}
	}
	if n := strings.Count(w, "features: {nesting: true}"); n != 3 {
		t.Errorf("workload sets nesting on %d of 3 apps", n)
	}
}
