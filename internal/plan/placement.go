package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/ui/human"
)

// Placement is how corral chooses a node for an app that names none, when
// it creates the app's container.
type Placement struct {
	// Policy is "spread" (the allowed node with the fewest corral apps,
	// the default) or "memory" (the allowed node with the most memory not
	// yet given to guests).
	Policy string
	// Nodes are the nodes allowed; nil allows every node.
	Nodes []string
}

// placer chooses nodes for the apps of one plan. It counts what the plan
// has already placed, so thirty new apps spread over three nodes instead
// of all going to the emptiest one. Apps that exist are never moved: a
// re-plan places only what is new, so adding an app moves no other.
type placer struct {
	obs  *Observed
	apps map[string]int   // node → corral app containers, observed and placed
	mem  map[string]int64 // node → memory given to guests, observed and placed
	// avoid is a node being drained: no app is placed there, and the
	// apps leaving it are placed afresh (see PlaceAway).
	avoid string
}

func newPlacer(obs *Observed) *placer {
	pl := &placer{obs: obs, apps: map[string]int{}, mem: map[string]int64{}}
	for _, cts := range obs.Apps {
		for _, ct := range cts {
			pl.apps[ct.Node]++
		}
	}
	for n, m := range obs.GuestMemory {
		pl.mem[n] = m
	}
	return pl
}

// place returns the node of app a and, when corral chose it, why.
func (pl *placer) place(a *App) (node, why string, err error) {
	obs := pl.obs
	if cts := obs.Apps[a.Name]; len(cts) > 0 && a.Node == "" && pl.avoid == "" {
		return cts[0].Node, "", nil
	}
	if a.Node != "" {
		if !slices.Contains(obs.Nodes, a.Node) {
			return "", "", fmt.Errorf("app %s: node %q does not exist (nodes: %s)", a.Name, a.Node, strings.Join(obs.Nodes, ", "))
		}
		if len(obs.Apps[a.Name]) == 0 {
			pl.take(a, a.Node)
		}
		return a.Node, "", nil
	}
	// An app that comes back goes where its data is.
	if n := retainedNode(a.Name, obs); n != "" && pl.avoid == "" {
		pl.take(a, n)
		if len(obs.Nodes) == 1 {
			return n, "", nil
		}
		return n, fmt.Sprintf("placed on %s, where the keeper holds its retained volumes", n), nil
	}
	return pl.placeNew(a)
}

// placeNew chooses a node for a new container by the placement policy
// among the allowed nodes that answer (also for an app recovered from an
// offline node: its pinned node is the dead one).
func (pl *placer) placeNew(a *App) (node, why string, err error) {
	obs := pl.obs
	allowed := a.Placement.Nodes
	if len(allowed) == 0 {
		allowed = obs.Nodes
	}
	var candidates []string
	for _, n := range allowed {
		if !slices.Contains(obs.Nodes, n) {
			return "", "", fmt.Errorf("app %s: placement.nodes names node %q, which does not exist (nodes: %s)", a.Name, n, strings.Join(obs.Nodes, ", "))
		}
		if !slices.Contains(obs.Offline, n) && n != pl.avoid {
			candidates = append(candidates, n)
		}
	}
	slices.Sort(candidates)
	if len(candidates) == 0 {
		return "", "", fmt.Errorf("app %s: no online node to place it on (allowed: %s; offline: %s); set node: or wait for a node to come back",
			a.Name, strings.Join(allowed, ", "), strings.Join(obs.Offline, ", "))
	}
	policy := a.Placement.Policy
	note := ""
	if policy == "memory" {
		for _, n := range candidates {
			if obs.NodeMemory[n] == 0 {
				policy, note = "spread", fmt.Sprintf(" (policy memory needs each node's memory, which the token cannot read on %s: it needs Sys.Audit on /nodes/%s)", n, n)
				break
			}
		}
	}
	var counts []string
	best := candidates[0]
	for _, n := range candidates {
		switch policy {
		case "memory":
			counts = append(counts, fmt.Sprintf("%s %s free", n, human.Size(obs.NodeMemory[n]-pl.mem[n])))
			if obs.NodeMemory[n]-pl.mem[n] > obs.NodeMemory[best]-pl.mem[best] {
				best = n
			}
		default:
			policy = "spread"
			counts = append(counts, fmt.Sprintf("%s %d", n, pl.apps[n]))
			if pl.apps[n] < pl.apps[best] {
				best = n
			}
		}
	}
	what := "corral apps"
	if policy == "memory" {
		what = "memory not given to guests"
	}
	pl.take(a, best)
	if len(candidates) == 1 && len(obs.Nodes) == 1 {
		return best, "", nil // nothing to choose: no word in the plan
	}
	why = fmt.Sprintf("placed on %s by policy %s (%s: %s)%s", best, policy, what, strings.Join(counts, ", "), note)
	return best, why, nil
}

// take counts a new app on node.
func (pl *placer) take(a *App, node string) {
	pl.apps[node]++
	pl.mem[node] += int64(a.MemoryMiB) << 20
}

// retainedNode is the node whose keeper records volumes of app, or "".
func retainedNode(app string, obs *Observed) string {
	for _, node := range obs.Nodes {
		for _, k := range obs.Keepers[node] {
			for key := range k.Records {
				if key.App == app {
					return node
				}
			}
		}
	}
	return ""
}

// Drained is what draining a node plans: the apps the plan is narrowed
// to (those that leave, and those whose interrupted move it finishes)
// and, for each app that leaves, why it goes to its new node.
type Drained struct {
	Only map[string]bool
	Why  map[string]string
}

// Drain moves the apps whose container is on node to other nodes (corral
// drain): it sets each leaving app's Node in apps to PlaceAway's choice,
// and DeleteSnapshots to deleteSnapshots. It refuses a node that does
// not exist, an app that is an HA resource (HAMoveRefusal) and apps the
// manifest pins to node.
func Drain(apps []App, obs *Observed, node string, deleteSnapshots bool) (Drained, error) {
	d := Drained{Only: map[string]bool{}, Why: map[string]string{}}
	if !slices.Contains(obs.Nodes, node) {
		return d, fmt.Errorf("node %q does not exist (nodes: %s)", node, strings.Join(obs.Nodes, ", "))
	}
	var leaving, pinned []string
	for _, ap := range apps {
		on := false
		for _, ct := range obs.Apps[ap.Name] {
			on = on || ct.Node == node
		}
		for _, vm := range obs.VMs[ap.Name] {
			on = on || vm.Node == node
		}
		if car := obs.Carriers[ap.Name]; car != nil {
			d.Only[ap.Name] = true // an interrupted move is finished
		}
		if !on {
			continue
		}
		if why := HAMoveRefusal(ap.Name, obs); why != "" {
			return d, errors.New(why)
		}
		if ap.Node == node {
			pinned = append(pinned, ap.Name)
			continue
		}
		leaving = append(leaving, ap.Name)
	}
	if len(pinned) > 0 {
		return d, fmt.Errorf("the manifest pins %s to node %s (node:); change node: for them first, then drain", strings.Join(pinned, ", "), node)
	}
	targets, err := PlaceAway(apps, obs, node, leaving)
	if err != nil {
		return d, err
	}
	for i := range apps {
		if t, ok := targets[apps[i].Name]; ok {
			apps[i].Node, apps[i].DeleteSnapshots = t[0], deleteSnapshots
			d.Only[apps[i].Name] = true
			d.Why[apps[i].Name] = t[1]
		}
	}
	return d, nil
}

// PlaceAway chooses a new node for each app named in leaving, whose
// container is on node (corral drain): by the app's placement policy
// among its allowed nodes, node excluded, counting the apps already
// placed, so the apps of a drained node spread over the others. It
// returns the node and the reason per app.
func PlaceAway(apps []App, obs *Observed, node string, leaving []string) (map[string][2]string, error) {
	pl := newPlacer(obs)
	pl.avoid = node
	out := map[string][2]string{}
	var probs []string
	for i := range apps {
		a := apps[i]
		if !slices.Contains(leaving, a.Name) {
			continue
		}
		pl.apps[node]--
		pl.mem[node] -= int64(a.MemoryMiB) << 20
		a.Node = ""
		n, why, err := pl.place(&a)
		if err != nil {
			probs = append(probs, err.Error())
			continue
		}
		out[a.Name] = [2]string{n, why}
	}
	if len(probs) > 0 {
		return out, &RefusedError{Problems: probs}
	}
	return out, nil
}
