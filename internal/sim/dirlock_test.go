package sim

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestCloseReleasesTheDirectoryAtOnce: a new emulator on a state
// directory starts right after the last one closed, even while a copy of
// the lock's descriptor lives on, as in a child process that another
// goroutine forked and that has not exec'd yet (CI: a test restarting
// its emulator found the directory "in use" while other tests forked).
func TestCloseReleasesTheDirectoryAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scale := 0.0
	s, err := New(Options{Dir: dir, Listener: ListenNone, TimeScale: &scale})
	if err != nil {
		t.Fatal(err)
	}
	child, err := unix.Dup(int(s.dirLock.Fd())) // the forked child's copy
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(child)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := New(Options{Dir: dir, Listener: ListenNone, TimeScale: &scale})
	if err != nil {
		t.Fatalf("a new emulator right after the close: %v", err)
	}
	s2.Close()
}
