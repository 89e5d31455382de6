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

// applyHA carries out c.HA for the app's guest vmid (its container, or
// its VM for a kind: vm app: the resource vm:<vmid>).
func (e *Executor) applyHA(ctx context.Context, c plan.Change, vmid int, obs *plan.Observed) error {
	h := c.HA
	if h == nil {
		return nil
	}
	r := e.ops()
	sid := plan.SIDOf(c.Kind, vmid)
	if h.Want == nil {
		return r.step(c.App, "ha", "remove "+sid, func() error { return r.client.DeleteHAResource(ctx, sid) })
	}
	w := h.Want
	spec := pve.HAResourceSpec{State: w.State, Group: w.Group, MaxRestart: w.MaxRestart, MaxRelocate: w.MaxRelocate}
	if h.Have == nil {
		if err := r.step(c.App, "ha", "add "+sid+" (state "+w.State+")", func() error { return r.client.AddHAResource(ctx, sid, spec) }); err != nil {
			return err
		}
	} else if h.Have.State != w.State || h.Have.Group != w.Group || h.Have.MaxRestart != w.MaxRestart || h.Have.MaxRelocate != w.MaxRelocate {
		if err := r.step(c.App, "ha", "update "+sid, func() error { return r.client.UpdateHAResource(ctx, sid, spec, h.Have.GroupSet) }); err != nil {
			return err
		}
	}
	return e.haRules(ctx, c.App, sid, h, obs)
}

// haRules adds the resource sid to the rule it wants and takes it out of
// the node-affinity rules it no longer wants.
func (e *Executor) haRules(ctx context.Context, app, sid string, h *plan.HAChange, obs *plan.Observed) error {
	r := e.ops()
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
	return r.waitHAPowerOf(ctx, pve.LXC, upid, node, vmid, running)
}

// waitHAPowerOf is waitHAPower for a guest of kind (a VM's status is
// its own call).
func (r *runner) waitHAPowerOf(ctx context.Context, kind pve.GuestKind, upid, node string, vmid int, running bool) error {
	u, err := pve.ParseUPID(upid)
	if err != nil || (u.Type != "hastart" && u.Type != "hastop") {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, haPowerWait)
	defer cancel()
	for {
		is, err := guestRunning(ctx, r.client, kind, node, vmid)
		if err != nil {
			return err
		}
		if is == running {
			return nil
		}
		if err := wait.Sleep(ctx, haPowerPoll); err != nil {
			verb := map[bool]string{true: "start", false: "stop"}[running]
			what := map[pve.GuestKind]string{pve.LXC: "ct", pve.QEMU: "vm"}[kind]
			return fmt.Errorf("%s %d is HA-managed and PVE's HA did not %s it in %s (%w): see ha-manager status and the guest's tasks on %s", what, vmid, verb, haPowerWait, err, node)
		}
	}
}

// guestRunning reads whether guest vmid of kind runs.
func guestRunning(ctx context.Context, c *pve.Client, kind pve.GuestKind, node string, vmid int) (bool, error) {
	if kind == pve.QEMU {
		st, err := c.VMStatusOf(ctx, node, vmid)
		if err != nil {
			return false, err
		}
		return st.Status == "running", nil
	}
	st, err := c.ContainerStatus(ctx, node, vmid)
	if err != nil {
		return false, err
	}
	return st.Running(), nil
}
