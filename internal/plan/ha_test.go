package plan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// haApp is app() with ha: and every datum on the shared storage nfs;
// haObserved is the cluster right after its apply, the container an HA
// resource as corral wrote it.
func haApp() plan.App {
	a := app()
	a.RootStorage = "nfs"
	a.Volumes[0].Storage = "nfs"
	a.HA = &plan.HA{State: "started", MaxRestart: 1, MaxRelocate: 1}
	return a
}

func haObserved() *plan.Observed {
	obs := converged()
	ct := obs.Apps["hermes"][0]
	ct.Config["rootfs"] = "nfs:105/vm-105-disk-0.raw,size=20G"
	ct.Config["mp0"] = "nfs:999/vm-999-disk-1.raw,mp=/home/hermes,backup=1,size=10G"
	ct.Config["tags"] = ct.Config["tags"] + ";" + plan.VolumeTag("home", "nfs:999/vm-999-disk-1.raw")
	obs.Keepers["pve"][0] = plan.NewKeeper(999, "pve", map[string]string{
		"mp0": "nfs:999/vm-999-disk-1.raw,mp=/corral/hermes/home,size=10G", "protection": "1",
		"description": plan.KeeperDescription(map[plan.VolumeKey]string{{App: "hermes", Name: "home"}: "nfs:999/vm-999-disk-1.raw"})})
	obs.Volumes = map[string]int64{"pve/nfs:999/vm-999-disk-1.raw": 10 << 30, "pve/nfs:105/vm-105-disk-0.raw": 20 << 30}
	obs.SharedStorages = map[string]bool{"nfs": true}
	obs.HARules = true
	ct.HA = &plan.HAResource{State: "started", MaxRestart: 1, MaxRelocate: 1}
	ct.HAState = "started"
	return obs
}

func TestMake_haConverged(t *testing.T) {
	p, err := plan.Make([]plan.App{haApp()}, haObserved())
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("plan has changes: %+v", p.Changes)
	}
}

// TestMake_haRefused: ha: on local storage, with unreadable HA
// resources, or with the other PVE version's group or rule.
func TestMake_haRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*plan.App, *plan.Observed)
		want string
	}{
		{"volume on local-lvm", func(a *plan.App, _ *plan.Observed) { a.Volumes[0].Storage = "local-lvm" },
			"app hermes: ha: volume home is on storage local-lvm, which is local to its node: after a node failure PVE's HA moves the container to another node but not its data"},
		{"rootfs on local-lvm", func(a *plan.App, _ *plan.Observed) { a.RootStorage = "local-lvm" },
			"app hermes: ha: rootfs is on storage local-lvm, which is local to its node"},
		{"HA unread", func(_ *plan.App, o *plan.Observed) { o.HAUnread = "403 Permission check failed (/, Sys.Audit)" },
			"app hermes: ha: corral cannot read the cluster's HA resources (403 Permission check failed (/, Sys.Audit)): grant the token Sys.Audit and Sys.Console on /"},
		{"group on PVE 9", func(a *plan.App, _ *plan.Observed) { a.HA.Group = "fast" },
			"app hermes: ha.group: this cluster runs PVE 9, whose HA groups were migrated to rules"},
		{"rule on PVE 8", func(a *plan.App, o *plan.Observed) { a.HA.Rule = "fast"; o.HARules = false },
			"app hermes: ha.rule: this cluster's PVE has no HA rules (PVE 8)"},
		{"missing rule", func(a *plan.App, _ *plan.Observed) { a.HA.Rule = "fast" },
			"app hermes: ha.rule: there is no node-affinity HA rule fast: create it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, obs := haApp(), haObserved()
			tc.edit(&a, obs)
			_, err := plan.Make([]plan.App{a}, obs)
			var ref *plan.RefusedError
			if !errors.As(err, &ref) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a refusal with %q", err, tc.want)
			}
		})
	}
}

// TestMake_haChanges: a changed setting, a rule to join, ha: dropped,
// ha: added to an existing app.
func TestMake_haChanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*plan.App, *plan.Observed)
		reasons []string
		want    *plan.HA
		had     bool
	}{
		{"state", func(a *plan.App, _ *plan.Observed) { a.HA.State = "stopped" }, []string{"ha: state started → stopped"}, &plan.HA{State: "stopped", MaxRestart: 1, MaxRelocate: 1}, true},
		{"limits", func(a *plan.App, _ *plan.Observed) { a.HA.MaxRestart, a.HA.MaxRelocate = 3, 0 },
			[]string{"ha: maxRestart 1 → 3", "ha: maxRelocate 1 → 0"}, &plan.HA{State: "started", MaxRestart: 3, MaxRelocate: 0}, true},
		{"join rule", func(a *plan.App, o *plan.Observed) {
			a.HA.Rule = "fast"
			o.HARuleSet = map[string]plan.HARule{"fast": {Name: "fast", Type: "node-affinity", Resources: []string{"ct:200"}}}
		}, []string{"ha: joins rule fast"}, &plan.HA{State: "started", Rule: "fast", MaxRestart: 1, MaxRelocate: 1}, true},
		{"dropped", func(a *plan.App, _ *plan.Observed) { a.HA = nil }, []string{"ha: removed: the container stops being an HA resource"}, nil, true},
		{"added", func(_ *plan.App, o *plan.Observed) { o.Apps["hermes"][0].HA = nil },
			[]string{"ha: the container becomes an HA resource (state started)"}, &plan.HA{State: "started", MaxRestart: 1, MaxRelocate: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, obs := haApp(), haObserved()
			tc.edit(&a, obs)
			p, err := plan.Make([]plan.App{a}, obs)
			if err != nil {
				t.Fatal(err)
			}
			c := p.Changes[0]
			if c.Action != plan.Update || c.HA == nil || strings.Join(c.Reasons, "\n") != strings.Join(tc.reasons, "\n") {
				t.Fatalf("change = %v %q HA %+v, want an update for %q", c.Action, c.Reasons, c.HA, tc.reasons)
			}
			if (c.HA.Want == nil) != (tc.want == nil) || tc.want != nil && *c.HA.Want != *tc.want || (c.HA.Have != nil) != tc.had {
				t.Errorf("HA change = want %+v have %+v", c.HA.Want, c.HA.Have)
			}
			if c.Start || c.Restart {
				t.Errorf("the change starts or restarts the container: %+v", c)
			}
		})
	}
}

// TestMake_haOwnsNodeAndPower: HA moved the app's container off its
// pinned node and has it stopped (a failed recovery): the plan neither
// moves it back nor starts it, and warns what HA is doing.
func TestMake_haOwnsNodeAndPower(t *testing.T) {
	a, obs := haApp(), haObserved()
	obs.Nodes = []string{"pve", "pve2"}
	obs.Templates["pve2"] = []string{tmpl}
	for _, v := range []string{"nfs:999/vm-999-disk-1.raw", "nfs:105/vm-105-disk-0.raw"} {
		obs.Volumes["pve2/"+v] = obs.Volumes["pve/"+v] // one copy every node sees
	}
	a.Node = "pve"
	ct := obs.Apps["hermes"][0]
	ct.Node, ct.Status, ct.HAState = "pve2", "stopped", "error"
	p, err := plan.Make([]plan.App{a}, obs)
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("plan has changes: %+v", p.Changes)
	}
	if want := "app hermes: PVE's HA has CT 105 in state error on pve2; corral leaves its node and running state to HA; HA gave up on it"; len(p.Warnings) == 0 || !strings.Contains(strings.Join(p.Warnings, "\n"), want) {
		t.Errorf("warnings = %q, want %q", p.Warnings, want)
	}
	// Without ha: on the resource the same container is started (and
	// moved to its pinned node).
	ct.HA = nil
	a.HA = nil
	p, err = plan.Make([]plan.App{a}, obs)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasChanges() {
		t.Errorf("a stopped container off its pinned node, not HA's, is left alone: %+v", p.Changes)
	}
}

// TestMake_haOfflineLeftToHA: the node of an HA app's container is
// offline (HA is fencing it): the plan leaves it to HA and --recover
// builds no second copy.
func TestMake_haOfflineLeftToHA(t *testing.T) {
	for _, recover := range []bool{false, true} {
		a, obs := haApp(), haObserved()
		obs.Nodes = []string{"pve", "pve2"}
		obs.Templates["pve2"] = []string{tmpl}
		obs.Offline = []string{"pve"}
		for _, v := range []string{"nfs:999/vm-999-disk-1.raw", "nfs:105/vm-105-disk-0.raw"} {
			obs.Volumes["pve2/"+v] = obs.Volumes["pve/"+v] // one copy every node sees
		}
		obs.Recover = recover
		obs.Apps["hermes"][0].HAState = "fence"
		p, err := plan.Make([]plan.App{a}, obs)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Changes) != 1 || p.Changes[0].Action != plan.NoOp {
			t.Errorf("recover=%v: changes %+v, want the app left alone", recover, p.Changes)
		}
		if want := "app hermes: node pve is offline; its container 105 is an HA resource (HA state fence), so PVE's HA fences the node and starts it on another node by itself"; !strings.Contains(strings.Join(p.Warnings, "\n"), want) {
			t.Errorf("recover=%v: warnings %q, want %q", recover, p.Warnings, want)
		}
	}
}
