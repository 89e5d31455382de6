package bench

import (
	"context"
	"testing"
)

// The API calls a no-op plan costs grow with corral's own apps only: a
// fixed number per app plus a constant.
func TestNoopPlanCallsPerApp(t *testing.T) {
	calls := map[int]int{}
	for _, n := range []int{2, 6} {
		g, err := newRig(t.TempDir(), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		apps, err := parseApps(appsYAML(n, 1, debian12))
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
		_, calls[n] = g.srv.Requests()
	}
	perApp := float64(calls[6]-calls[2]) / 4
	if perApp != 1 {
		t.Errorf("no-op plan: %d calls for 2 apps, %d for 6: %.2f per app, want 1 (the config read)", calls[2], calls[6], perApp)
	}
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
