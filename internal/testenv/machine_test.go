package testenv

import (
	"sync"
	"testing"
	"time"
)

// TestHoldMachine: shared holders run side by side; one alone waits until
// they are done, and a shared holder waits for it in turn.
func TestHoldMachine(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var runs sync.WaitGroup // every t.Run returns before the test does
	defer runs.Wait()
	run := func(name string, f func(*testing.T)) {
		runs.Add(1)
		go func() { defer runs.Done(); t.Run(name, f) }()
	}
	inner := func(hold func(testing.TB)) (release func()) {
		done := make(chan struct{})
		held := make(chan struct{})
		run("holder", func(t *testing.T) {
			hold(t)
			close(held)
			<-done
		})
		<-held
		return func() { close(done) }
	}
	releaseA := inner(HoldMachineShared)
	releaseB := inner(HoldMachineShared) // a second shared holder does not wait

	alone := make(chan struct{})
	releaseAlone := make(chan struct{})
	run("alone", func(t *testing.T) {
		HoldMachineAlone(t)
		close(alone)
		<-releaseAlone
	})
	select {
	case <-alone:
		t.Fatal("HoldMachineAlone went on while two tests held the machine shared")
	case <-time.After(100 * time.Millisecond):
	}
	releaseA()
	releaseB()
	<-alone

	shared := make(chan struct{})
	run("after", func(t *testing.T) {
		HoldMachineShared(t)
		close(shared)
	})
	select {
	case <-shared:
		t.Fatal("HoldMachineShared went on while a test held the machine alone")
	case <-time.After(100 * time.Millisecond):
	}
	close(releaseAlone)
	<-shared
}
