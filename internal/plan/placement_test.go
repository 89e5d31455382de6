package plan_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// threeNodes is an empty three-node cluster with the template everywhere.
func threeNodes() *plan.Observed {
	nodes := []string{"pve1", "pve2", "pve3"}
	obs := &plan.Observed{Nodes: nodes, Templates: map[string][]string{}, Apps: map[string][]*plan.CT{},
		NodeMemory: map[string]int64{}, GuestMemory: map[string]int64{}}
	for _, n := range nodes {
		obs.Templates[n] = []string{tmpl}
		obs.NodeMemory[n] = 64 << 30
	}
	return obs
}

// plainApp is a new app without volumes.
func plainApp(name string, mem int, p plan.Placement) plan.App {
	a := app()
	a.Name, a.MemoryMiB, a.Volumes, a.Placement = name, mem, nil, p
	return a
}

// nodesOf returns where the plan puts each app.
func nodesOf(t *testing.T, apps []plan.App, obs *plan.Observed) map[string]string {
	t.Helper()
	p, err := plan.Make(apps, obs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range p.Changes {
		out[c.App] = c.Node
	}
	return out
}

func count(where map[string]string) map[string]int {
	n := map[string]int{}
	for _, node := range where {
		n[node]++
	}
	return n
}

func TestPlacement(t *testing.T) {
	t.Run("spread puts thirty apps ten to a node", func(t *testing.T) {
		var apps []plan.App
		for i := range 30 {
			apps = append(apps, plainApp(fmt.Sprintf("app%02d", i), 512, plan.Placement{Policy: "spread"}))
		}
		got := count(nodesOf(t, apps, threeNodes()))
		if want := map[string]int{"pve1": 10, "pve2": 10, "pve3": 10}; !maps.Equal(got, want) {
			t.Errorf("spread: %v, want %v", got, want)
		}
	})
	t.Run("spread counts existing apps of any project", func(t *testing.T) {
		obs := threeNodes()
		for i, n := range []string{"pve1", "pve1", "pve2"} {
			obs.Apps[fmt.Sprintf("other%d", i)] = []*plan.CT{{VMID: 200 + i, Node: n, Project: "other"}}
		}
		where := nodesOf(t, []plan.App{plainApp("a", 512, plan.Placement{}), plainApp("b", 512, plan.Placement{}), plainApp("c", 512, plan.Placement{})}, obs)
		if where["a"] != "pve3" || where["b"] != "pve2" || where["c"] != "pve3" {
			t.Errorf("placed %v; want a and c on pve3 (empty), b on pve2", where)
		}
	})
	t.Run("memory goes to the most memory not given to guests", func(t *testing.T) {
		obs := threeNodes()
		obs.GuestMemory = map[string]int64{"pve1": 8 << 30, "pve2": 60 << 30, "pve3": 16 << 30}
		where := nodesOf(t, []plan.App{
			plainApp("big", 16<<10, plan.Placement{Policy: "memory"}), // pve1: 56 GiB free
			plainApp("next", 1<<10, plan.Placement{Policy: "memory"}), // pve1 40, pve3 48 → pve3
		}, obs)
		if where["big"] != "pve1" || where["next"] != "pve3" {
			t.Errorf("placed %v; want big on pve1, next on pve3", where)
		}
	})
	t.Run("memory without node memory falls back to spread and says why", func(t *testing.T) {
		obs := threeNodes()
		delete(obs.NodeMemory, "pve2")
		p, err := plan.Make([]plan.App{plainApp("a", 512, plan.Placement{Policy: "memory"})}, obs)
		if err != nil {
			t.Fatal(err)
		}
		if r := strings.Join(p.Changes[0].Reasons, "; "); !strings.Contains(r, "by policy spread") || !strings.Contains(r, "Sys.Audit on /nodes/pve2") {
			t.Errorf("reasons %q", r)
		}
	})
	t.Run("allowed nodes only, offline ones skipped", func(t *testing.T) {
		obs := threeNodes()
		obs.Offline = []string{"pve3"}
		var apps []plan.App
		for i := range 4 {
			apps = append(apps, plainApp(fmt.Sprintf("a%d", i), 512, plan.Placement{Nodes: []string{"pve3", "pve2"}}))
		}
		got := count(nodesOf(t, apps, obs))
		if want := map[string]int{"pve2": 4}; !maps.Equal(got, want) {
			t.Errorf("placed %v, want all on pve2", got)
		}
	})
	t.Run("existing apps stay, pinned apps go where pinned", func(t *testing.T) {
		obs := threeNodes()
		obs.Apps["old"] = []*plan.CT{{VMID: 100, Node: "pve3", Config: map[string]string{}}}
		where := nodesOf(t, []plan.App{plainApp("old", 512, plan.Placement{Nodes: []string{"pve1"}}), func() plan.App {
			a := plainApp("pinned", 512, plan.Placement{})
			a.Node = "pve3"
			return a
		}()}, obs)
		if where["old"] != "pve3" || where["pinned"] != "pve3" {
			t.Errorf("placed %v", where)
		}
	})
	t.Run("an app comes back to the node that keeps its volumes", func(t *testing.T) {
		obs := threeNodes()
		obs.Keepers = map[string][]*plan.Keeper{"pve3": {{VMID: 900, Node: "pve3", Protected: true,
			Records: map[plan.VolumeKey]string{{App: "db", Name: "data"}: "local-lvm:vm-900-disk-1"}}}}
		p, err := plan.Make([]plan.App{plainApp("db", 512, plan.Placement{})}, obs)
		if err != nil {
			t.Fatal(err)
		}
		if c := p.Changes[0]; c.Node != "pve3" || !slices.Contains(c.Reasons, "placed on pve3, where the keeper holds its retained volumes") {
			t.Errorf("change %s on %s, reasons %q", c.App, c.Node, c.Reasons)
		}
	})
	t.Run("adding an app moves no other", func(t *testing.T) {
		obs := threeNodes()
		first := nodesOf(t, []plan.App{plainApp("a", 512, plan.Placement{}), plainApp("b", 512, plan.Placement{})}, obs)
		for app, n := range first {
			obs.Apps[app] = []*plan.CT{{VMID: 100 + len(obs.Apps), Node: n, Config: map[string]string{}}}
		}
		again := nodesOf(t, []plan.App{plainApp("new", 512, plan.Placement{}), plainApp("a", 512, plan.Placement{}), plainApp("b", 512, plan.Placement{})}, obs)
		if again["a"] != first["a"] || again["b"] != first["b"] || again["new"] != "pve3" {
			t.Errorf("first %v, then %v", first, again)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		obs := threeNodes()
		_, err := plan.Make([]plan.App{plainApp("a", 512, plan.Placement{Nodes: []string{"pve9"}})}, obs)
		if err == nil || !strings.Contains(err.Error(), `placement.nodes names node "pve9", which does not exist (nodes: pve1, pve2, pve3)`) {
			t.Errorf("unknown node: %v", err)
		}
		obs.Offline = []string{"pve1", "pve2", "pve3"}
		_, err = plan.Make([]plan.App{plainApp("a", 512, plan.Placement{})}, obs)
		if err == nil || !strings.Contains(err.Error(), "no online node to place it on") {
			t.Errorf("all offline: %v", err)
		}
	})
}

// VolumeOwner reads the owner from every volname form PVE uses.
func TestVolumeOwner(t *testing.T) {
	for volid, want := range map[string]int{
		"local-lvm:vm-100-disk-1":           100,
		"nfs:100/vm-100-disk-0.raw":         100,
		"local:101/vm-101-disk-2.raw":       101,
		"nfs:base-9-disk-0/vm-102-disk-0.q": 102,
		"rbd:vm-103-disk-0":                 103,
		"zfs:subvol-104-disk-0":             104,
		"local:iso/debian.iso":              0,
	} {
		if got := plan.VolumeOwner(volid); got != want {
			t.Errorf("VolumeOwner(%q) = %d, want %d", volid, got, want)
		}
	}
}
