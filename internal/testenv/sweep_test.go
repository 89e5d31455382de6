package testenv

import (
	"slices"
	"strconv"
	"testing"
)

// TestKillPoints: a small sweep tries every point; a large one a sample
// that keeps the ends, stays in range without repeats, and covers every
// point over as many seeds as its widest stride.
func TestKillPoints(t *testing.T) {
	t.Setenv(SweepVar, "")
	t.Setenv(FullVar, "1")
	if got := KillPoints(t, 5); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("5 points: %v", got)
	}
	for _, n := range []int64{17, 29, 51, 164} {
		seen := map[int64]bool{}
		for seed := range int64(n) {
			pts := sample(n, seed, sweepSample)
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
	if a, b := KillPoints(t, 100), sample(100, 7, sweepSample); !slices.Equal(a, b) {
		t.Errorf("seed from the environment: %v, want %v", a, b)
	}
}

// TestKillPoints_sample: without CORRAL_TEST_FULL a sweep tries the
// newcomer's smaller sample, still with both ends, and a seed's sample
// is within the full run's choice of points over the seeds (the same
// spread, fewer strides); with it, CI's larger sample.
func TestKillPoints_sample(t *testing.T) {
	t.Setenv(SweepVar, "")
	t.Setenv(SweepSeedVar, "3")
	t.Setenv(FullVar, "")
	short := KillPoints(t, 100)
	if len(short) != shortSample || short[0] != 1 || short[1] != 2 || short[len(short)-2] != 99 || short[len(short)-1] != 100 {
		t.Errorf("without %s: %v, want %d points with both ends", FullVar, short, shortSample)
	}
	t.Setenv(FullVar, "1")
	if full := KillPoints(t, 100); len(full) != sweepSample {
		t.Errorf("with %s=1: %d points, want %d", FullVar, len(full), sweepSample)
	}
	t.Setenv(FullVar, "0")
	if !slices.Equal(KillPoints(t, 100), short) {
		t.Errorf("%s=0 is not the sample", FullVar)
	}
}

// TestSampleOf: without CORRAL_TEST_FULL, SampleOf keeps every k-th case
// at a seed's offset, and over k seeds every case; with it, every case.
func TestSampleOf(t *testing.T) {
	t.Setenv(FullVar, "")
	seen := map[int]int{}
	for seed := range int64(3) {
		t.Setenv(SweepSeedVar, strconv.FormatInt(seed, 10))
		for i := range 10 {
			if SampleOf(t, i, 3) {
				seen[i]++
			}
		}
	}
	for i := range 10 {
		if seen[i] != 1 {
			t.Errorf("case %d kept by %d of 3 seeds, want exactly 1", i, seen[i])
		}
	}
	t.Setenv(FullVar, "1")
	for i := range 10 {
		if !SampleOf(t, i, 3) {
			t.Errorf("with %s=1 case %d is left out", FullVar, i)
		}
	}
}
