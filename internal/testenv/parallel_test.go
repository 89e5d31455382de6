package testenv

import (
	"flag"
	"io"
	"math"
	"strconv"
	"testing"
)

// TestDefaultParallel: the default applies when -parallel was not given,
// and never overrides it when it was.
func TestDefaultParallel(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "8"},
		{[]string{"-test.parallel=3"}, "3"},
		{[]string{"-test.parallel", "1"}, "1"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("test.parallel", 2, "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		defaultParallel(fs, 8)
		if got := fs.Lookup("test.parallel").Value.String(); got != tc.want {
			t.Errorf("args %q: parallel %s, want %s", tc.args, got, tc.want)
		}
		if got := strconv.Itoa(parallel(fs)); got != tc.want {
			t.Errorf("args %q: NeedParallel reads %s, want %s", tc.args, got, tc.want)
		}
	}
	if got := parallel(flag.NewFlagSet("t", flag.ContinueOnError)); got != math.MaxInt {
		t.Errorf("without the flag NeedParallel reads %d, want no limit", got)
	}
	// This binary's own flag exists under that name (testing's), so
	// DefaultParallel reaches it.
	if flag.Lookup("test.parallel") == nil {
		t.Fatal("no test.parallel flag in a test binary")
	}
}
