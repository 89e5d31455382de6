package plan_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// onTwoNodes is converged() on node pve1 of a cluster of pve1 and pve2,
// both with local-lvm.
func onTwoNodes() *plan.Observed {
	obs := converged()
	obs.Nodes = []string{"pve1", "pve2"}
	obs.Templates = map[string][]string{"pve1": {tmpl}, "pve2": {tmpl}}
	obs.Apps["hermes"][0].Node = "pve1"
	k := obs.Keepers["pve"][0]
	k.Node = "pve1"
	obs.Keepers = map[string][]*plan.Keeper{"pve1": {k}}
	obs.Volumes = map[string]int64{"pve1/local-lvm:vm-999-disk-1": 10 << 30, "pve1/local-lvm:vm-105-disk-0": 20 << 30}
	obs.Storages = map[string]map[string][]string{"pve1": {"local-lvm": {"rootdir", "images"}}, "pve2": {"local-lvm": {"rootdir", "images"}}}
	return obs
}

func TestMoveChange(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(a *plan.App, obs *plan.Observed)
		refused string   // a substring of the refusal, "" for none
		reasons []string // substrings of the move's reasons
	}{
		{name: "node: changes: the app and its volume move through a carrier",
			reasons: []string{"node changes pve1 → pve2: the container migrates stopped", "retained volumes (home) go through a carrier container from the keeper on pve1 to the keeper on pve2"}},
		{name: "a container with snapshots is refused with the fix",
			edit:    func(a *plan.App, obs *plan.Observed) { obs.Apps["hermes"][0].Config["parent"] = "before" },
			refused: "container 105 has snapshots (the latest is before); PVE cannot migrate"},
		{name: "snapshots are deleted with consent",
			edit: func(a *plan.App, obs *plan.Observed) {
				obs.Apps["hermes"][0].Config["parent"] = "before"
				a.DeleteSnapshots = true
			},
			reasons: []string{"its snapshots (the latest is before) are deleted first (--delete-snapshots)"}},
		{name: "a volume whose storage the target lacks is refused",
			edit:    func(a *plan.App, obs *plan.Observed) { obs.Storages["pve2"] = map[string][]string{} },
			refused: "volume home is on storage local-lvm, which node pve2 does not have"},
		{name: "a move and a replace at once are refused",
			edit:    func(a *plan.App, obs *plan.Observed) { a.Unprivileged = false },
			refused: "moving it from pve1 to pve2 and replacing it (unprivileged changes true → false"},
		{name: "a move from an offline node is refused",
			edit:    func(a *plan.App, obs *plan.Observed) { obs.Offline = []string{"pve1"} },
			refused: "node pve1, which is offline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, obs := app(), onTwoNodes()
			a.Node = "pve2"
			if tt.edit != nil {
				tt.edit(&a, obs)
			}
			p, err := plan.Make([]plan.App{a}, obs)
			var refused *plan.RefusedError
			if tt.refused != "" {
				if !errors.As(err, &refused) || !strings.Contains(strings.Join(refused.Problems, "\n"), tt.refused) {
					t.Fatalf("err %v, want a refusal with %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := p.Changes[0]
			if c.Action != plan.Move || c.From != "pve1" || c.Node != "pve2" || c.OldVMID != 105 || !c.Start {
				t.Fatalf("change %+v, want a move of ct 105 from pve1 to pve2", c)
			}
			if len(c.Volumes) != 1 || c.Volumes[0].Action != plan.VolMove || c.Volumes[0].VolID != "local-lvm:vm-999-disk-1" {
				t.Errorf("volumes %+v, want home moved", c.Volumes)
			}
			for _, r := range tt.reasons {
				if !strings.Contains(strings.Join(c.Reasons, "\n"), r) {
					t.Errorf("reasons %q lack %q", c.Reasons, r)
				}
			}
			if got := p.Nodes(); !slices.Equal(got, []string{"pve1", "pve2"}) {
				t.Errorf("nodes to lock %v, want both", got)
			}
			if len(p.Keepers) != 1 || p.Keepers[0].Node != "pve2" || p.Keepers[0].Action != plan.Create {
				t.Errorf("keepers %+v, want one created on pve2", p.Keepers)
			}
		})
	}
}

func TestFinishMove(t *testing.T) {
	carrier := func(node string) *plan.Carrier {
		return &plan.Carrier{VMID: 120, Node: node,
			Notes:  plan.CarrierNotes{App: "hermes", From: "pve1", To: "pve2", Carrying: map[plan.VolumeKey]plan.AdoptIntent{{App: "hermes", Name: "home"}: {Source: "local-lvm:vm-999-disk-1", Key: "unused0"}}},
			Config: map[string]string{"unused0": "local-lvm:vm-120-disk-1"}}
	}
	tests := []struct {
		name      string
		at, pin   string // the carrier's node; the manifest's node:
		wantNode  string
		wantWhy   string
		wantWarns string
	}{
		{name: "finished to the carrier's target", at: "pve1", wantNode: "pve2", wantWhy: "finish the move of app hermes from pve1 to pve2, interrupted (carrier ct 120 on pve1 holds 1 of its volumes)"},
		{name: "rolled back when the manifest pins the node the carrier is still on", at: "pve1", pin: "pve1", wantNode: "pve1", wantWhy: "roll back the move"},
		{name: "finished first when the carrier has left", at: "pve2", pin: "pve1", wantNode: "pve2", wantWhy: "finish the move", wantWarns: "the interrupted move to pve2 is finished first; the manifest's node pve1 is planned after it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, obs := app(), onTwoNodes()
			a.Node = tt.pin
			obs.Carriers = map[string]*plan.Carrier{"hermes": carrier(tt.at)}
			p, err := plan.Make([]plan.App{a}, obs)
			if err != nil {
				t.Fatal(err)
			}
			c := p.Changes[0]
			if c.Action != plan.Move || c.Node != tt.wantNode || !strings.Contains(strings.Join(c.Reasons, "\n"), tt.wantWhy) {
				t.Fatalf("change %+v, want a move to %s (%q)", c, tt.wantNode, tt.wantWhy)
			}
			if got := strings.Join(p.Warnings, "\n"); !strings.Contains(got, tt.wantWarns) {
				t.Errorf("warnings %q lack %q", got, tt.wantWarns)
			}
		})
	}
}

func TestCarrierNotesRoundTrip(t *testing.T) {
	n := plan.CarrierNotes{App: "web", From: "pve1", To: "pve2", Carrying: map[plan.VolumeKey]plan.AdoptIntent{
		{App: "web", Name: "logs"}: {Source: "local-lvm:vm-100-disk-2", Key: "unused1"},
		{App: "web", Name: "data"}: {Source: "local-lvm:vm-100-disk-1", Key: "unused0"},
	}}
	got, ok := plan.ParseCarrierNotes(n.Render())
	if !ok || got.App != n.App || got.From != n.From || got.To != n.To || !maps.Equal(got.Carrying, n.Carrying) {
		t.Errorf("round trip: %+v %v, want %+v", got, ok, n)
	}
	if _, ok := plan.ParseCarrierNotes("corral-move: app=web from=pve1\n"); ok {
		t.Error("Notes without to= read as a move")
	}
}

func TestPlaceAway(t *testing.T) {
	tests := []struct {
		name    string
		allowed []string
		want    map[string]int
		refused string
	}{
		{name: "spread over the other nodes", want: map[string]int{"pve2": 3, "pve3": 3}},
		{name: "only the allowed nodes", allowed: []string{"pve1", "pve3"}, want: map[string]int{"pve3": 6}},
		{name: "nowhere to go", allowed: []string{"pve1"}, refused: "no online node to place it on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := threeNodes()
			var apps []plan.App
			var names []string
			for i := range 6 {
				a := plainApp(fmt.Sprintf("app%d", i), 512, plan.Placement{Nodes: tt.allowed})
				apps = append(apps, a)
				names = append(names, a.Name)
				obs.Apps[a.Name] = []*plan.CT{{VMID: 100 + i, Node: "pve1"}}
			}
			got, err := plan.PlaceAway(apps, obs, "pve1", names)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("err %v, want %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := map[string]int{}
			for app, w := range got {
				n[w[0]]++
				if !strings.Contains(w[1], "placed on "+w[0]) {
					t.Errorf("%s: reason %q", app, w[1])
				}
			}
			if !maps.Equal(n, tt.want) {
				t.Errorf("placed %v, want %v", n, tt.want)
			}
		})
	}
}

// TestDrain: the apps on the drained node leave it (their Node set, the
// plan narrowed to them and to an app whose interrupted move it
// finishes), the others stay; an unknown node and an app pinned to the
// node are refused.
func TestDrain(t *testing.T) {
	tests := []struct {
		name, node, pinned string
		refused            string
	}{
		{name: "moves the node's apps", node: "pve1"},
		{name: "unknown node", node: "pve9", refused: `node "pve9" does not exist`},
		{name: "pinned app", node: "pve1", pinned: "app0", refused: "the manifest pins app0 to node pve1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := threeNodes()
			var apps []plan.App
			for i, node := range []string{"pve1", "pve1", "pve2"} {
				a := plainApp(fmt.Sprintf("app%d", i), 512, plan.Placement{})
				if a.Name == tt.pinned {
					a.Node = tt.node
				}
				apps = append(apps, a)
				obs.Apps[a.Name] = []*plan.CT{{VMID: 100 + i, Node: node}}
			}
			obs.Carriers = map[string]*plan.Carrier{"app2": {}}
			d, err := plan.Drain(apps, obs, tt.node, true)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("err %v, want %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range apps[:2] {
				if a.Node == "" || a.Node == "pve1" || !a.DeleteSnapshots || !d.Only[a.Name] || d.Why[a.Name] == "" {
					t.Errorf("%s: node %q, delete snapshots %v, only %v, why %q: want it moved off pve1", a.Name, a.Node, a.DeleteSnapshots, d.Only[a.Name], d.Why[a.Name])
				}
			}
			if apps[2].Node != "" || !d.Only["app2"] || d.Why["app2"] != "" {
				t.Errorf("app2 (on pve2, its move interrupted): node %q, only %v, why %q; want it left in place, in the plan to finish its move", apps[2].Node, d.Only["app2"], d.Why["app2"])
			}
		})
	}
}
