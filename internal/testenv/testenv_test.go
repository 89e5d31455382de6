package testenv_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
)

// recorder is a testing.TB that records how a helper ended the test
// instead of ending it.
type recorder struct {
	testing.TB
	skip, fatal, errs string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Fatal(args ...any)                 { r.fatal = fmt.Sprint(args...) }
func (r *recorder) Errorf(format string, args ...any) { r.errs += fmt.Sprintf(format, args...) }

func TestLack_skipsUnlessRequired(t *testing.T) {
	for _, tt := range []struct {
		env       string
		wantFatal bool
	}{{"", false}, {"0", false}, {"1", true}, {"yes", true}} {
		t.Run("CORRAL_REQUIRE_LXC="+tt.env, func(t *testing.T) {
			t.Setenv("CORRAL_REQUIRE_LXC", tt.env)
			r := &recorder{TB: t}
			testenv.Lack(r, testenv.LXC, "CTs run in the fallback view")
			if tt.wantFatal {
				if r.skip != "" || !strings.Contains(r.fatal, "CTs run in the fallback view") || !strings.Contains(r.fatal, "CORRAL_REQUIRE_LXC") {
					t.Errorf("skip %q, fatal %q; want a failure naming the reason and the variable", r.skip, r.fatal)
				}
				return
			}
			if r.fatal != "" || !strings.Contains(r.skip, "CTs run in the fallback view") || !strings.Contains(r.skip, "CORRAL_REQUIRE_LXC=1") {
				t.Errorf("skip %q, fatal %q; want a skip naming the reason and the variable", r.skip, r.fatal)
			}
		})
	}
}

func TestNeedGuestExec(t *testing.T) {
	t.Setenv("CORRAL_REQUIRE_GUEST_EXEC", "")
	r := &recorder{TB: t}
	testenv.NeedGuestExec(r, nil)
	if r.skip != "" || r.fatal != "" {
		t.Errorf("nil: skip %q, fatal %q", r.skip, r.fatal)
	}
	testenv.NeedGuestExec(r, errors.New("guest exec unavailable: no mount namespace"))
	if !strings.Contains(r.skip, "no mount namespace") {
		t.Errorf("skip %q", r.skip)
	}
}

func TestNeedRoot(t *testing.T) {
	t.Setenv("CORRAL_REQUIRE_ROOT", "1")
	r := &recorder{TB: t}
	testenv.NeedRoot(r, "a device node")
	if root := os.Geteuid() == 0; root != (r.fatal == "") || r.skip != "" {
		t.Errorf("root %v: skip %q, fatal %q", root, r.skip, r.fatal)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	testenv.WaitFor(t, "the third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
}

// TestWaitFor_slowCond: after a check that took long, WaitFor pauses at
// least as long, so a costly cond takes at most half of the wait.
func TestWaitFor_slowCond(t *testing.T) {
	n := 0
	var checking time.Duration // the checks but the last
	began := time.Now()
	testenv.WaitFor(t, "the fourth look", func() bool {
		start := time.Now()
		time.Sleep(30 * time.Millisecond)
		if n++; n == 4 {
			return true
		}
		checking += time.Since(start)
		return false
	})
	// Each of the three failed checks is followed by a pause at least as
	// long; time.Sleep never returns early, so this holds on any load.
	if waited := time.Since(began); waited < 2*checking {
		t.Errorf("waited %s for checks that took %s before the last: it paused less than they took", waited, checking)
	}
}

// deadlined is a test with the deadline at.
type deadlined struct {
	testing.TB
	at time.Time
}

func (d deadlined) Deadline() (time.Time, bool) { return d.at, true }

// TestGiveUpFollowsTheDeadline: waits give up shortly before the test
// binary's own deadline, and ten minutes on without one; Context ends
// there too.
func TestGiveUpFollowsTheDeadline(t *testing.T) {
	at := time.Now().Add(time.Hour)
	if got := testenv.GiveUp(deadlined{t, at}); !got.Equal(at.Add(-5 * time.Second)) {
		t.Errorf("GiveUp with a deadline at %s: %s, want 5 s before it", at, got)
	}
	r := &recorder{TB: t}
	if got := time.Until(testenv.GiveUp(r)); got < 9*time.Minute || got > 10*time.Minute {
		t.Errorf("GiveUp without a deadline: in %s, want 10 minutes", got)
	}
	ctx := testenv.Context(deadlined{t, at})
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(at.Add(-5*time.Second)) {
		t.Errorf("Context's deadline %s %v, want GiveUp's", dl, ok)
	}
	past := testenv.Expiry(deadlined{t, time.Now()})
	select {
	case <-past:
	case <-testenv.Expiry(t):
		t.Error("Expiry of a deadline passed did not fire before this test's own")
	}
}

func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.golden")
	if err := os.WriteFile(path, []byte("same\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	testenv.Golden(r, path, []byte("same\n"))
	if r.errs != "" || r.fatal != "" {
		t.Errorf("equal: errors %q, fatal %q", r.errs, r.fatal)
	}
	testenv.Golden(r, path, []byte("same"))
	if !strings.Contains(r.errs, path+" differs") {
		t.Errorf("differs: errors %q", r.errs)
	}
	testenv.Golden(r, path+".missing", nil)
	if !strings.Contains(r.fatal, "-update") {
		t.Errorf("missing: fatal %q", r.fatal)
	}
}
