package plan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/plan"
)

// twoApps is a plan that creates web on pve (with a new keeper there),
// updates db on pve2 and repairs pve2's keeper.
func twoApps() *plan.Plan {
	return &plan.Plan{
		Keepers: []plan.KeeperChange{{Node: "pve", Action: plan.Create}, {Node: "pve2", VMID: 998, Action: plan.Update, Protect: true}},
		Changes: []plan.Change{
			{App: "web", Node: "pve", Action: plan.Create, Volumes: []plan.VolumeChange{{Volume: plan.Volume{Name: "data"}, Action: plan.VolCreate}}},
			{App: "db", Node: "pve2", VMID: 120, OldVMID: 120, Action: plan.Update},
			{App: "cache", Node: "pve2", VMID: 121, Action: plan.NoOp},
		},
		Unchecked: []plan.Unchecked{{App: "db", Node: "pve2", Why: "offline"}},
	}
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		name                string
		names               []string
		apps, keepers, left []string
		leftChanges         int
	}{
		{name: "one app and its keeper", names: []string{"web"}, apps: []string{"web"}, keepers: []string{"pve"}, left: []string{"db", "keeper on pve2"}, leftChanges: 2},
		{name: "an app without changes", names: []string{"cache"}, apps: []string{"cache"}, keepers: []string{"pve2"}, left: []string{"web", "db", "keeper on pve"}, leftChanges: 3},
		{name: "every app", names: []string{"web", "db", "cache"}, apps: []string{"web", "db", "cache"}, keepers: []string{"pve", "pve2"}},
		{name: "no names keeps the whole plan", apps: []string{"web", "db", "cache"}, keepers: []string{"pve", "pve2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := twoApps()
			if err := plan.Target(p, &plan.Observed{}, tc.names); err != nil {
				t.Fatal(err)
			}
			var apps, keepers []string
			for _, c := range p.Changes {
				apps = append(apps, c.App)
			}
			for _, k := range p.Keepers {
				keepers = append(keepers, k.Node)
			}
			if d := cmp.Diff(tc.apps, apps); d != "" {
				t.Errorf("apps (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.keepers, keepers); d != "" {
				t.Errorf("keepers (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.left, p.LeftOut); d != "" {
				t.Errorf("LeftOut (-want +got):\n%s", d)
			}
			if got, want := p.LeftOutChanges, tc.leftChanges; got != want {
				t.Errorf("LeftOutChanges=%d, want %d", got, want)
			}
			if d := cmp.Diff(tc.names, p.Targets); d != "" {
				t.Errorf("Targets (-want +got):\n%s", d)
			}
		})
	}
}

func TestTarget_keepsOnlyNamedUnchecked(t *testing.T) {
	p := twoApps()
	if err := plan.Target(p, &plan.Observed{}, []string{"web"}); err != nil {
		t.Fatal(err)
	}
	if len(p.Unchecked) != 0 {
		t.Fatalf("Unchecked=%v, want none: db was left out", p.Unchecked)
	}
}

func TestTarget_refusesWhatNeedsALeftOutChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  *plan.Observed
		edit func(p *plan.Plan)
		want string
	}{
		{name: "another app's interrupted restore", obs: &plan.Observed{Restores: map[string]*plan.Restore{"db": {}}},
			want: "app db: an interrupted restore"},
		{name: "a volume owned by a container another app's change removes", obs: &plan.Observed{},
			edit: func(p *plan.Plan) {
				p.Changes[0].Volumes[0].Adopt = "local-lvm:vm-120-disk-1"
			},
			want: "app web: volume data (local-lvm:vm-120-disk-1) belongs to container 120, which app db's update changes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := twoApps()
			if tc.edit != nil {
				tc.edit(p)
			}
			before := len(p.Changes)
			err := plan.Target(p, tc.obs, []string{"web"})
			var te *plan.TargetError
			if !errors.As(err, &te) {
				t.Fatalf("Target: %v, want a TargetError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "run `corral apply` without app names") {
				t.Fatalf("error %q: want %q and the fix", err, tc.want)
			}
			if len(p.Changes) != before || p.LeftOut != nil {
				t.Fatalf("a refused Target changed the plan: %+v", p)
			}
		})
	}
}

func TestTarget_ownRestoreIsKept(t *testing.T) {
	p := twoApps()
	p.Recover = []string{"restore of web"}
	if err := plan.Target(p, &plan.Observed{Restores: map[string]*plan.Restore{"web": {}}}, []string{"web"}); err != nil {
		t.Fatal(err)
	}
	if len(p.Recover) != 1 {
		t.Fatalf("Recover=%v, want web's restore kept", p.Recover)
	}
}

func TestTargetRefused(t *testing.T) {
	problems := []string{
		"app db: bridge vmbr9 does not exist on node pve",
		"app web: volume data: adopt: x is mounted by container 101 (app db) as mp0",
		"keeper 999 on pve: its Notes cannot be read",
		"app web-2: template t: storage s does not exist",
		"app (none): odd",
	}
	kept, other := plan.TargetRefused(problems, []string{"web"})
	if d := cmp.Diff([]string{problems[1], problems[2], problems[4]}, kept); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{problems[0], problems[3]}, other); d != "" {
		t.Errorf("other (-want +got):\n%s", d)
	}
}

// A keeper that another app's new volume needs is not created for a named
// app on the same node that creates no volume.
func TestTarget_noKeeperForAnotherAppsVolumes(t *testing.T) {
	p := twoApps()
	p.Changes[1].Node = "pve" // db, beside web, with no volume
	if err := plan.Target(p, &plan.Observed{}, []string{"db"}); err != nil {
		t.Fatal(err)
	}
	if len(p.Keepers) != 0 {
		t.Fatalf("Keepers=%+v, want none: pve's keeper is created for web's volume", p.Keepers)
	}
	if d := cmp.Diff([]string{"web", "keeper on pve", "keeper on pve2"}, p.LeftOut); d != "" {
		t.Errorf("LeftOut (-want +got):\n%s", d)
	}
}
