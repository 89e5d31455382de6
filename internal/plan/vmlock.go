package plan

import (
	"fmt"
	"slices"
)

// corral's lock on a node is a lease in the Notes of the node's keeper
// container (internal/apply/lock.go), written with a compare-and-swap on
// its config: the one point every corral agrees on, however its manifest
// mixes containers and VMs. A manifest of kind: vm apps alone still takes
// it, so on a node without a keeper CT apply creates one first, from a
// container template. Keeping the lease in the keeper VM's Notes instead
// would give a node two places for it (a VM-only corral's keeper VM, a
// container corral's keeper CT) unless every corral read both on every
// take, including the claim on an empty node (lockclaim.go), which waits
// only for containers being created; that is not done yet (issue 34).
// Until it is, the plan says why the container comes and what it needs.

// keeperTemplateHint is the template a node without any is told to
// download for the lock's keeper CT.
const keeperTemplateHint = "debian-12-standard_12.12-1_amd64.tar.zst"

// vmLockReasons adds to the first changing VM app of each node that has
// no keeper CT, and where the plan changes no container, why apply
// creates a keeper container there and from which template.
func vmLockReasons(p *Plan, obs *Observed) {
	said := map[string]bool{}
	for _, c := range p.Changes {
		if c.Kind != KindVM || c.Action == NoOp || c.Node == "" || said[c.Node] {
			continue
		}
		node := c.Node
		if len(obs.Keepers[node]) > 0 || slices.ContainsFunc(p.Changes, func(o Change) bool { return o.Kind != KindVM && o.Node == node && o.Action != NoOp }) ||
			slices.ContainsFunc(p.Keepers, func(k KeeperChange) bool { return k.Node == node }) {
			continue
		}
		said[node] = true
		i := slices.IndexFunc(p.Changes, func(o Change) bool { return o.App == c.App && o.Kind == KindVM && o.Node == node })
		p.Changes[i].Reasons = append(p.Changes[i].Reasons, vmLockReason(node, obs))
	}
}

// vmLockReason is the reason vmLockReasons adds for node.
func vmLockReason(node string, obs *Observed) string {
	why := fmt.Sprintf("node %s has no keeper container, and corral's lock lives in one (a lease in its Notes, the one compare-and-swap point every corral agrees on): "+
		"apply first creates a keeper CT there (protected, never holding this app's data)", node)
	fix := fmt.Sprintf("download one first (pveam download local %s, or Datacenter > Storage > CT Templates)", keeperTemplateHint)
	switch t := obs.Templates[node]; {
	case obs.SetupDeferred:
		return why + " from the first container template the node has; with none, apply stops before any change: " + fix
	case len(t) > 0:
		return why + " from container template " + t[0]
	default:
		return why + ", from a container template, and the node has none: apply stops before any change; " + fix
	}
}
