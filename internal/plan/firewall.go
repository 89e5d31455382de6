package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/pvefw"
)

// An app's guest firewall (manifest firewall:) and resource pool
// (pool:), planned like any other setting: the desired options and
// rules against what the container's firewall holds (CT.Firewall, read
// by apply.ObserveApps for the apps that declare one), rule by position.
// The keeper and the carriers get neither: they hold volumes, serve no
// traffic, and a user's pool ACL must not reach them.

// Firewall is an app's desired firewall, in the form PVE gives it back
// (FromManifest normalizes it), so that a fresh plan after an apply
// compares equal.
type Firewall struct {
	// Options are the options corral owns, by API name, as GET
	// …/firewall/options gives them: enable "0"/"1", the policies and
	// log levels; an option absent here is deleted if set.
	Options map[string]string
	Rules   []FirewallRule
}

// FirewallOptionKeys are the options a manifest's firewall: owns; the
// others (dhcp, ipfilter, macfilter, ndp, radv) are left as they are.
var FirewallOptionKeys = []string{"enable", "log_level_in", "log_level_out", "policy_in", "policy_out"}

// FirewallRule is one rule as GET …/firewall/rules gives it (without
// pos, digest and ipversion): the fields by API name, "" for unset,
// Enable 0 or 1.
type FirewallRule struct {
	Type, Action, Macro, Iface string
	Source, Dest, Proto, Dport string
	Sport, ICMPType, Log       string
	Comment                    string
	Enable                     int
}

// Fields are the rule's fields by API name, every one present ("" for
// unset), for a create or a full update.
func (r FirewallRule) Fields() map[string]string {
	return map[string]string{"type": r.Type, "action": r.Action, "macro": r.Macro, "iface": r.Iface, "source": r.Source,
		"dest": r.Dest, "proto": r.Proto, "dport": r.Dport, "sport": r.Sport, "icmp-type": r.ICMPType, "log": r.Log,
		"comment": r.Comment, "enable": fmt.Sprint(r.Enable)}
}

// String is the rule as pve-firewall's config file writes it: "IN
// SSH(ACCEPT) -i net0 -source 10.0.0.0/8 # admins", disabled with "|".
func (r FirewallRule) String() string {
	var b strings.Builder
	if r.Enable == 0 {
		b.WriteString("|")
	}
	b.WriteString(strings.ToUpper(r.Type) + " ")
	if r.Macro != "" {
		b.WriteString(r.Macro + "(" + r.Action + ")")
	} else {
		b.WriteString(r.Action)
	}
	for _, f := range []struct{ flag, v string }{{"-i", r.Iface}, {"-source", r.Source}, {"-dest", r.Dest}, {"-p", r.Proto},
		{"-dport", r.Dport}, {"-sport", r.Sport}, {"-log", r.Log}, {"-icmp-type", r.ICMPType}} {
		if f.v != "" {
			b.WriteString(" " + f.flag + " " + f.v)
		}
	}
	if r.Comment != "" {
		b.WriteString(" # " + r.Comment)
	}
	return b.String()
}

// ObservedFirewall is a container's firewall as read: its options (raw,
// without the digest) and rules, with the digests PVE gave them.
type ObservedFirewall struct {
	Options       map[string]string
	OptionsDigest string
	Rules         []FirewallRule
	RulesDigest   string
}

// firewallOf is m's firewall in PVE's form: the macro in its preferred
// spelling, the comment trimmed, a group rule with only action, iface
// and comment (what pve-firewall keeps of it).
func firewallOf(m *manifest.Firewall) *Firewall {
	if m == nil {
		return nil
	}
	fw := &Firewall{Options: map[string]string{"enable": boolDigit(m.Enabled)}}
	for k, v := range map[string]string{"policy_in": m.PolicyIn, "policy_out": m.PolicyOut, "log_level_in": m.LogLevelIn, "log_level_out": m.LogLevelOut} {
		if v != "" {
			fw.Options[k] = v
		}
	}
	for _, r := range m.Rules {
		fr := FirewallRule{Type: r.Type, Action: r.Action, Macro: r.Macro, Iface: r.Iface, Source: r.Source, Dest: r.Dest,
			Proto: r.Proto, Dport: r.Dport, Sport: r.Sport, ICMPType: r.ICMPType, Log: r.Log,
			Comment: strings.TrimSpace(r.Comment), Enable: int(boolNum(r.Enabled))}
		if name, ok := pvefw.Macro(fr.Macro); ok {
			fr.Macro = name
		}
		if fr.Type == "group" {
			fr = FirewallRule{Type: fr.Type, Action: fr.Action, Iface: fr.Iface, Comment: fr.Comment, Enable: fr.Enable}
		}
		fw.Rules = append(fw.Rules, fr)
	}
	return fw
}

func boolDigit(b bool) string { return fmt.Sprint(boolNum(b)) }

func boolNum(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RuleOpKind is what one rule operation does.
type RuleOpKind string

// The rule operations, in the order apply carries them out: updates in
// place, then deletes from the end, then creates at the end.
const (
	RuleUpdate RuleOpKind = "update"
	RuleDelete RuleOpKind = "delete"
	RuleCreate RuleOpKind = "create"
)

// RuleOp is one rule operation at position Pos of the list as it is
// when the operation runs.
type RuleOp struct {
	Op   RuleOpKind
	Pos  int
	Rule FirewallRule // the new rule (update, create)
	Old  FirewallRule // the rule replaced or deleted
}

// FirewallChange is what apply does to a container's firewall. The
// digests are the ones the plan read: apply checks them before it
// writes, so an edit made after the plan is not overwritten unseen.
type FirewallChange struct {
	Options       []ConfigEdit
	OptionsDigest string
	Rules         []RuleOp
	RulesDigest   string
}

// IsZero reports whether the change does nothing.
func (f *FirewallChange) IsZero() bool { return f == nil || len(f.Options) == 0 && len(f.Rules) == 0 }

// planFirewall compares want with have (nil: a new container, or one
// whose firewall was not read) and returns what to change, nil for
// nothing.
func planFirewall(want *Firewall, have *ObservedFirewall) *FirewallChange {
	if want == nil {
		return nil
	}
	if have == nil {
		have = &ObservedFirewall{}
	}
	fc := &FirewallChange{OptionsDigest: have.OptionsDigest, RulesDigest: have.RulesDigest}
	for _, k := range FirewallOptionKeys {
		if old, nw := have.Options[k], want.Options[k]; old != nw {
			fc.Options = append(fc.Options, ConfigEdit{Key: k, Old: old, New: nw})
		}
	}
	fc.Rules = ruleOps(want.Rules, have.Rules)
	if fc.IsZero() {
		return nil
	}
	return fc
}

// ruleOps turns have into want by position: a rule that differs is
// updated in place, surplus rules are deleted from the end, missing ones
// created at the end. Rule order is position, so a rule inserted at the
// top updates every rule below it.
func ruleOps(want, have []FirewallRule) []RuleOp {
	var ops []RuleOp
	for i := 0; i < len(want) && i < len(have); i++ {
		if want[i] != have[i] {
			ops = append(ops, RuleOp{Op: RuleUpdate, Pos: i, Rule: want[i], Old: have[i]})
		}
	}
	for i := len(have) - 1; i >= len(want); i-- {
		ops = append(ops, RuleOp{Op: RuleDelete, Pos: i, Old: have[i]})
	}
	for i := len(have); i < len(want); i++ {
		ops = append(ops, RuleOp{Op: RuleCreate, Pos: i, Rule: want[i]})
	}
	return ops
}

// firewallReasons say what the change does, for an update's reasons.
func firewallReasons(fc *FirewallChange) []string {
	if fc.IsZero() {
		return nil
	}
	var r []string
	for _, e := range fc.Options {
		r = append(r, "firewall option "+e.Key+" changes")
	}
	counts := map[RuleOpKind]int{}
	for _, op := range fc.Rules {
		counts[op.Op]++
	}
	var parts []string
	for _, k := range []RuleOpKind{RuleUpdate, RuleDelete, RuleCreate} {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", n, k))
		}
	}
	if len(parts) > 0 {
		r = append(r, "firewall rules differ from the manifest ("+strings.Join(parts, ", ")+")")
	}
	return r
}

// PoolChange puts the app's container into a pool, creating the pool
// first when the cluster (as far as the token sees) has none of that name.
type PoolChange struct {
	From, To string
	Create   bool
}

// planPool is the pool change of an app that wants pool want, whose
// container is in pool have ("" none, or a new container).
func planPool(want, have string, obs *Observed) *PoolChange {
	if want == "" || want == have {
		return nil
	}
	return &PoolChange{From: have, To: want, Create: !slices.Contains(obs.Pools, want)}
}

// planFirewallAndPool adds the firewall and pool changes to c, planned
// from a against its container ct (nil: none yet) once c's action is
// decided: a new container gets the whole firewall and joins the pool;
// an existing one whose firewall (read) or pool differs is updated.
func planFirewallAndPool(c *Change, a *App, ct *CT, obs *Observed) {
	if ct == nil || c.Action == Create || c.Action == Replace {
		c.Firewall, c.Pool = planFirewall(a.Firewall, nil), planPool(a.Pool, "", obs)
		return
	}
	if ct.Firewall != nil { // not read: the plan cannot tell, and says nothing
		c.Firewall = planFirewall(a.Firewall, ct.Firewall)
	}
	c.Pool = planPool(a.Pool, ct.Pool, obs)
	if c.Firewall == nil && c.Pool == nil {
		return
	}
	if c.Action == NoOp {
		c.Action = Update
	}
	c.Reasons = append(c.Reasons, firewallReasons(c.Firewall)...)
	if p := c.Pool; p != nil {
		c.Reasons = append(c.Reasons, fmt.Sprintf("pool changes %s → %s", orNone(p.From), p.To))
	}
}
