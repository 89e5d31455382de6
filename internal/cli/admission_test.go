package cli

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim"
)

// TestApply_nodeMemoryFull: on an emulator whose node has memory for two
// 512 MiB apps, an apply of three starts two and fails the third, naming
// the app, the start task's PVE exit status and, from its log, why and
// what to do (issue 28: a 1,000-app apply on real containers exhausted
// the host). Stopping an app makes room for another, and corral start says the
// same when there is none.
func TestApply_nodeMemoryFull(t *testing.T) {
	t.Parallel()
	c := newCluster(t, func(o *sim.Options) { o.NodeMemory = 1 << 30 })
	m := writeManifest(t, strings.ReplaceAll(placementManifest(3, ""), "memory: 256", "memory: 512"))
	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stderr, ": start: task vzstart 10") ||
		!strings.Contains(r.stderr, "' failed: not enough memory on node 'pve' to start CT 10") ||
		!strings.Contains(r.stderr, "it needs 512 MiB, and the 2 CT(s) running there hold 1024 of the node's 1024 MiB; stop a CT, lower this CT's memory, or run the emulator with more (corral sim serve --node-memory SIZE)") {
		t.Fatalf("apply on a full node: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	running := 0
	var stopped string
	for _, g := range c.srv.Cluster().Resources("vm") {
		if !strings.Contains(g.Tags, "corral-app-") {
			continue
		}
		if g.Status == "running" {
			running++
		} else {
			stopped = g.Name
		}
	}
	if running != 2 || stopped == "" {
		t.Fatalf("%d apps running, stopped %q; want 2 and one stopped", running, stopped)
	}
	other := "app00"
	if stopped == other {
		other = "app01"
	}
	c.mustC("stop", other, "-f", m)
	c.mustC("start", stopped, "-f", m)
	if r := c.runC("start", other, "-f", m); r.code == 0 || !strings.Contains(r.stderr, "not enough memory on node 'pve' to start CT") {
		t.Fatalf("start of %s on the full node again: exit %d\n%s%s", other, r.code, r.stdout, r.stderr)
	}
}
