package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The first apply on a node without a keeper holds corral's lock from the
// keeper's create on (the lease is in the create's Notes) and creates the
// app beside it (internal/apply/lockclaim.go). These run the real binary
// against an emulator at a tenth of Proxmox's task durations.

// firstApplyRig is newMoveKillRig's emulator with the manifest written.
func firstApplyRig(t *testing.T) (*moveKillRig, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: real processes and task durations")
	}
	r := newMoveKillRig(t)
	m := filepath.Join(t.TempDir(), "firstapply", "corral.yaml")
	os.MkdirAll(filepath.Dir(m), 0o755)
	if err := os.WriteFile(m, []byte(moveKillManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return r, m
}

// firstApplied checks, as root, that web has one running container
// mounting exactly its recorded volume, that pve1 has one keeper with no
// live lease, and that a fresh plan is empty.
func (r *moveKillRig) firstApplied(m string) []string {
	obs := r.observe()
	var bad []string
	if ks := obs.Keepers["pve1"]; len(ks) != 1 {
		bad = append(bad, fmt.Sprintf("pve1 has %d keepers, want 1", len(ks)))
	} else if l := ks[0].Lease; l != nil && time.Now().Before(l.Until) {
		bad = append(bad, fmt.Sprintf("a live lease is left in keeper %d: %s", ks[0].VMID, l))
	}
	cts := obs.Apps["web"]
	if len(cts) != 1 {
		return append(bad, fmt.Sprintf("web has %d containers, want 1", len(cts)))
	}
	if cts[0].Status != "running" {
		bad = append(bad, fmt.Sprintf("web's container %d is %s", cts[0].VMID, cts[0].Status))
	}
	bad = append(bad, mountsRecorded(obs, cts[0], "web", []string{"data"})...)
	if code, out, errOut := r.run("plan", "-f", m); code != 0 {
		bad = append(bad, fmt.Sprintf("plan: exit %d\n%s%s", code, out, errOut))
	}
	return bad
}

// runningTasks counts the running tasks of type typ on pve1.
func (r *moveKillRig) runningTasks(typ string) int {
	var tasks []struct {
		ID string `json:"id"`
	}
	q := url.Values{"source": {"active"}, "typefilter": {typ}}
	if err := r.root.Get(context.Background(), "/nodes/pve1/tasks", q, &tasks); err != nil {
		r.t.Fatal(err)
	}
	return len(tasks)
}

// TestTwoFirstAppliesAtOnce: two corral processes apply the same manifest
// at once to a cluster without a keeper. Each creates a keeper with its
// lease in it (when both planned before either created anything); at most
// one holds the lock, the other waits for it and finds nothing left to do
// (or, when its plan came after the other's creates began, waits for them
// and plans nothing). Both exit 0, and the cluster has one container of
// the app, one keeper and no live lease. internal/apply's
// TestLocksOnAnEmptyNodeNeverHoldTogether makes the claims race every time.
func TestTwoFirstAppliesAtOnce(t *testing.T) {
	t.Parallel()
	r, m := firstApplyRig(t)
	outs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := r.command("apply", "-f", m, "--auto-approve").CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	applied := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("apply %d: %v\n%s", i, err, outs[i])
		}
		if strings.Contains(outs[i], "Apply complete") {
			applied++
		} else if !strings.Contains(outs[i], "Another corral made these changes meanwhile") && !strings.Contains(outs[i], "The cluster matches the manifest") {
			t.Errorf("apply %d exited 0 without Apply complete or saying another corral made the changes:\n%s", i, outs[i])
		}
	}
	if applied == 0 {
		t.Errorf("neither apply says Apply complete:\n%s\n---\n%s", outs[0], outs[1])
	}
	if bad := r.firstApplied(m); len(bad) > 0 {
		t.Fatalf("after two first applies at once:\n  %s\n%s\n---\n%s", strings.Join(bad, "\n  "), outs[0], outs[1])
	}
}

// TestFirstApplyKilledThenApply: the first apply SIGKILLed while the
// keeper that carries its lease is created and the app's create has not
// begun, while both creates run, and while the app starts. The next apply
// takes the dead lease over (its holder is gone), converges and says Apply
// complete (or, when the kill came after the start was posted, that the
// cluster matches the manifest, or that another corral made the changes).
func TestFirstApplyKilledThenApply(t *testing.T) {
	t.Parallel()
	for _, moment := range []struct {
		name string
		now  func(r *moveKillRig) bool
	}{
		{"keeper create alone", func(r *moveKillRig) bool { return r.runningTasks("vzcreate") == 1 }},
		{"both creates", func(r *moveKillRig) bool { return r.runningTasks("vzcreate") == 2 }},
		{"app start", func(r *moveKillRig) bool { return r.runningTasks("vzstart") == 1 }},
	} {
		t.Run(moment.name, func(t *testing.T) {
			t.Parallel()
			r, m := firstApplyRig(t)
			cmd := r.command("apply", "-f", m, "--auto-approve")
			killWhen(t, cmd, moment.name, func(string) bool { return moment.now(r) })
			out, err := r.command("apply", "-f", m, "--auto-approve").CombinedOutput()
			// Killed as the start was posted, the start runs on: then
			// there is nothing left to do, seen by the first plan or, when
			// the start ends between it and the plan under the lock, by
			// that one (the killed corral is the other that made them).
			done := strings.Contains(string(out), "Apply complete") || strings.Contains(string(out), "The cluster matches the manifest") ||
				strings.Contains(string(out), "Another corral made these changes meanwhile")
			if err != nil || !done {
				t.Fatalf("apply after the kill: %v\n%s", err, out)
			}
			if bad := r.firstApplied(m); len(bad) > 0 {
				t.Fatalf("after the kill and an apply:\n  %s\n%s", strings.Join(bad, "\n  "), out)
			}
		})
	}
}
