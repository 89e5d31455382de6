package cli

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
)

// placementManifest has n apps that name no node.
func placementManifest(n int, extra string) string {
	var b strings.Builder
	b.WriteString(extra)
	b.WriteString("apps:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: app%02d\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    memory: 256\n    rootfs:\n      size: 1G\n", i)
	}
	return b.String()
}

// appsPerNode counts corral's app containers on each node.
func (c *cluster) appsPerNode() map[string]int {
	got := map[string]int{}
	for _, r := range c.srv.Cluster().Resources("vm") {
		if strings.Contains(r.Tags, "corral-app-") {
			got[r.Node]++
		}
	}
	return got
}

// TestPlacementOnThreeNodes: thirty apps that name no node are spread ten
// to a node of a three-node cluster, the plan says where and why, and an
// app added later is placed without moving any other (issue 18).
func TestPlacementOnThreeNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(3))
	m := writeManifest(t, placementManifest(30, ""))
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "placed on pve1 by policy spread (corral apps: pve1 0, pve2 0, pve3 0)") ||
		!strings.Contains(r.stdout, "placed on pve3 by policy spread (corral apps: pve1 10, pve2 10, pve3 9)") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if got, want := c.appsPerNode(), map[string]int{"pve1": 10, "pve2": 10, "pve3": 10}; !maps.Equal(got, want) {
		t.Fatalf("apps per node %v, want %v", got, want)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s", r.code, r.stdout)
	}

	// One more app, allowed only on pve2 and pve3, with the memory policy.
	m2 := writeManifest(t, placementManifest(31, "placement:\n  policy: memory\n  nodes: [pve2, pve3]\n"))
	r = c.run("plan", "-f", m2)
	if r.code != ExitChanges || strings.Count(r.stdout, "(create on") != 1 || !strings.Contains(r.stdout, "app app30 (create on pve2)") ||
		!strings.Contains(r.stdout, "by policy memory (memory not given to guests: pve2 ") {
		t.Fatalf("plan of one more app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	if got, want := c.appsPerNode(), map[string]int{"pve1": 10, "pve2": 11, "pve3": 10}; !maps.Equal(got, want) {
		t.Fatalf("apps per node %v, want %v", got, want)
	}
}
