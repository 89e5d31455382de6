package manifest

import (
	"slices"
	"strings"
)

// factUse is one ${app:APP.FACT} in a string that goes into a guest:
// Ref is APP.FACT, v the value that names it (for the diagnostic's
// position).
type factUse struct {
	ref string
	v   *value
}

// stepFacts are the facts the strings of step sv (of app appName) name,
// once each, in order; each use is kept for checkFacts.
func (d *decoder) stepFacts(sv *value, appName string) []string {
	var vals []*value
	for _, k := range []string{"run", "file", "compose"} {
		m := sv.member(k)
		switch {
		case m == nil:
		case k == "run":
			vals = append(vals, m)
		default:
			vals = append(vals, m.member("content"))
		}
	}
	if ev := sv.object("envFile"); ev != nil {
		for _, e := range ev.members("env") {
			vals = append(vals, e.member("value"))
		}
	}
	var refs []string
	for _, v := range vals {
		if v == nil {
			continue
		}
		for _, r := range v.facts {
			if d.factUses == nil {
				d.factUses = map[string][]factUse{}
			}
			d.factUses[appName] = append(d.factUses[appName], factUse{ref: r, v: v})
			if !slices.Contains(refs, r) {
				refs = append(refs, r)
			}
		}
	}
	return refs
}

// templateEnv writes the envFile values that name no fact as templates
// too ($${ for a literal ${), so that every string of a step with facts
// is one (Step.Facts).
func templateEnv(env []EnvVar, fv *value) {
	var vals []*value
	if fv != nil {
		for _, e := range fv.members("env") {
			if n := e.member("value"); n != nil {
				vals = append(vals, n)
			}
		}
	}
	for i := range env {
		if i < len(vals) && len(vals[i].facts) > 0 {
			continue
		}
		env[i].Value = NewSecret(env[i].Value.Ref(), EscapeTemplate(env[i].Value.Reveal()))
	}
}

// checkFacts checks every ${app:APP.FACT} of the apps' guest strings:
// APP is an app of the manifest; an app names its own fact only when
// the manifest fixes it (its vmid, node or static address), since the
// rest is known only after its container is created, and its
// provisioning reads it before; and no apps read each other's facts
// round a cycle, since each would have to be provisioned first.
func (d *decoder) checkFacts(f *File) {
	apps := map[string]*App{}
	var names []string
	for i := range f.Apps {
		apps[f.Apps[i].Name] = &f.Apps[i]
		names = append(names, f.Apps[i].Name)
	}
	bad := false
	for _, a := range f.Apps {
		for _, u := range d.factUses[a.Name] {
			app, fact, _ := strings.Cut(u.ref, ".")
			switch {
			case apps[app] == nil:
				d.report(u.v.node, u.v.path, "${app:"+u.ref+"} names no app of this manifest (its apps: "+strings.Join(names, ", ")+")", "an app's name")
				bad = true
			case app == a.Name && !a.FixedFact(fact):
				d.report(u.v.node, u.v.path, "${app:"+u.ref+"} names app "+app+"'s own "+fact+", which is known only once its container is created, after the manifest is read; "+
					selfFix(fact), "")
				bad = true
			}
		}
	}
	if bad {
		return
	}
	if cycle := factCycle(f); cycle != nil {
		first := d.factUses[cycle[0]]
		i := slices.IndexFunc(first, func(u factUse) bool { return strings.HasPrefix(u.ref, cycle[1]+".") })
		u := first[i]
		d.report(u.v.node, u.v.path, "apps read each other's facts round a cycle ("+strings.Join(cycle, " → ")+
			"): each would have to be provisioned after the other; read the fact inside the container instead (getent hosts NAME, hostname -I), or fix it in the manifest (network.ip, vmid, node) and write the value", "")
	}
}

// selfFix says how an app gets its own fact instead.
func selfFix(fact string) string {
	switch fact {
	case "address":
		return "give it a static network.ip, or read it inside the container (hostname -I)"
	case "vmid":
		return "set its vmid, or read it inside the container (hostname is the app's name; the VMID is not visible there)"
	}
	return "set its node, or leave the node out of the string"
}

// FixedFact reports whether the manifest itself fixes the app's fact
// (a vmid, a node, a static address), so that it is known before the
// container exists.
func (a App) FixedFact(fact string) bool {
	switch fact {
	case "vmid":
		return a.VMID != 0
	case "node":
		return a.Node != ""
	case "address":
		return a.Network.IP != "" && !a.Network.DHCP()
	}
	return false
}

// FactApps are the other apps whose facts a's guest strings name, once
// each, in order: their containers must exist, run and have their
// address before a is provisioned.
func (a App) FactApps() []string {
	var out []string
	for _, s := range a.Provision {
		for _, r := range s.Facts {
			app, _, _ := strings.Cut(r, ".")
			if app != a.Name && !slices.Contains(out, app) {
				out = append(out, app)
			}
		}
	}
	return out
}

// factCycle is the first cycle of apps reading each other's facts, as
// app names with the first one again at the end, or nil.
func factCycle(f *File) []string {
	deps := map[string][]string{}
	for _, a := range f.Apps {
		deps[a.Name] = a.FactApps()
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(n string) []string {
		state[n] = onPath
		path = append(path, n)
		for _, m := range deps[n] {
			switch state[m] {
			case onPath:
				i := slices.Index(path, m)
				return append(slices.Clone(path[i:]), m)
			case unseen:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, a := range f.Apps {
		if state[a.Name] == unseen {
			if c := visit(a.Name); c != nil {
				return c
			}
		}
	}
	return nil
}
