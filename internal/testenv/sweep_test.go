package testenv

import (
	"slices"
	"testing"
)

// TestKillPoints: a small sweep tries every point; a large one a sample
// that keeps the ends, stays in range without repeats, and covers every
// point over as many seeds as its widest stride.
func TestKillPoints(t *testing.T) {
	t.Setenv(SweepVar, "")
	if got := KillPoints(t, 5); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("5 points: %v", got)
	}
	for _, n := range []int64{17, 29, 51, 164} {
		seen := map[int64]bool{}
		for seed := range int64(n) {
			pts := sample(n, seed)
			if len(pts) > sweepSample {
				t.Fatalf("n=%d seed=%d: %d points, want at most %d", n, seed, len(pts), sweepSample)
			}
			if pts[0] != 1 || pts[1] != 2 || pts[len(pts)-1] != n || pts[len(pts)-2] != n-1 {
				t.Fatalf("n=%d seed=%d: ends missing: %v", n, seed, pts)
			}
			if !slices.IsSorted(pts) || len(slices.Compact(slices.Clone(pts))) != len(pts) {
				t.Fatalf("n=%d seed=%d: not sorted or repeated: %v", n, seed, pts)
			}
			for _, p := range pts {
				seen[p] = true
			}
		}
		for p := int64(1); p <= n; p++ {
			if !seen[p] {
				t.Errorf("n=%d: point %d never tried over %d seeds", n, p, n)
			}
		}
	}
	t.Setenv(SweepVar, "full")
	if got := KillPoints(t, 40); len(got) != 40 {
		t.Errorf("full: %d points, want 40", len(got))
	}
	t.Setenv(SweepVar, "")
	t.Setenv(SweepSeedVar, "7")
	if a, b := KillPoints(t, 100), sample(100, 7); !slices.Equal(a, b) {
		t.Errorf("seed from the environment: %v, want %v", a, b)
	}
}
