package memcap_test

import (
	"testing"

	"github.com/corralhq/corral/internal/testutil/memcap"
)

var sink []byte

func TestAllocated(t *testing.T) {
	n := memcap.Allocated(func() { sink = make([]byte, 8<<20) })
	if n < 8<<20 || n > 9<<20 {
		t.Fatalf("Allocated = %d, want about 8 MiB", n)
	}
}

func TestRun_fails(t *testing.T) {
	if memcap.Race {
		t.Skip("budgets are checked without -race (the README's test command runs this again so)")
	}
	ft := &fakeT{TB: t}
	memcap.Run(ft, 1<<20, 1, func() { sink = make([]byte, 2<<20) })
	if !ft.failed {
		t.Fatal("Run did not fail when the budget was passed")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }
