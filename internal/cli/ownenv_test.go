package cli

import (
	"os"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// ownedEnv holds, for each variable a test owns through ownEnv, the
// test that owns it.
var ownedEnv struct {
	mu    sync.Mutex
	cond  *sync.Cond
	owner map[string]testing.TB
	// waiting counts the tests waiting for a name (TestOwnEnv waits
	// until one does).
	waiting int
}

func init() {
	ownedEnv.cond = sync.NewCond(&ownedEnv.mu)
	ownedEnv.owner = map[string]testing.TB{}
}

// ownEnv sets the variable name to value for the rest of t, as
// t.Setenv does, but in a parallel test: t owns name until it ends (a
// test that asks for a name another test owns waits for it), so no two
// tests see each other's value. It is for variables only tests read
// (the secrets a test manifest takes with ${env:NAME}); a variable
// corral reads for its own settings stays t.Setenv's, which keeps the
// test serial, because every test's commands would see it.
func ownEnv(t testing.TB, name, value string) {
	t.Helper()
	ownedEnv.mu.Lock()
	for ownedEnv.owner[name] != nil && ownedEnv.owner[name] != t {
		ownedEnv.waiting++
		ownedEnv.cond.Wait()
		ownedEnv.waiting--
	}
	first := ownedEnv.owner[name] == nil
	ownedEnv.owner[name] = t
	ownedEnv.mu.Unlock()
	if first {
		prev, had := os.LookupEnv(name)
		t.Cleanup(func() {
			if had {
				os.Setenv(name, prev)
			} else {
				os.Unsetenv(name)
			}
			ownedEnv.mu.Lock()
			delete(ownedEnv.owner, name)
			ownedEnv.cond.Broadcast()
			ownedEnv.mu.Unlock()
		})
	}
	if err := os.Setenv(name, value); err != nil {
		t.Fatal(err)
	}
}

// TestOwnEnv: a second test that asks for a variable the first owns
// waits until the first ends, then sees its own value; when both are
// done the variable is as it was.
func TestOwnEnv(t *testing.T) {
	testenv.NeedParallel(t, 2) // first waits for second
	const name = "CORRAL_TEST_OWNENV"
	os.Unsetenv(name)
	firstSet := make(chan struct{})
	t.Run("group", func(t *testing.T) {
		t.Run("first", func(t *testing.T) {
			t.Parallel()
			ownEnv(t, name, "one")
			ownEnv(t, name, "two")
			close(firstSet)
			testenv.WaitFor(t, "the second test to wait for the variable, or to set it", func() bool {
				ownedEnv.mu.Lock()
				defer ownedEnv.mu.Unlock()
				return ownedEnv.waiting > 0 || os.Getenv(name) != "two"
			})
			if v := os.Getenv(name); v != "two" {
				t.Errorf("the first test sees %q, want its own two", v)
			}
		})
		t.Run("second", func(t *testing.T) {
			t.Parallel()
			<-firstSet
			ownEnv(t, name, "three")
			if v := os.Getenv(name); v != "three" {
				t.Errorf("the second test sees %q, want its own three", v)
			}
		})
	})
	if v, ok := os.LookupEnv(name); ok {
		t.Errorf("after both tests the variable is %q, want it unset as before", v)
	}
}
