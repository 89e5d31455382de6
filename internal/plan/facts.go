package plan

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
)

// FactFunc gives an app's fact (address, vmid, node), or false while it
// is not known.
type FactFunc func(app, fact string) (string, bool)

// WithFacts is w with the facts its steps name (GuestStep.Facts) read
// through fact: the templates expanded, Facts cleared. unknown lists
// the facts fact does not know yet, as APP.FACT, once each; the work
// returned is then w unchanged, not to be run.
func (w GuestWork) WithFacts(fact FactFunc) (out GuestWork, unknown []string) {
	out = w
	out.Steps = slices.Clone(w.Steps)
	read := func(app, name string) (string, error) {
		if v, ok := fact(app, name); ok {
			return v, nil
		}
		if ref := app + "." + name; !slices.Contains(unknown, ref) {
			unknown = append(unknown, ref)
		}
		return "", errUnknownFact
	}
	expand := func(s string) string {
		v, err := manifest.ExpandOutput(s, read)
		if err != nil {
			return s
		}
		return v
	}
	for i, s := range out.Steps {
		if len(s.Facts) == 0 {
			continue
		}
		s.Script, s.Content = expand(s.Script), expand(s.Content)
		s.Env = slices.Clone(s.Env)
		for j, e := range s.Env {
			s.Env[j].Value = manifest.NewSecret(e.Value.Ref(), expand(e.Value.Reveal()))
		}
		s.Facts = nil
		out.Steps[i] = s
	}
	if len(unknown) > 0 {
		return w, unknown
	}
	return out, nil
}

// errUnknownFact stops ExpandOutput at a fact not known yet.
var errUnknownFact = factError("not known yet")

type factError string

func (e factError) Error() string { return string(e) }

// FactRefs are the facts w's steps name, as APP.FACT, once each.
func (w GuestWork) FactRefs() []string {
	var refs []string
	for _, s := range w.Steps {
		for _, r := range s.Facts {
			if !slices.Contains(refs, r) {
				refs = append(refs, r)
			}
		}
	}
	return refs
}

// resolveFacts sets a's guest work from its template (App.GuestTemplate)
// with the facts of the apps it names, as far as the plan knows them:
// those apps were planned before a (Make plans in that order), so their
// changes say whether a fact stays or is known only after apply.
func (m *planner) resolveFacts(a *App, desired map[string]*App) {
	if a.GuestTemplate == nil || len(a.GuestUnknown) > 0 {
		return // no facts, or values left unread: nothing to compare
	}
	a.Facts = map[string]string{}
	work, unknown := a.GuestTemplate.WithFacts(func(app, fact string) (string, bool) {
		v, ok := m.fact(desired[app], fact)
		if ok {
			a.Facts[app+"."+fact] = v
		}
		return v, ok
	})
	a.FactsUnknown = unknown
	if len(unknown) > 0 {
		// The steps' names are known, their contents not: every step
		// of a new container runs, an existing one's are compared in
		// the guest by apply (planSteps).
		a.GuestDigest, a.Steps = "unknown", stepsOf(work, false)
		return
	}
	a.GuestDigest, a.Steps = work.Digest(), stepsOf(work, len(a.GuestUnknown) == 0)
}

// fact is app r's fact as it will be once this plan is applied: fixed by
// the manifest, or the observed container's when r's change keeps it;
// false when only apply will know it.
func (m *planner) fact(r *App, fact string) (string, bool) {
	if r == nil {
		return "", false
	}
	switch {
	case fact == "vmid" && r.VMID != 0:
		return strconv.Itoa(r.VMID), true
	case fact == "node" && r.Node != "":
		return r.Node, true
	case fact == "address" && r.IP != "" && r.IP != "dhcp":
		return addressOf(r.IP), true
	}
	c := m.changeOf(r.Name)
	cts := m.obs.Apps[r.Name]
	if c != nil && (c.Action == Create || c.Action == Replace || c.Action == Move) {
		// A new container (a new VMID, a new lease) or one on another
		// node (a new lease): only its node is known now.
		return c.Node, fact == "node" && c.Node != ""
	}
	if len(cts) != 1 {
		return "", false
	}
	ct := cts[0]
	switch fact {
	case "vmid":
		return strconv.Itoa(ct.VMID), true
	case "node":
		return ct.Node, true
	}
	if ip := propOf(ct.Config["net0"], "ip"); ip != "" && ip != "dhcp" && ip != "manual" {
		return addressOf(ip), true
	}
	return ct.Address, ct.Address != "" && ct.Status == "running"
}

// changeOf is app's change planned so far (not a stale copy's), or nil.
func (m *planner) changeOf(app string) *Change {
	for i := len(m.p.Changes) - 1; i >= 0; i-- {
		if c := &m.p.Changes[i]; c.App == app && !c.Stale {
			return c
		}
	}
	return nil
}

// addressOf is the address of a CIDR ("10.0.0.5/24" → "10.0.0.5").
func addressOf(cidr string) string {
	if p, err := netip.ParsePrefix(cidr); err == nil {
		return p.Addr().String()
	}
	return cidr
}

// propOf reads key=value from a PVE property string.
func propOf(s, key string) string {
	for item := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(item, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// factOrder is the order Make plans apps in: the manifest's, except that
// an app comes after the apps whose facts it reads (App.FactApps; the
// manifest refuses cycles). It returns indexes into apps.
func factOrder(apps []App) []int {
	index := map[string]int{}
	for i, a := range apps {
		index[a.Name] = i
	}
	var order []int
	seen := make([]bool, len(apps))
	var visit func(i int)
	visit = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		for _, d := range apps[i].FactApps {
			if j, ok := index[d]; ok {
				visit(j)
			}
		}
		order = append(order, i)
	}
	for i := range apps {
		visit(i)
	}
	return order
}

// factList names facts as references: "${app:db.address}, ${app:db.vmid}".
func factList(refs []string) string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = "${app:" + r + "}"
	}
	return strings.Join(out, ", ")
}

// FactApps are the apps whose facts any of apps' guest works read, once
// each: apply.ObserveAddresses reads their addresses for Make.
func FactApps(apps []App) []string {
	var out []string
	for _, a := range apps {
		for _, r := range a.FactApps {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// factNeeds are the left-out changes (out) that make a fact a kept
// change's guest work reads (Change.After), in words: without them
// apply could not read it.
func factNeeds(kept, out []Change) []string {
	var needs []string
	for _, c := range kept {
		if c.Desired == nil {
			continue
		}
		for _, ref := range c.Desired.FactsUnknown {
			app, _, _ := strings.Cut(ref, ".")
			i := slices.IndexFunc(out, func(o Change) bool { return o.App == app && o.Action != NoOp })
			if i >= 0 {
				needs = append(needs, "app "+c.App+": its provisioning reads ${app:"+ref+"}, known only after app "+app+"'s "+out[i].Action.String())
			}
		}
	}
	return needs
}
