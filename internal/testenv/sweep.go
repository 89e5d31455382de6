package testenv

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// SweepVar set to "full" makes every crash sweep kill at every point
// (`CORRAL_SWEEP=full go test -race ./internal/apply`); SweepSeedVar
// picks which sample the default run tries.
const (
	SweepVar     = "CORRAL_SWEEP"
	SweepSeedVar = "CORRAL_SWEEP_SEED"
)

// sweepSample is how many kill points a sweep tries by default. A crash
// sweep runs its operation once per point, and the suite's sweeps have
// about 300 points between them: all of them cost more CPU than the rest
// of the suite on a 2-core machine.
const sweepSample = 16

// KillPoints returns the points (1..n) at which a crash sweep kills the
// operation under test. With CORRAL_SWEEP=full, or when n is small, that
// is every point. Otherwise it is the first two, the last two and an even
// spread between them, shifted by a seed that changes every day (or
// CORRAL_SWEEP_SEED), so that successive runs cover every point while one
// run stays within the suite's time. The test's log names the seed: a
// failure is reproduced with CORRAL_SWEEP_SEED=<seed>, and
// CORRAL_SWEEP=full tries them all.
func KillPoints(t testing.TB, n int64) []int64 {
	t.Helper()
	if n <= sweepSample || os.Getenv(SweepVar) == "full" {
		return span(1, n)
	}
	seed := time.Now().UTC().Unix() / 86400
	if s, err := strconv.ParseInt(os.Getenv(SweepSeedVar), 10, 64); err == nil && s >= 0 {
		seed = s
	}
	pts := sample(n, seed)
	t.Logf("crash sweep: %d of %d kill points (%s=%d; %s=full tries all %d)", len(pts), n, SweepSeedVar, seed, SweepVar, n)
	return pts
}

// sample is KillPoints' choice for n > sweepSample: the ends, and one
// point in each of sweepSample-4 equal strides of the middle, at the
// seed's offset within its stride.
func sample(n, seed int64) []int64 {
	pts := []int64{1, 2}
	lo, hi := int64(3), n-2 // the middle, inclusive
	k := int64(sweepSample - 4)
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
