package apply_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
)

// keeperCreate is the emulator's keeper create at time scale 1 (its
// vzcreate, seed 000); the tests below take a lease life shorter than a
// create at their scale, so the create outlasts the lease however fast
// or loaded the machine is (a loaded machine only makes it longer).
const keeperCreate = 11 * time.Second

// createEnded waits for the vzcreate of vmid on the emulator to end,
// bounded by the create's own length many times over: how long it takes
// decides nothing, only whether it ends.
func createEnded(t *testing.T, srv *sim.Server, vmid int, bound time.Duration) {
	t.Helper()
	for end := time.Now().Add(bound); ; {
		for _, tt := range srv.TaskTimes() {
			if tt.Type == "vzcreate" && tt.ID == strconv.Itoa(vmid) && tt.Status == "stopped" {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("the keeper %d's create had not ended after %s", vmid, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSlowKeeperCreateKeepsTheLock: an apply's lock on an empty node
// whose keeper's create (which carries the lease, and whose config cannot
// be written until it ends) runs several lease lives. The lease held a
// fixed two lives, so the lock was given up a third of a life before (CI:
// a real-template keeper's create took over 3 m 20 s under load and
// TestRealTemplateApply lost its lock). Now it lives while the create
// runs: the holder keeps the lock, renews the lease the moment the
// create ends, and another corral finds the node locked throughout.
func TestSlowKeeperCreateKeepsTheLock(t *testing.T) {
	t.Parallel()
	scale := 1.0
	srv := pvetest.Start(t, pvetest.TimeScale(scale)).Server
	create := time.Duration(float64(keeperCreate) * scale)
	// The create lasts four lives, past the old two (whole seconds, as
	// the Notes keep them).
	ttl := (create / 4).Truncate(time.Second)
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	obs, err := apply.Observe(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	ex := &apply.Executor{Client: c}
	l, err := ex.Lock(context.Background(), obs, []string{"pve"}, apply.LockOptions{Command: "first", TTL: ttl, Beside: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	var ks []int // the keeper being created: the only create so far
	for _, tt := range srv.TaskTimes() {
		if id, err := strconv.Atoi(tt.ID); err == nil && tt.Type == "vzcreate" {
			ks = append(ks, id)
		}
	}
	if len(ks) != 1 {
		t.Fatalf("creates %v while the lock creates its keeper, want one", ks)
	}
	other := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	if _, err := lockNow(other, "second", 0); !isHeldBy(err, "first") {
		t.Errorf("another corral's lock while the keeper is created: %v; want it held by the first", err)
	}
	createEnded(t, srv, ks[0], 20*create)
	// Past the create's end by a life: the renewal the end woke has
	// written a fresh lease, or the lock was given up (Lost).
	select {
	case <-l.Lost():
		t.Fatalf("lock lost while its keeper was created: %v", l.Err())
	case <-time.After(ttl):
	}
	got := leaseIn(t, srv, ks[0])
	if got == nil || got.Life != 0 || !got.Until.After(time.Now()) {
		t.Errorf("lease after the create %+v, want it renewed (a live Until, no life)", got)
	}
	if _, err := lockNow(other, "second", 0); !isHeldBy(err, "first") {
		t.Errorf("another corral's lock after the create: %v; want it held by the first", err)
	}
}

// isHeldBy reports whether err says the lock is held by command's corral.
func isHeldBy(err error, command string) bool {
	var held *apply.LockHeldError
	return errors.As(err, &held) && held.Lease.Command == command
}

// TestDeadCreatorLosesTheLease: a corral that died while its keeper's
// create (carrying its lease) ran leaves a lease whose Until passed long
// before the create ended. Another corral takes it as held for a life
// after it finds the keeper created (its holder, alive, would have
// renewed it by then), and then takes it over: the dead holder still
// loses the lock, a life later.
func TestDeadCreatorLosesTheLease(t *testing.T) {
	t.Parallel()
	scale := 0.5
	srv := pvetest.Start(t, pvetest.TimeScale(scale)).Server
	create := time.Duration(float64(keeperCreate) * scale)
	life := 2 * time.Second // whole seconds, as the Notes keep them
	if create < 2*life {
		t.Fatalf("the create (%s) must outlast the lease (%s) for this test", create, life)
	}
	now := time.Now()
	dead := plan.KeeperNotes{Lease: &plan.Lease{ID: "dead", Holder: "corral@elsewhere:1", Command: "apply", Since: now, Until: now.Add(life), Life: life}}.Render()
	cl := srv.Cluster()
	upid, err := cl.CreateCT(rootAuth, "pve", map[string]string{"vmid": "100", "ostemplate": "local:vztmpl/" + debian12, "hostname": plan.KeeperName,
		"rootfs": "local-lvm:1", "features": "nesting=1", "tags": plan.TagManaged + ";" + plan.TagKeeper, "description": dead})
	if err != nil {
		t.Fatal(err)
	}
	if task, err := cl.WaitTask(context.Background(), "pve", upid); err != nil || task.ExitStatus != "OK" {
		t.Fatalf("keeper create: %+v %v", task, err)
	}
	if !time.Now().After(now.Add(life)) {
		t.Fatalf("the create ended within the lease's Until: nothing tested")
	}
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	if _, err := lockNow(c, "second", 0); !isHeldBy(err, "apply") {
		t.Fatalf("lock just after a dead corral's keeper create ended: %v; want it held a life more", err)
	}
	start := time.Now()
	l, err := lockNow(c, "second", 10*life)
	if err != nil {
		t.Fatalf("lock a life after the dead corral's keeper was created: %v", err)
	}
	defer l.Release()
	if waited := time.Since(start); waited < life-time.Second/2 {
		t.Errorf("took the dead corral's lease after %s, before its life of %s", waited, life)
	}
	if got := leaseIn(t, srv, 100); got == nil || got.Command != "second" {
		t.Errorf("lease in the keeper %+v, want the second corral's", got)
	}
}
