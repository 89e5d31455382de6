package apply

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/wait"
)

// The app's HA resource (plan.HAChange), made what the manifest's ha:
// says once the container change is done: added, changed or removed,
// and its node-affinity rule membership (PVE 9). Start and stop of an
// HA-managed container are HA's: PVE turns them into hastart and hastop
// requests, which end before the CRM acts, so corral waits for the
// container itself (waitHAPower).

// applyHA carries out c.HA for the app's container vmid.
func (e *Executor) applyHA(ctx context.Context, c plan.Change, vmid int, obs *plan.Observed) error {
	h := c.HA
	if h == nil {
		return nil
	}
	r := e.ops()
	if h.Want == nil {
		return r.step(c.App, "ha", "remove "+plan.SID(vmid), func() error { return r.client.DeleteHAResource(ctx, vmid) })
	}
	w := h.Want
	spec := pve.HAResourceSpec{State: w.State, Group: w.Group, MaxRestart: w.MaxRestart, MaxRelocate: w.MaxRelocate}
	if h.Have == nil {
		if err := r.step(c.App, "ha", "add "+plan.SID(vmid)+" (state "+w.State+")", func() error { return r.client.AddHAResource(ctx, vmid, spec) }); err != nil {
			return err
		}
	} else if h.Have.State != w.State || h.Have.Group != w.Group || h.Have.MaxRestart != w.MaxRestart || h.Have.MaxRelocate != w.MaxRelocate {
		if err := r.step(c.App, "ha", "update "+plan.SID(vmid), func() error { return r.client.UpdateHAResource(ctx, vmid, spec, h.Have.GroupSet) }); err != nil {
			return err
		}
	}
	return e.haRules(ctx, c.App, vmid, h, obs)
}

// haRules adds the resource to the rule it wants and takes it out of the
// node-affinity rules it no longer wants.
func (e *Executor) haRules(ctx context.Context, app string, vmid int, h *plan.HAChange, obs *plan.Observed) error {
	r := e.ops()
	sid := plan.SID(vmid)
	var have []string
	if h.Have != nil {
		have = h.Have.Rules
	}
	if want := h.Want.Rule; want != "" && !slices.Contains(have, want) {
		rule := obs.HARuleSet[want]
		res := append(slices.Clone(rule.Resources), sid)
		if err := r.step(app, "ha", "join rule "+want, func() error {
			return r.client.SetHARuleResources(ctx, want, rule.Type, res, rule.Digest)
		}); err != nil {
			return err
		}
	}
	for _, name := range have {
		if name == h.Want.Rule {
			continue
		}
		rule := obs.HARuleSet[name]
		left := slices.DeleteFunc(slices.Clone(rule.Resources), func(s string) bool { return s == sid })
		if len(left) == 0 {
			return fmt.Errorf("%s: ha: HA rule %s lists only %s, and PVE keeps no rule without resources: remove the rule (ha-manager rules remove %s) or name it in ha.rule", app, name, sid, name)
		}
		if err := r.step(app, "ha", "leave rule "+name, func() error {
			return r.client.SetHARuleResources(ctx, name, rule.Type, left, rule.Digest)
		}); err != nil {
			return err
		}
	}
	return nil
}

// haPowerWait bounds waitHAPower: a CRM round, a shutdown's 60 s and
// the LRM's restarts fit in it many times.
const haPowerWait = 5 * time.Minute

// haPowerPoll is how often waitHAPower reads the container's status.
const haPowerPoll = 250 * time.Millisecond

// waitHAPower waits, after the hastart or hastop request upid ended, until
// the container runs (running) or stops: PVE's HA stack acts on the
// request in its own time (a CRM round is 10 s).
func (r *runner) waitHAPower(ctx context.Context, upid, node string, vmid int, running bool) error {
	u, err := pve.ParseUPID(upid)
	if err != nil || (u.Type != "hastart" && u.Type != "hastop") {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, haPowerWait)
	defer cancel()
	for {
		st, err := r.client.ContainerStatus(ctx, node, vmid)
		if err != nil {
			return err
		}
		if st.Running() == running {
			return nil
		}
		if err := wait.Sleep(ctx, haPowerPoll); err != nil {
			verb := map[bool]string{true: "start", false: "stop"}[running]
			return fmt.Errorf("ct %d is HA-managed and PVE's HA did not %s it in %s (%w): see ha-manager status and the CT's tasks on %s", vmid, verb, haPowerWait, err, node)
		}
	}
}
