// Package memcap gives fuzz targets and tests a memory cap: Run measures
// the bytes a decoder allocates for one input (runtime.MemStats
// TotalAlloc, every allocation whether freed or not, so the figure does
// not depend on when the collector runs) and fails the test when they
// pass the budget. Peak memory is at most the total, so a total under the
// budget proves the peak is too.
//
// Only tests import it.
package memcap

import (
	"runtime"
	"testing"
)

// Budget is the memory issue 27 allows any decoder of outside input for
// one input up to its documented size limit.
const Budget = 256 << 20

// Allocated returns the bytes fn allocates. Other goroutines' allocations
// count too: call it where nothing else runs (a fuzz worker runs one input
// at a time).
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Run runs fn and fails t when it allocates more than budget bytes,
// naming the input's size.
func Run(t testing.TB, budget uint64, inputLen int, fn func()) {
	t.Helper()
	if n := Allocated(fn); Over(n, budget) {
		t.Fatalf("decoding a %d-byte input allocated %d MiB, more than the %d MiB cap", inputLen, n>>20, budget>>20)
	}
}

// Over reports whether n bytes allocated pass budget, in a build whose
// allocations are the program's own: never under -race (see Race), where
// the README's test command checks the budgets in a second, plain run.
func Over(n, budget uint64) bool {
	return !Race && n > budget
}

// SkipUnderRace skips a budget test whose inputs take long to process
// under -race, where its budget is not checked anyway (see Over): the
// README's test command runs it again without -race, which checks it.
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("a memory budget test: checked in the README's second, plain run (-race allocates several times what the code does)")
	}
}
