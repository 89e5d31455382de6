package testenv

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// machineLock is the file whose flock says which tests use the machine's
// cores heavily. It is in the temporary directory, so every test process
// of one `go test ./...` (one per package, running side by side) sees it.
func machineLock() string { return filepath.Join(os.TempDir(), "corral-test-machine.lock") }

// HoldMachineAlone is for a test that saturates the machine for minutes
// (a real VM booting under TCG): it waits until no other such test and
// no test holding the machine shared runs, in this process or another,
// and holds the machine until the test ends. Without it, two real VM
// boots and the real-template tests ran at once on CI's two cores, and
// one emulator answered a task-status read after corral's own timeout.
func HoldMachineAlone(t testing.TB) { holdMachine(t, syscall.LOCK_EX) }

// HoldMachineShared is for a test that needs the machine to answer in
// reasonable time (real containers, real task durations) but may run
// beside others like it: it waits while a HoldMachineAlone test runs.
func HoldMachineShared(t testing.TB) { holdMachine(t, syscall.LOCK_SH) }

func holdMachine(t testing.TB, how int) {
	t.Helper()
	f, err := os.OpenFile(machineLock(), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("the test machine lock: %v", err)
	}
	began := time.Now()
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("the test machine lock %s: %v", f.Name(), err)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Logf("waited %s for the machine (another test held %s)", waited.Round(time.Second), f.Name())
	}
	t.Cleanup(func() { f.Close() }) // closing the file releases its flock
}
