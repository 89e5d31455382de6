package model

import (
	"sync/atomic"
	"testing"
)

// TestRunHook_firesOnStartAndStopOnly: the run hook (SetRunHook) runs
// after a task step that started or stopped a CT, and not after one
// that changed only its config: ctPower counts the starts and stops,
// the Worker compares the count around each step.
func TestRunHook_firesOnStartAndStopOnly(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.ct("pve", 101, nil)
	var calls atomic.Int32
	k.c.SetRunHook(func() { calls.Add(1) })
	if task := k.run(k.c.StartCT(kitRoot, "pve", 101, nil)); task.ExitStatus != "OK" {
		t.Fatalf("start: %q %v", task.ExitStatus, task.Log)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("after a start the hook ran %d times, want 1", n)
	}
	if task := k.run(k.c.ResizeCT(kitRoot, "pve", 101, map[string]string{"disk": "rootfs", "size": "+1G"})); task.ExitStatus != "OK" {
		t.Fatalf("resize: %q %v", task.ExitStatus, task.Log)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("a resize, which starts and stops nothing, ran the hook: %d calls", n)
	}
	if task := k.run(k.c.StopCT(kitRoot, "pve", 101, nil)); task.ExitStatus != "OK" {
		t.Fatalf("stop: %q %v", task.ExitStatus, task.Log)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("after a stop the hook ran %d times in all, want 2", n)
	}
}
