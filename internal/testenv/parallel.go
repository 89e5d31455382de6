package testenv

import (
	"flag"
	"math"
	"strconv"
	"testing"
)

// DefaultParallel makes n the number of parallel tests of this test
// binary unless the command line chose one (-parallel). Call it in
// TestMain before m.Run. It is for packages whose tests wait on
// emulators, task durations and containers far more than they compute
// (internal/cli, internal/apply, cmd/corral): `go test ./...` runs
// GOMAXPROCS parallel tests, 2 on a 2-core machine, which leaves those
// cores idle most of the time; the README's test command says
// -parallel 8, and a newcomer's plain `go test -race ./...` gets the same.
func DefaultParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	defaultParallel(flag.CommandLine, n)
}

// defaultParallel sets fs's test.parallel to n unless it was set.
func defaultParallel(fs *flag.FlagSet, n int) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && fs.Lookup("test.parallel") != nil {
		fs.Set("test.parallel", strconv.Itoa(n))
	}
}

// NeedParallel skips t, saying why, when fewer than n tests may run at
// once (-parallel): a test whose parallel subtests wait for each other
// would otherwise hang until the binary's timeout under -parallel 1, a
// usual way to debug a package.
func NeedParallel(t testing.TB, n int) {
	t.Helper()
	if p := parallel(flag.CommandLine); p < n {
		t.Skipf("needs %d tests running at once, -parallel is %d", n, p)
	}
}

// parallel is fs's test.parallel, or a large number without one.
func parallel(fs *flag.FlagSet) int {
	f := fs.Lookup("test.parallel")
	if f == nil {
		return math.MaxInt
	}
	n, err := strconv.Atoi(f.Value.String())
	if err != nil {
		return math.MaxInt
	}
	return n
}
