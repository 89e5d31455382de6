package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// ObserveApps reads what only some apps need, for the planner (which
// does no I/O): the addresses of the apps whose facts guest strings name
// (ObserveAddresses), the firewall of each app that declares one (its
// options and rules, into CT.Firewall or VM.Firewall), and the pools
// when an app names one (Observed.Pools). Other guests are not asked:
// that would cost requests for every app.
func ObserveApps(ctx context.Context, c *pve.Client, obs *plan.Observed, apps []plan.App) error {
	if err := ObserveAddresses(ctx, c, obs, plan.FactApps(apps)); err != nil {
		return err
	}
	pools := false
	for _, a := range apps {
		pools = pools || a.Pool != ""
		if err := observeFirewall(ctx, c, obs, a); err != nil {
			return fmt.Errorf("app %s: %w", a.Name, err)
		}
	}
	if !pools {
		return nil
	}
	list, err := c.Pools(ctx)
	if err != nil {
		return err
	}
	for _, p := range list {
		obs.Pools = append(obs.Pools, p.PoolID)
	}
	return nil
}

// observeFirewall reads the firewall of app a's one guest, its CT's or
// its VM's, when a declares one and the guest's node is online.
func observeFirewall(ctx context.Context, c *pve.Client, obs *plan.Observed, a plan.App) error {
	if a.Firewall == nil {
		return nil
	}
	if a.Kind == plan.KindVM {
		vms := obs.VMs[a.Name]
		if len(vms) != 1 || slices.Contains(obs.Offline, vms[0].Node) {
			return nil
		}
		fw, err := readFirewall(ctx, c, pve.QEMU, vms[0].Node, vms[0].VMID)
		vms[0].Firewall = fw
		return err
	}
	cts := obs.Apps[a.Name]
	if len(cts) != 1 || slices.Contains(obs.Offline, cts[0].Node) {
		return nil
	}
	fw, err := readFirewall(ctx, c, pve.LXC, cts[0].Node, cts[0].VMID)
	cts[0].Firewall = fw
	return err
}

// guestKind is the API directory of a change's guest.
func guestKind(c plan.Change) pve.GuestKind {
	if c.Kind == plan.KindVM {
		return pve.QEMU
	}
	return pve.LXC
}

// readFirewall reads a guest's firewall options and rules.
func readFirewall(ctx context.Context, c *pve.Client, kind pve.GuestKind, node string, vmid int) (*plan.ObservedFirewall, error) {
	opts, err := c.GuestFirewallOptions(ctx, kind, node, vmid)
	if err != nil {
		return nil, err
	}
	rules, err := c.GuestFirewallRules(ctx, kind, node, vmid)
	if err != nil {
		return nil, err
	}
	fw := &plan.ObservedFirewall{Options: opts.Values, OptionsDigest: opts.Digest}
	for _, r := range rules {
		fw.Rules = append(fw.Rules, plan.FirewallRule{Type: r.Type, Action: r.Action, Macro: r.Macro, Iface: r.Iface,
			Source: r.Source, Dest: r.Dest, Proto: r.Proto, Dport: r.Dport, Sport: r.Sport, ICMPType: r.ICMPType,
			Log: r.Log, Comment: r.Comment, Enable: r.Enable})
		fw.RulesDigest = r.Digest
	}
	if fw.RulesDigest == "" {
		fw.RulesDigest = emptyListDigest
	}
	return fw, nil
}

// emptyListDigest is copy_list_with_digest's digest of no rules (SHA-1
// of nothing), which an empty list cannot carry on an entry.
const emptyListDigest = "da39a3ee5e6b4b0d3255bfef95601890afd80709"

// applyPoolAndFirewall puts guest vmid into the change's pool and
// writes its firewall, as "pool" and "firewall" steps.
func (r *runner) applyPoolAndFirewall(ctx context.Context, c plan.Change, vmid int) error {
	if p := c.Pool; p != nil {
		if err := r.step(c.App, "pool", p.To, func() error { return r.joinPool(ctx, p, vmid) }); err != nil {
			return err
		}
	}
	if fc := c.Firewall; !fc.IsZero() {
		if err := r.step(c.App, "firewall", firewallDetail(fc), func() error { return r.writeFirewall(ctx, guestKind(c), c.Node, vmid, fc) }); err != nil {
			return err
		}
	}
	return nil
}

// joinPool creates the pool when the plan found none (one made in the
// meantime, or one the token cannot list, is fine) and moves the
// container into it.
func (r *runner) joinPool(ctx context.Context, p *plan.PoolChange, vmid int) error {
	if p.Create {
		if err := r.client.CreatePool(ctx, p.To, "corral"); err != nil && !alreadyExists(err) {
			return fmt.Errorf("%w (the token needs Pool.Allocate on /pool/%s: corral doctor prints the setup)", err, p.To)
		}
	}
	if err := r.client.AddToPool(ctx, p.To, vmid); err != nil {
		return fmt.Errorf("%w (the token needs Pool.Allocate on /pool/%s and VM.Allocate on /vms/%d: corral doctor prints the setup)", err, p.To, vmid)
	}
	return nil
}

func alreadyExists(err error) bool {
	var ae *pve.APIError
	return errors.As(err, &ae) && strings.Contains(ae.Message, "already exists")
}

// firewallDetail says what a firewall step writes.
func firewallDetail(fc *plan.FirewallChange) string {
	var parts []string
	if len(fc.Options) > 0 {
		parts = append(parts, fmt.Sprintf("%d option(s)", len(fc.Options)))
	}
	if len(fc.Rules) > 0 {
		parts = append(parts, fmt.Sprintf("%d rule change(s)", len(fc.Rules)))
	}
	return strings.Join(parts, ", ")
}

// writeFirewall carries out fc on guest vmid: the options in one
// PUT under the digest the plan read, then the rule operations, the
// first under the rules' digest so that an edit made since the plan
// stops it (PlanStaleError's advice: plan again).
func (r *runner) writeFirewall(ctx context.Context, kind pve.GuestKind, node string, vmid int, fc *plan.FirewallChange) error {
	if len(fc.Options) > 0 {
		set, del := map[string]string{}, []string(nil)
		for _, e := range fc.Options {
			if e.New == "" {
				del = append(del, e.Key)
			} else {
				set[e.Key] = e.New
			}
		}
		if err := r.client.SetGuestFirewallOptions(ctx, kind, node, vmid, set, del, fc.OptionsDigest); err != nil {
			return stale(err, kind, vmid)
		}
	}
	digest := fc.RulesDigest
	for _, op := range fc.Rules {
		if err := r.ruleOp(ctx, kind, node, vmid, op, digest); err != nil {
			return stale(err, kind, vmid)
		}
		digest = ""
	}
	return nil
}

// ruleOp is one rule operation. A create is PVE's POST, which puts the
// rule first, then a move to its position (before the rule now at
// Pos+1, the end when there is none).
func (r *runner) ruleOp(ctx context.Context, kind pve.GuestKind, node string, vmid int, op plan.RuleOp, digest string) error {
	switch op.Op {
	case plan.RuleUpdate:
		return r.client.UpdateGuestFirewallRule(ctx, kind, node, vmid, op.Pos, pve.RuleFields(op.Rule.Fields()), digest)
	case plan.RuleDelete:
		return r.client.DeleteGuestFirewallRule(ctx, kind, node, vmid, op.Pos, digest)
	}
	if digest != "" {
		if err := r.checkRulesDigest(ctx, kind, node, vmid, digest); err != nil {
			return err
		}
	}
	if err := r.client.CreateGuestFirewallRule(ctx, kind, node, vmid, pve.RuleFields(op.Rule.Fields())); err != nil {
		return err
	}
	if op.Pos == 0 {
		return nil
	}
	return r.client.MoveGuestFirewallRule(ctx, kind, node, vmid, 0, op.Pos+1)
}

// checkRulesDigest stops a create whose list changed since the plan
// (POST takes no digest).
func (r *runner) checkRulesDigest(ctx context.Context, kind pve.GuestKind, node string, vmid int, digest string) error {
	rules, err := r.client.GuestFirewallRules(ctx, kind, node, vmid)
	if err != nil {
		return err
	}
	got := emptyListDigest
	if len(rules) > 0 {
		got = rules[0].Digest
	}
	if got != digest {
		return pve.ErrModified
	}
	return nil
}

// stale says a firewall changed since the plan in the user's terms.
func stale(err error, kind pve.GuestKind, vmid int) error {
	if errors.Is(err, pve.ErrModified) {
		what := "container"
		if kind == pve.QEMU {
			what = "VM"
		}
		return fmt.Errorf("%s %d's firewall changed since it was planned: %w; run the command again to plan against what it is now", what, vmid, err)
	}
	return err
}
