package apply_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

var rootAuth = model.Auth{UserID: "root@pam"}

// keepersOn lists the keepers of node pve, lowest VMID first.
func keepersOn(srv *sim.Server) []int {
	var ks []int
	for _, r := range srv.Cluster().Resources("vm") {
		if r.Node == "pve" && slices.Contains(plan.ParseTags(r.Tags), plan.TagKeeper) {
			ks = append(ks, r.VMID)
		}
	}
	slices.Sort(ks)
	return ks
}

// leaseIn is the lease in a keeper's Notes, or nil.
func leaseIn(t *testing.T, srv *sim.Server, vmid int) *plan.Lease {
	t.Helper()
	conf, _, err := srv.Cluster().CTConfig(rootAuth, "pve", vmid, true, "")
	if err != nil {
		t.Fatal(err)
	}
	return plan.ParseLease(conf["description"])
}

// lockNow observes the cluster and takes the lock on node pve.
func lockNow(c *pve.Client, command string, wait time.Duration) (*apply.Lock, error) {
	obs, err := apply.Observe(context.Background(), c)
	if err != nil {
		return nil, err
	}
	return lockAfter(c, obs, command, wait, true)
}

// lockAfter takes the lock on node pve as a corral that observed obs;
// beside as an apply does (LockOptions.Beside).
func lockAfter(c *pve.Client, obs *plan.Observed, command string, wait time.Duration, beside bool) (*apply.Lock, error) {
	ex := &apply.Executor{Client: c}
	return ex.Lock(context.Background(), obs, []string{"pve"}, apply.LockOptions{Command: command, Wait: wait, Beside: beside})
}

// TestLocksOnAnEmptyNodeNeverHoldTogether: three corrals that each saw a
// node without a keeper lock it at once, each creating a keeper with its
// lease in the Notes (lockclaim.go). At most one holds the lock at any time, each gets
// it in turn, one keeper is left (the others' spares are removed under
// the lock), and no lease stays behind.
func TestLocksOnAnEmptyNodeNeverHoldTogether(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		srv := pvetest.Start(t, pvetest.TimeScale(0.05)).Server
		// Every corral observes the empty node before any locks, so
		// each creates a keeper with its lease: the claims race.
		clients := make([]*pve.Client, 3)
		observed := make([]*plan.Observed, len(clients))
		for i := range clients {
			clients[i] = pvetest.Client(t, srv, srv.Credentials().OperatorToken)
			obs, err := apply.Observe(context.Background(), clients[i])
			if err != nil {
				t.Fatal(err)
			}
			observed[i] = obs
		}
		var holders, most atomic.Int32
		errs := make([]error, len(clients))
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// An apply's lock returns while its keeper is created,
				// another command's once it is there.
				l, err := lockAfter(c, observed[i], "apply", time.Minute, i != 1)
				if err != nil {
					errs[i] = err
					return
				}
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(200 * time.Millisecond)
				holders.Add(-1)
				l.Release()
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if m := most.Load(); m != 1 {
			t.Fatalf("round %d: %d corrals held the lock at once", round, m)
		}
		creates := 0
		for _, tt := range srv.TaskTimes() {
			if tt.Type == "vzcreate" {
				creates++
			}
		}
		if creates != len(clients) {
			t.Errorf("round %d: %d keeper creates, want one per corral (each saw the node empty)", round, creates)
		}
		ks := keepersOn(srv)
		if len(ks) != 1 {
			t.Errorf("round %d: keepers %v, want one", round, ks)
		}
		for _, k := range ks {
			if l := leaseIn(t, srv, k); l != nil {
				t.Errorf("round %d: lease left in keeper %d: %+v", round, k, l)
			}
		}
	}
}

// TestLeaseInAYoungerKeeperKeepsTheLock: the hazards of a lease that does
// not live in the node's oldest keeper. A corral locks an empty node; its
// keeper gets VMID 101 (100 is taken). Then 100 is freed and filled by a
// keeper with a dead lease, as a corral killed after it created one (and
// /cluster/nextid filled the gap) leaves it. Another corral takes that
// dead lease over in the oldest keeper, but reads the live one in 101 and
// gives the lock back: it waits, and fails naming the holder. Once the
// first releases, it gets the lock.
func TestLeaseInAYoungerKeeperKeepsTheLock(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t).Server
	cl := srv.Cluster()
	ctx := context.Background()
	run := func(upid string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if task, err := cl.WaitTask(ctx, "pve", upid); err != nil || task.ExitStatus != "OK" {
			t.Fatalf("task %s: %+v %v", upid, task, err)
		}
	}
	tmpl := "local:vztmpl/" + debian12
	run(cl.CreateCT(rootAuth, "pve", map[string]string{"vmid": "100", "ostemplate": tmpl, "hostname": "other", "rootfs": "local-lvm:1", "features": "nesting=1"}))

	first, err := lockNow(pvetest.Client(t, srv, srv.Credentials().OperatorToken), "first", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Its create, which the lock did not wait for.
	testenv.WaitFor(t, "the first lock's keeper to be listed", func() bool { return len(keepersOn(srv)) > 0 })
	if ks := keepersOn(srv); !slices.Equal(ks, []int{101}) {
		t.Fatalf("keepers %v after the first lock, want [101]", ks)
	}

	run(cl.DestroyCT(rootAuth, "pve", 100, nil))
	past := time.Now().Add(-time.Hour)
	dead := plan.KeeperNotes{Lease: &plan.Lease{ID: "dead", Holder: "corral@elsewhere:1", Command: "apply", Since: past, Until: past.Add(time.Minute)}}.Render()
	run(cl.CreateCT(rootAuth, "pve", map[string]string{"vmid": "100", "ostemplate": tmpl, "hostname": plan.KeeperName, "rootfs": "local-lvm:1", "features": "nesting=1",
		"tags": plan.TagManaged + ";" + plan.TagKeeper, "description": dead}))

	second := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	_, err = lockNow(second, "second", 300*time.Millisecond)
	var held *apply.LockHeldError
	if !errors.As(err, &held) || held.Keeper != 101 || held.Lease.Command != "first" {
		t.Fatalf("second lock while the first holds its lease in keeper 101: %v; want it held by the first, in 101", err)
	}
	if l := leaseIn(t, srv, 100); l != nil && l.Command == "second" {
		t.Errorf("the second corral's lease stayed in keeper 100 after it gave the lock back: %+v", l)
	}
	first.Release()
	l, err := lockNow(second, "second", 5*time.Second)
	if err != nil {
		t.Fatalf("second lock after the first released: %v", err)
	}
	if got := leaseIn(t, srv, 100); got == nil || got.Command != "second" {
		t.Errorf("lease in keeper 100 %+v, want the second corral's", got)
	}
	l.Release()
	for _, k := range keepersOn(srv) {
		if got := leaseIn(t, srv, k); got != nil && got.ID != "dead" {
			t.Errorf("lease left in keeper %s: %+v", strconv.Itoa(k), got)
		}
	}
}
