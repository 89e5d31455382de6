package apply

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// observeHA reads the cluster's HA resources and, on PVE 9, its rules,
// and gives each app container its resource (plan.CT.HA), and each app
// VM its (plan.VM.HA). A token that
// may not read them (Sys.Audit on /) is no error: the plan refuses only
// the apps that ask for ha:, saying why (plan.Observed.HAUnread).
//
// With noHA (the manifest asks for no ha:) and no container among the
// HA resources, the rules are not read: they only say which rules list
// a container that is a resource, and whether the cluster has rules at
// all, which only an app asking for ha: needs (issue 30: one read per
// plan). The resource list itself is read fresh by every plan that
// sees an app's container (or whose manifest asks for ha:), but the
// final check of a run that found and changed nothing of HA
// (ObserveOptions.HAUnchanged).
//
// listedHA says whether the cluster listing gave a container a hastate:
// PVE sets it for every guest in the HA manager's status or in
// resources.cfg, so with noHA and no hastate listed no container is a
// resource and the list is not read either (issue 30: one read of a
// no-op plan's ten).
func observeHA(ctx context.Context, c *pve.Client, obs *plan.Observed, opts ObserveOptions, listedHA bool) error {
	if opts.HAUnchanged && opts.NoHA {
		obs.HARuleSet = map[string]plan.HARule{}
		return nil
	}
	if opts.NoHA && (len(obs.Apps) == 0 && len(obs.VMs) == 0 || !listedHA) {
		// No app container to give its resource, and no app asking for
		// ha:: the list cannot change the plan (issue 30: a first
		// apply read it twice, for the plan shown and the one under
		// the lock).
		obs.HARuleSet = map[string]plan.HARule{}
		return nil
	}
	noHA := opts.NoHA
	list, err := c.HAResources(ctx)
	if pve.IsPermission(err) {
		obs.HAUnread = err.Error()
		return nil
	}
	if err != nil {
		return err
	}
	if noHA && !slices.ContainsFunc(list, func(r pve.HAResource) bool { return r.Type == "ct" || r.Type == "vm" }) {
		obs.HARuleSet = map[string]plan.HARule{}
		return nil
	}
	rules, err := c.HARules(ctx)
	var apiErr *pve.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotImplemented:
		// PVE 8: groups, no rules.
	case pve.IsPermission(err):
		obs.HAUnread = err.Error()
		return nil
	case err != nil:
		return err
	default:
		obs.HARules = true
	}
	obs.HARuleSet = map[string]plan.HARule{}
	for _, r := range rules {
		obs.HARuleSet[r.Rule] = plan.HARule{Name: r.Rule, Type: r.Type, Resources: r.ResourceList(), Digest: r.Digest}
	}
	byVMID := map[int]*plan.HAResource{}
	for _, r := range list {
		if r.Type != "ct" && r.Type != "vm" {
			continue
		}
		byVMID[r.VMID()] = haResource(r, obs.HARuleSet)
	}
	// A VMID names one guest, of one kind: its resource is its kind's.
	for _, cts := range obs.Apps {
		for _, ct := range cts {
			ct.HA = byVMID[ct.VMID]
		}
	}
	for _, vms := range obs.VMs {
		for _, vm := range vms {
			vm.HA = byVMID[vm.VMID]
		}
	}
	return nil
}

// haResource is r with PVE's defaults applied and the node-affinity
// rules that list it.
func haResource(r pve.HAResource, rules map[string]plan.HARule) *plan.HAResource {
	h := &plan.HAResource{State: r.State, Group: r.Group, GroupSet: r.Group != "", MaxRestart: 1, MaxRelocate: 1}
	switch h.State {
	case "", "enabled":
		h.State = "started"
	}
	if r.MaxRestart != nil {
		h.MaxRestart = int(*r.MaxRestart)
	}
	if r.MaxRelocate != nil {
		h.MaxRelocate = int(*r.MaxRelocate)
	}
	for _, name := range sortedKeys(rules) {
		if rule := rules[name]; rule.Type == "node-affinity" && slices.Contains(rule.Resources, r.SID) {
			h.Rules = append(h.Rules, name)
		}
	}
	return h
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
