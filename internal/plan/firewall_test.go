package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
)

// fwApp is app() with a pool and a firewall of three rules.
func fwApp() plan.App {
	a := app()
	a.Pool = "web"
	a.Firewall = &plan.Firewall{
		Options: map[string]string{"enable": "1", "policy_in": "DROP"},
		Rules: []plan.FirewallRule{
			{Type: "in", Action: "ACCEPT", Macro: "SSH", Source: "10.0.0.0/8", Comment: "admins", Enable: 1},
			{Type: "in", Action: "ACCEPT", Proto: "tcp", Dport: "80,443", Enable: 1},
			{Type: "group", Action: "monitoring", Iface: "net0", Enable: 1},
		},
	}
	return a
}

// fwConverged is converged() with fwApp's firewall and pool in place.
func fwConverged() *plan.Observed {
	obs := converged()
	a := fwApp()
	ct := obs.Apps["hermes"][0]
	ct.Pool = "web"
	ct.Firewall = &plan.ObservedFirewall{Options: map[string]string{"enable": "1", "policy_in": "DROP", "dhcp": "1"}, OptionsDigest: "o1",
		Rules: append([]plan.FirewallRule(nil), a.Firewall.Rules...), RulesDigest: "r1"}
	obs.Pools = []string{"web"}
	return obs
}

// Issue 33: a new app gets its whole firewall (every rule created, in
// order) and joins its pool, which is created when the token sees no
// pool of that name.
func TestMake_firewallAndPoolOfNewApp(t *testing.T) {
	obs := &plan.Observed{Nodes: []string{"pve"}, Templates: map[string][]string{"pve": {tmpl}}}
	p, err := plan.Make([]plan.App{fwApp()}, obs)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Changes[0]
	if c.Pool == nil || *c.Pool != (plan.PoolChange{To: "web", Create: true}) {
		t.Errorf("pool change %+v", c.Pool)
	}
	if c.Firewall == nil || len(c.Firewall.Options) != 2 || len(c.Firewall.Rules) != 3 {
		t.Fatalf("firewall change %+v", c.Firewall)
	}
	for i, op := range c.Firewall.Rules {
		if op.Op != plan.RuleCreate || op.Pos != i || op.Rule != fwApp().Firewall.Rules[i] {
			t.Errorf("rule op %d = %+v", i, op)
		}
	}
}

// Issue 33: the no-drift promise in the planner's terms: the firewall
// and pool as apply leaves them plan nothing; options corral does not
// own (dhcp) are left alone.
func TestMake_firewallConverged(t *testing.T) {
	p, err := plan.Make([]plan.App{fwApp()}, fwConverged())
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("plan has changes: %+v %+v", p.Changes[0].Reasons, p.Changes[0].Firewall)
	}
}

// Issue 33: drift made in the web UI is planned back, rule by position:
// an edited rule is updated where it is, an added one deleted, a changed
// policy set again, a container moved to another pool put back; a
// firewall that could not be read plans nothing.
func TestMake_firewallDrift(t *testing.T) {
	obs := fwConverged()
	ct := obs.Apps["hermes"][0]
	ct.Firewall.Rules[1].Dport = "8080"
	ct.Firewall.Rules = append(ct.Firewall.Rules, plan.FirewallRule{Type: "in", Action: "ACCEPT", Enable: 1})
	ct.Firewall.Options["policy_in"] = "ACCEPT"
	ct.Pool = "other"
	p, err := plan.Make([]plan.App{fwApp()}, obs)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Changes[0]
	if c.Action != plan.Update {
		t.Fatalf("action %v", c.Action)
	}
	want := &plan.FirewallChange{
		Options:       []plan.ConfigEdit{{Key: "policy_in", Old: "ACCEPT", New: "DROP"}},
		OptionsDigest: "o1", RulesDigest: "r1",
		Rules: []plan.RuleOp{
			{Op: plan.RuleUpdate, Pos: 1, Rule: fwApp().Firewall.Rules[1], Old: ct.Firewall.Rules[1]},
			{Op: plan.RuleDelete, Pos: 3, Old: ct.Firewall.Rules[3]},
		},
	}
	if diff := cmp.Diff(want, c.Firewall); diff != "" {
		t.Errorf("firewall change (-want +got):\n%s", diff)
	}
	if c.Pool == nil || *c.Pool != (plan.PoolChange{From: "other", To: "web"}) {
		t.Errorf("pool change %+v", c.Pool)
	}
	wantReasons := []string{"firewall option policy_in changes", "firewall rules differ from the manifest (1 to update, 1 to delete)", "pool changes other → web"}
	if diff := cmp.Diff(wantReasons, c.Reasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}

	ct.Firewall, ct.Pool = nil, "web"
	if p, err = plan.Make([]plan.App{fwApp()}, obs); err != nil || p.HasChanges() {
		t.Errorf("an unread firewall planned %+v (%v)", p.Changes, err)
	}
}

// FirewallRule.String is the rule as pve-firewall's file writes it.
func TestFirewallRule_String(t *testing.T) {
	r := plan.FirewallRule{Type: "in", Action: "ACCEPT", Macro: "SSH", Iface: "net0", Source: "+admins", Comment: "ops"}
	if got := r.String(); got != "|IN SSH(ACCEPT) -i net0 -source +admins # ops" {
		t.Errorf("String() = %q", got)
	}
}

// FromManifest writes the firewall as PVE gives it back, so that a
// fresh plan after an apply is empty: the macro in PVE's spelling, the
// comment trimmed, enable as 0/1, a group rule without the fields
// pve-firewall drops; the app's pool is the manifest's unless it names
// its own.
func TestFromManifest_firewallAsPVEKeepsIt(t *testing.T) {
	f := &manifest.File{Pool: "team", Apps: []manifest.App{
		{Name: "a", Firewall: &manifest.Firewall{Enabled: true, PolicyOut: "REJECT", Rules: []manifest.FirewallRule{
			{Type: "in", Action: "ACCEPT", Macro: "ssh", Comment: "  admins ", Enabled: true},
			{Type: "group", Action: "web", Comment: "g", Enabled: false},
		}}, Pool: "team"},
		{Name: "b", Pool: "own"},
	}}
	apps := plan.FromManifest(f)
	want := &plan.Firewall{Options: map[string]string{"enable": "1", "policy_out": "REJECT"}, Rules: []plan.FirewallRule{
		{Type: "in", Action: "ACCEPT", Macro: "SSH", Comment: "admins", Enable: 1},
		{Type: "group", Action: "web", Comment: "g", Enable: 0},
	}}
	if diff := cmp.Diff(want, apps[0].Firewall); diff != "" {
		t.Errorf("firewall (-want +got):\n%s", diff)
	}
	if apps[0].Pool != "team" || apps[1].Pool != "own" || apps[1].Firewall != nil {
		t.Errorf("pools %q %q, b's firewall %+v", apps[0].Pool, apps[1].Pool, apps[1].Firewall)
	}
}
