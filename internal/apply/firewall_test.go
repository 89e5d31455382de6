package apply_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
)

// fwManifest is an app with a project pool and a firewall whose rules
// PVE gives back in another form than written (macro case, comment
// spaces, a disabled rule, a group rule).
const fwManifest = `pool: team
apps:
  - name: fw
    template: local:vztmpl/` + debian12 + `
    firewall:
      policy_in: DROP
      log_level_in: info
      rules:
        - {type: in, action: ACCEPT, macro: ssh, source: 10.0.0.0/8, comment: " admins "}
        - {type: in, action: ACCEPT, proto: tcp, dport: "80,443", iface: net0}
        - {type: out, action: REJECT, proto: icmp, icmp_type: echo-request, enabled: false}
        - {type: group, action: monitoring}
`

// observePlan observes the emulator and plans apps as corral plan does.
func observePlan(t *testing.T, c *pve.Client, apps []plan.App) (*plan.Plan, *plan.Observed) {
	t.Helper()
	ctx := context.Background()
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := apply.ObserveApps(ctx, c, obs, apps); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(apps, obs)
	if err != nil {
		t.Fatal(err)
	}
	return p, obs
}

// wantRules are fwManifest's rules as PVE lists them.
var wantRules = []plan.FirewallRule{
	{Type: "in", Action: "ACCEPT", Macro: "SSH", Source: "10.0.0.0/8", Comment: "admins", Enable: 1},
	{Type: "in", Action: "ACCEPT", Proto: "tcp", Dport: "80,443", Iface: "net0", Enable: 1},
	{Type: "out", Action: "REJECT", Proto: "icmp", ICMPType: "echo-request", Enable: 0},
	{Type: "group", Action: "monitoring", Enable: 1},
}

// Issue 33: pool: and firewall: round-trip through plan and apply with
// no drift: the pool is created and the container put in it, the rules
// written in order with the options; a fresh plan right after is empty.
func TestFirewallAndPoolRoundTrip(t *testing.T) {
	t.Parallel()
	e := pvetest.Start(t)
	ctx := context.Background()
	apps := loadAppsText(t, fwManifest)
	p, obs := observePlan(t, e.Client, apps)
	if c := p.Changes[0]; c.Action != plan.Create || c.Pool == nil || !c.Pool.Create || len(c.Firewall.Rules) != 4 {
		t.Fatalf("plan of the new app: %+v pool %+v firewall %+v", c, c.Pool, c.Firewall)
	}
	if err := (&apply.Executor{Client: e.Client}).Apply(ctx, p, obs); err != nil {
		t.Fatal(err)
	}
	p, obs = observePlan(t, e.Client, apps)
	if p.HasChanges() {
		t.Fatalf("a fresh plan after apply has changes: %+v %+v %+v", p.Changes[0].Reasons, p.Changes[0].Firewall, p.Changes[0].Pool)
	}
	ct := obs.Apps["fw"][0]
	if ct.Pool != "team" || !slicesContain(obs.Pools, "team") {
		t.Errorf("container in pool %q, pools %v", ct.Pool, obs.Pools)
	}
	if diff := cmp.Diff(wantRules, ct.Firewall.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if o := ct.Firewall.Options; o["enable"] != "1" || o["policy_in"] != "DROP" || o["log_level_in"] != "info" {
		t.Errorf("options %v", o)
	}
}

// Issue 33: drift made through the API (as in the web UI) shows in the
// plan and apply restores the manifest's firewall and pool: an edited
// rule, an added one, a changed policy, the container taken out of its
// pool.
func TestFirewallDriftRestored(t *testing.T) {
	t.Parallel()
	e, apps := appliedFirewall(t)
	ctx := context.Background()
	_, obs := observePlan(t, e.Client, apps)
	ct := obs.Apps["fw"][0]
	base := "/nodes/" + ct.Node + "/lxc/" + itoa(ct.VMID) + "/firewall"
	for _, call := range []struct {
		method, path string
		params       url.Values
	}{
		{"PUT", base + "/rules/1", url.Values{"dport": {"8080"}}},
		{"POST", base + "/rules", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "proto": {"udp"}, "dport": {"53"}, "enable": {"1"}}},
		{"PUT", base + "/options", url.Values{"policy_in": {"ACCEPT"}}},
		{"POST", "/pools", url.Values{"poolid": {"elsewhere"}}},
		{"PUT", "/pools", url.Values{"poolid": {"elsewhere"}, "vms": {itoa(ct.VMID)}, "allow-move": {"1"}}},
	} {
		var err error
		switch call.method {
		case "PUT":
			err = e.Client.Put(ctx, call.path, call.params, nil)
		case "POST":
			err = e.Client.Post(ctx, call.path, call.params, nil)
		}
		if err != nil {
			t.Fatalf("%s %s: %v", call.method, call.path, err)
		}
	}
	p, obs := observePlan(t, e.Client, apps)
	c := p.Changes[0]
	if c.Action != plan.Update || c.Pool == nil || c.Pool.From != "elsewhere" || len(c.Firewall.Options) != 1 {
		t.Fatalf("drift plan: %v %+v pool %+v firewall %+v", c.Action, c.Reasons, c.Pool, c.Firewall)
	}
	// The added rule is first (POST puts it there): every rule is at
	// another position, and the one surplus goes.
	if n := len(c.Firewall.Rules); n != 5 {
		t.Errorf("rule ops %+v", c.Firewall.Rules)
	}
	if err := (&apply.Executor{Client: e.Client}).Apply(ctx, p, obs); err != nil {
		t.Fatal(err)
	}
	p, obs = observePlan(t, e.Client, apps)
	if p.HasChanges() {
		t.Fatalf("drift not restored: %+v %+v", p.Changes[0].Reasons, p.Changes[0].Firewall)
	}
	ct = obs.Apps["fw"][0]
	if diff := cmp.Diff(wantRules, ct.Firewall.Rules); diff != "" || ct.Pool != "team" {
		t.Errorf("after restoring, pool %q, rules (-want +got):\n%s", ct.Pool, diff)
	}
}

// appliedFirewall is an emulator where fwManifest has been applied, and
// the manifest's apps.
func appliedFirewall(t *testing.T) (*pvetest.Emulator, []plan.App) {
	t.Helper()
	e := pvetest.Start(t)
	apps := loadAppsText(t, fwManifest)
	p, obs := observePlan(t, e.Client, apps)
	if err := (&apply.Executor{Client: e.Client}).Apply(context.Background(), p, obs); err != nil {
		t.Fatal(err)
	}
	return e, apps
}

func slicesContain(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Issue 33: a firewall edited between the plan and its apply (a web-UI
// user adds a rule) stops the apply with the advice to plan again; the
// user's rule is not overwritten unseen.
func TestFirewallEditedAfterThePlanStopsApply(t *testing.T) {
	t.Parallel()
	e, _ := appliedFirewall(t)
	ctx := context.Background()
	edited := loadAppsText(t, strings.Replace(fwManifest, `dport: "80,443"`, `dport: "8443"`, 1))
	p, obs := observePlan(t, e.Client, edited)
	ct := obs.Apps["fw"][0]
	base := "/nodes/" + ct.Node + "/lxc/" + itoa(ct.VMID) + "/firewall"
	if err := e.Client.Post(ctx, base+"/rules", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "proto": {"udp"}, "dport": {"53"}, "enable": {"1"}}, nil); err != nil {
		t.Fatal(err)
	}
	err := (&apply.Executor{Client: e.Client}).Apply(ctx, p, obs)
	if err == nil || !strings.Contains(err.Error(), "firewall changed since it was planned") || !strings.Contains(err.Error(), "run the command again") {
		t.Fatalf("apply of a stale firewall plan: %v", err)
	}
	_, obs = observePlan(t, e.Client, edited)
	rules := obs.Apps["fw"][0].Firewall.Rules
	if len(rules) != 5 || rules[0].Dport != "53" || rules[2].Dport != "80,443" {
		t.Fatalf("rules after the refused apply: %+v", rules)
	}
}
