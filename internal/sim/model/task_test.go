package model

import (
	"strings"
	"testing"
)

// TestWorker_panicInStep: a step that panics fails its task with an
// internal error and leaves the cluster lock free for the next call.
func TestWorker_panicInStep(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.c.mu.Lock()
	upid := k.c.spawn(kitRoot, "pve", "vzstart", "100", func(w *Worker) error {
		return w.Do(func(st *State) error { panic("boom") })
	})
	k.c.mu.Unlock()
	task := k.wait("pve", upid)
	if !strings.HasPrefix(task.ExitStatus, "internal error: boom") {
		t.Errorf("exitstatus %q, want the internal error", task.ExitStatus)
	}
	if got := len(k.c.Tasks("pve")); got != 1 {
		t.Errorf("%d tasks listed, want 1", got)
	}
}
