package bench

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// The API calls a no-op plan costs grow with corral's own apps only: a
// fixed number per app plus a constant.
func TestNoopPlanCallsPerApp(t *testing.T) {
	// Issue 18's scale target: a no-op plan costs at most 2 API calls per
	// app plus a constant per node. Measured as the difference between 2
	// and 6 apps (the per-app cost: one config read) and between one node
	// and three (the per-node cost: storages, their content, bridges and
	// running tasks, and the keeper's config).
	calls := map[[2]int]int{}
	for _, nodes := range []int{1, 3} {
		for _, n := range []int{3, 6} {
			g, err := newRig(t.TempDir(), 0, nodes)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			apps, err := parseApps(appsYAML(n, nodes, debian12))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.run(context.Background(), apps, false); err != nil {
				t.Fatal(err)
			}
			g.srv.ResetRequests()
			if _, err := g.plan(context.Background(), apps); err != nil {
				t.Fatal(err)
			}
			_, calls[[2]int{nodes, n}] = g.srv.Requests()
		}
		perApp := float64(calls[[2]int{nodes, 6}]-calls[[2]int{nodes, 3}]) / 3
		if perApp != 1 {
			t.Errorf("%d node(s), no-op plan: %d calls for 3 apps, %d for 6: %.2f per app, want 1 (the config read)", nodes, calls[[2]int{nodes, 3}], calls[[2]int{nodes, 6}], perApp)
		}
	}
	// 3 apps on one node, and one app on each of three: the same apps,
	// so the difference is two nodes' constant.
	perNode := float64(calls[[2]int{3, 3}]-calls[[2]int{1, 3}]) / 2
	if perNode < 1 || perNode > 8 {
		t.Errorf("no-op plan: %d calls for 3 apps on one node, %d on three: %.1f per node, want a small constant (at most 8)", calls[[2]int{1, 3}], calls[[2]int{3, 3}], perNode)
	}
	t.Logf("no-op plan calls: %v", calls)
}

func BenchmarkNoopPlan(b *testing.B) {
	g, err := newRig(b.TempDir(), 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	apps, err := parseApps(appsYAML(10, 1, debian12))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := g.run(context.Background(), apps, false); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.plan(context.Background(), apps); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreateDestroy(b *testing.B) {
	g, err := newRig(b.TempDir(), 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	apps, err := parseApps(appsYAML(1, 1, debian12))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := g.run(context.Background(), apps, false); err != nil {
			b.Fatal(err)
		}
		if _, err := g.run(context.Background(), apps, true); err != nil {
			b.Fatal(err)
		}
	}
}

// The mixed mix sends each round's requests in MixedRound's weights, to
// the round's container and its node, and takes the guests in turn.
func TestMixedPaths_weightsAndTargets(t *testing.T) {
	guests := []guestRef{{VMID: 101, Node: "pve1"}, {VMID: 202, Node: "pve2"}}
	paths := mixedPaths(guests, "local-lvm", 3)
	perRound := 0
	for _, e := range MixedRound {
		perRound += e.Weight
	}
	if perRound != 20 || len(paths) != 3*perRound {
		t.Fatalf("%d paths, %d a round; want 60, 20", len(paths), perRound)
	}
	count := map[string]int{}
	for _, p := range paths[:perRound] {
		count[p]++
	}
	want := map[string]int{
		"/api2/json/cluster/resources?type=vm":            1,
		"/api2/json/nodes":                                1,
		"/api2/json/nodes/pve1/lxc":                       1,
		"/api2/json/nodes/pve1/lxc/101/status/current":    5,
		"/api2/json/nodes/pve1/lxc/101/config":            5,
		"/api2/json/nodes/pve1/lxc/101/pending":           3,
		"/api2/json/nodes/pve1/storage/local-lvm/content": 1,
		"/api2/json/nodes/pve1/tasks":                     1,
		"/api2/json/cluster/status":                       1,
		"/api2/json/version":                              1,
	}
	if !reflect.DeepEqual(count, want) {
		t.Errorf("first round: %v\nwant %v", count, want)
	}
	if paths[perRound+4] != "/api2/json/nodes/pve2/lxc/202/status/current" || paths[2*perRound+4] != "/api2/json/nodes/pve1/lxc/101/status/current" {
		t.Errorf("rounds do not take the guests in turn: %s, %s", paths[perRound+4], paths[2*perRound+4])
	}
}

// The emulator's CPU time is utime + stime of /proc/PID/stat, in ticks
// of 1/100 s, found after the command name (which may hold spaces).
func TestStatCPUTime(t *testing.T) {
	line := "4242 (corral sim) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 12 0 100 0 0"
	got, err := statCPUTime(line)
	if err != nil || got != 3250*time.Millisecond {
		t.Errorf("statCPUTime = %v, %v; want 3.25s", got, err)
	}
	if _, err := statCPUTime("garbage"); err == nil {
		t.Error("a line without fields parsed")
	}
}
