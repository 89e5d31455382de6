package bench

import (
	"context"
	"testing"
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
