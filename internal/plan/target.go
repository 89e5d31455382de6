package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// TargetError is a plan narrowed to some apps (corral plan APP…) that
// cannot be carried out on its own: a named app needs a change that was
// left out to happen first. Nothing is changed.
type TargetError struct {
	// Needs are the left-out changes the named apps wait for, in words.
	Needs []string
}

func (e *TargetError) Error() string {
	return "the named apps need changes that were left out, which must happen first:\n  - " + strings.Join(e.Needs, "\n  - ") +
		"\nrun `corral apply` without app names (or name those apps too)"
}

// Target narrows p to the changes of the named apps and what they need:
// the keeper repairs on the nodes they are on or go to, a keeper created
// where their new volumes need one, and an interrupted restore of
// theirs. Everything else is left out, and recorded in
// p.LeftOut (the apps, and "keeper on NODE") and p.LeftOutChanges (how
// many changes). It refuses (TargetError), leaving p as it was, when a
// named app needs a left-out change first: another app's interrupted
// restore (apply finishes every one before anything else), or a change
// to the container that owns a volume the app takes. An empty names
// keeps p whole.
func Target(p *Plan, obs *Observed, names []string) error {
	if len(names) == 0 {
		return nil
	}
	named := func(app string) bool { return slices.Contains(names, app) }
	kept, out := partition(p.Changes, func(c Change) bool { return named(c.App) })
	if needs := targetNeeds(kept, out, obs, named); len(needs) > 0 {
		return &TargetError{Needs: needs}
	}
	nodes := map[string]bool{}
	rooms := map[string]bool{} // nodes where a kept change puts a volume in a keeper
	for _, c := range kept {
		nodes[c.Node], nodes[c.From] = true, true
		for _, v := range c.Volumes {
			if v.Action == VolCreate || v.Action == VolAdopt || v.Action == VolMove {
				rooms[c.Node] = true
			}
		}
	}
	// A keeper is repaired for the named apps on its node; one is created
	// only for their new volumes (not for the left-out apps').
	keepers, outKeepers := partition(p.Keepers, func(k KeeperChange) bool { return nodes[k.Node] && (k.Action != Create || rooms[k.Node]) })
	var left []string
	n := 0
	for _, c := range out {
		if c.Action != NoOp {
			left = append(left, c.App)
			n++
		}
	}
	for _, k := range outKeepers {
		left = append(left, "keeper on "+k.Node)
		n++
	}
	p.Changes, p.Keepers = kept, keepers
	p.Unchecked = slices.DeleteFunc(p.Unchecked, func(u Unchecked) bool { return !named(u.App) })
	p.Targets = slices.Clone(names)
	p.LeftOut, p.LeftOutChanges = unique(left), n
	return nil
}

// targetNeeds are the left-out changes (out) that the kept ones need
// first, in words.
func targetNeeds(kept, out []Change, obs *Observed, named func(string) bool) []string {
	var needs []string
	apps := append(slices.Collect(maps.Keys(obs.Restores)), slices.Collect(maps.Keys(obs.VMRestores))...)
	slices.Sort(apps)
	for _, app := range slices.Compact(apps) {
		if !named(app) {
			needs = append(needs, fmt.Sprintf("app %s: an interrupted restore, which apply finishes (or rolls back) before any other change", app))
		}
	}
	for _, app := range slices.Sorted(maps.Keys(obs.Rescues)) {
		if !named(app) {
			needs = append(needs, fmt.Sprintf("app %s: in rescue, which apply ends (its volumes back to its container) before any other change", app))
		}
	}
	owners := map[int]Change{}
	for _, c := range out {
		if c.Action == NoOp {
			continue
		}
		for _, id := range []int{c.OldVMID, c.VMID} {
			if id != 0 {
				owners[id] = c
			}
		}
	}
	needs = append(needs, factNeeds(kept, out)...)
	for _, c := range kept {
		for _, v := range c.Volumes {
			for _, volid := range []string{v.VolID, v.Adopt} {
				if o, ok := owners[VolumeOwner(volid)]; ok && volid != "" {
					needs = append(needs, fmt.Sprintf("app %s: volume %s (%s) belongs to container %d, which app %s's %s changes", c.App, v.Name, volid, VolumeOwner(volid), o.App, o.Action))
				}
			}
		}
	}
	return needs
}

// partition splits s into the elements keep accepts and the others.
func partition[T any](s []T, keep func(T) bool) (in, out []T) {
	for _, x := range s {
		if keep(x) {
			in = append(in, x)
		} else {
			out = append(out, x)
		}
	}
	return in, out
}

// TargetRefused splits the problems that refused a plan (RefusedError)
// for a plan narrowed to names (Target): those of another app ("app X:
// …", X not named) are left out, since Make plans every other app as if
// X were not there; the others (a named app's, and those of no one app,
// such as a damaged keeper's) still refuse the narrowed plan.
func TargetRefused(problems, names []string) (kept, other []string) {
	for _, prob := range problems {
		if app := problemApp(prob); app != "" && !slices.Contains(names, app) {
			other = append(other, prob)
		} else {
			kept = append(kept, prob)
		}
	}
	return kept, other
}

// problemApp is the app a problem begins with ("app web: …"), or "".
func problemApp(prob string) string {
	rest, ok := strings.CutPrefix(prob, "app ")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, ":")
	if !ok || name == "" || strings.ContainsFunc(name, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' }) {
		return ""
	}
	return name
}
