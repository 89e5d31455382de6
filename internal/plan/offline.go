package plan

import (
	"fmt"
	"maps"
	"slices"
)

// Unchecked is an app the plan cannot compare with the manifest: its node
// (or the node it is placed on, or its interrupted move's) does not
// answer, so its config, storages and volumes cannot be read. A plan with
// one is never "no changes": apply leaves it alone and does not say
// complete (exit 1); plan exits 2 and names it.
type Unchecked struct {
	App  string
	Node string
	Why  string
}

func (u Unchecked) String() string {
	return fmt.Sprintf("app %s: %s", u.App, u.Why)
}

// uncheckedApps lists the apps of the manifest (and this project's apps
// that left it) that the plan leaves alone because a node they need is
// offline; an app the plan changes anyway (a --recover) is checked.
func uncheckedApps(project string, apps []App, p *Plan, obs *Observed) []Unchecked {
	if len(obs.Offline) == 0 {
		return nil
	}
	changing := map[string]bool{}
	planned := map[string]Change{}
	for _, c := range p.Changes {
		if c.Action != NoOp {
			changing[c.App] = true
		}
		planned[c.App] = c
	}
	offline := func(node string) bool { return node != "" && slices.Contains(obs.Offline, node) }
	var out []Unchecked
	seen := map[string]bool{}
	add := func(app, node, why string) {
		if !seen[app] && !changing[app] {
			seen[app] = true
			out = append(out, Unchecked{App: app, Node: node, Why: why})
		}
	}
	for _, a := range apps {
		c, ok := planned[a.Name]
		if !ok {
			continue // refused: the refusal says why
		}
		for _, ct := range obs.Apps[a.Name] {
			if offline(ct.Node) {
				add(a.Name, ct.Node, fmt.Sprintf("its container %d is on node %s, which is offline: corral cannot read it, so it cannot tell whether it matches the manifest", ct.VMID, ct.Node))
			}
		}
		if car := obs.Carriers[a.Name]; car != nil && (offline(car.Node) || offline(car.Notes.To)) {
			add(a.Name, car.Node, fmt.Sprintf("its interrupted move (carrier ct %d on %s, to %s) waits for the offline node", car.VMID, car.Node, car.Notes.To))
		}
		if offline(c.Node) {
			add(a.Name, c.Node, fmt.Sprintf("it belongs on node %s, which is offline: corral cannot see its storages and volumes there", c.Node))
		}
	}
	listed := map[string]bool{}
	for _, a := range apps {
		listed[a.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(obs.Apps)) {
		if listed[name] {
			continue
		}
		for _, ct := range obs.Apps[name] {
			if offline(ct.Node) && ct.OwnedBy(project, false) {
				add(name, ct.Node, fmt.Sprintf("it was removed from the manifest, but its container %d is on node %s, which is offline: it is destroyed once the node is back", ct.VMID, ct.Node))
			}
		}
	}
	return out
}
