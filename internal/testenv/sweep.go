package testenv

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// SweepVar set to "full" makes every crash sweep kill at every point
// (`CORRAL_SWEEP=full go test -race ./internal/apply`); SweepSeedVar
// picks which sample the default run tries. FullVar set (to anything but
// "" or "0") runs the slow families (crash sweeps, fault matrix, kills of
// real processes, the soak) at the size CI runs them; without it, as a
// newcomer types `go test -race ./...`, they run a smaller sample of the
// same cases, so that run fits in 5 minutes on 2 cores. .ci/run sets it.
const (
	SweepVar     = "CORRAL_SWEEP"
	SweepSeedVar = "CORRAL_SWEEP_SEED"
	FullVar      = "CORRAL_TEST_FULL"
)

// Full reports whether the slow families run at CI's size (FullVar).
func Full() bool {
	v := os.Getenv(FullVar)
	return v != "" && v != "0"
}

// sweepSample is how many kill points a sweep tries with FullVar (CI),
// shortSample without it. A crash sweep runs its operation once per
// point, and the suite's sweeps have about 300 points between them: all
// of them cost more CPU than the rest of the suite on a 2-core machine.
const (
	sweepSample = 16
	shortSample = 8
)

// Seed is the day's seed of the samples (KillPoints, SampleOf), or
// CORRAL_SWEEP_SEED's: successive days cover every case.
func Seed() int64 {
	if s, err := strconv.ParseInt(os.Getenv(SweepSeedVar), 10, 64); err == nil && s >= 0 {
		return s
	}
	return time.Now().UTC().Unix() / 86400
}

// KillPoints returns the points (1..n) at which a crash sweep kills the
// operation under test. With CORRAL_SWEEP=full, or when n is small, that
// is every point. Otherwise it is the first two, the last two and an even
// spread between them (16 points in all with CORRAL_TEST_FULL, 8
// without), shifted by a seed that changes every day (or
// CORRAL_SWEEP_SEED), so that successive runs cover every point while one
// run stays within the suite's time. The test's log names the seed: a
// failure is reproduced with CORRAL_SWEEP_SEED=<seed>, and
// CORRAL_SWEEP=full tries them all.
func KillPoints(t testing.TB, n int64) []int64 {
	t.Helper()
	size := int64(shortSample)
	if Full() {
		size = sweepSample
	}
	if n <= size || os.Getenv(SweepVar) == "full" {
		return span(1, n)
	}
	seed := Seed()
	pts := sample(n, seed, size)
	t.Logf("crash sweep: %d of %d kill points (%s=%d; %s=full tries all %d; %s=1 tries %d)", len(pts), n, SweepSeedVar, seed, SweepVar, n, FullVar, min(n, sweepSample))
	return pts
}

// SampleOf reports whether case i of a family runs: always with
// CORRAL_TEST_FULL, else every k-th case at the day's seed's offset, so
// that k successive days run every case. A family that samples so logs
// Seed() for a failure to be reproduced.
func SampleOf(t testing.TB, i, k int) bool {
	t.Helper()
	if Full() || k <= 1 {
		return true
	}
	return int64(i)%int64(k) == Seed()%int64(k)
}

// sample is KillPoints' choice of size points for n > size: the ends,
// and one point in each of size-4 equal strides of the middle, at the
// seed's offset within its stride.
func sample(n, seed, size int64) []int64 {
	pts := []int64{1, 2}
	lo, hi := int64(3), n-2 // the middle, inclusive
	k := size - 4
	width := hi - lo + 1
	for i := range k {
		from, to := lo+i*width/k, lo+(i+1)*width/k-1
		if to < from {
			continue
		}
		pts = append(pts, from+seed%(to-from+1))
	}
	return append(pts, n-1, n)
}

func span(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
