package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
)

// observeUnderLock takes the lock on node pve with HandOverListing as a
// destroy does, after an observation of a client that keeps its node
// list for the run and then before (nil: nothing), and observes again
// under it. It returns that observation, how many listings and task
// lists it read, and when the lock was held (its scan was before).
func observeUnderLock(t *testing.T, srv *sim.Server, before func(*pve.Client)) (obs *plan.Observed, listings, taskLists int, locked time.Time) {
	t.Helper()
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	c.MemoizeSetup()
	obs, err := apply.ObserveWith(t.Context(), c, apply.ObserveOptions{DeferSetup: true})
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(c)
	}
	l, err := (&apply.Executor{Client: c}).Lock(t.Context(), obs, []string{"pve"}, apply.LockOptions{Command: "destroy", HandOverListing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	locked = time.Now()
	srv.ResetRequests()
	if obs, err = apply.ObserveWith(l.Context(t.Context()), c, apply.ObserveOptions{DeferSetup: true}); err != nil {
		t.Fatal(err)
	}
	stats, _ := srv.Requests()
	for _, s := range stats {
		switch s.Endpoint {
		case "GET /cluster/resources":
			listings = s.Count
		case "GET /nodes/{node}/tasks":
			taskLists = s.Count
		}
	}
	return obs, listings, taskLists, locked
}

// TestPlanUnderTheLockTakesTheLocksListing: the plan a destroy makes
// under the lock takes the listing of the lock's scan for another
// corral's lease, made after the lease and after every online node's
// running tasks, and lists nothing itself (issue 30: a listing less).
// When that listing showed a task still changing one of corral's
// containers (a shutdown), the plan does not take it: it waits for the
// task itself, and sees the container stopped.
func TestPlanUnderTheLockTakesTheLocksListing(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t, pvetest.TimeScale(0.5)).Server
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	apps := loadAppsText(t, leaseEndManifest)
	obs, err := apply.Observe(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(apps, obs)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&apply.Executor{Client: c}).Apply(t.Context(), p, obs); err != nil {
		t.Fatal(err)
	}
	obs, listings, taskLists, _ := observeUnderLock(t, srv, nil)
	if listings != 0 || taskLists != 0 {
		t.Errorf("plan under the lock: %d listings and %d task lists, want none (the lock's)", listings, taskLists)
	}
	ct := obs.Apps["db"]
	if len(ct) != 1 || ct[0].Status != "running" {
		t.Fatalf("app db under the lock: %+v, want one running container", ct)
	}
	// A shutdown (2 s at this scale) under way while the lock scans,
	// begun after the observation before the lock.
	var upid string
	obs, listings, _, locked := observeUnderLock(t, srv, func(c *pve.Client) {
		if upid, err = c.ShutdownContainer(t.Context(), "pve", ct[0].VMID, pve.ShutdownOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if got := obs.Apps["db"]; len(got) != 1 || got[0].Status != "stopped" {
		t.Errorf("app db under the lock during its shutdown %s: %+v, want it seen stopped once the shutdown ended", upid, got)
	}
	// Whether the shutdown still ran when the lock scanned, from the
	// emulator's record of its end, not from a guess at the time taken.
	for _, tt := range srv.TaskTimes() {
		if tt.UPID == upid && (tt.Ended == 0 || time.Unix(0, tt.Ended).After(locked)) && listings == 0 {
			t.Errorf("the plan under the lock took the lock's listing made during the shutdown %s", upid)
		}
	}
}

// TestOnlyTheLastNodesScanReadsTasks: a lock on two nodes hands over
// the listing of the last node's scan, the one made once both leases
// are written, and only that scan reads the nodes' running tasks (once
// per node: the earlier node's scan reads none, as before), so a
// destroy on several nodes does not read every node's tasks once per
// node locked (issue 30).
func TestOnlyTheLastNodesScanReadsTasks(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t, pvetest.Nodes(2)).Server
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	c.MemoizeSetup()
	m := strings.ReplaceAll(leaseEndManifest, "    memory: 512\n", "    memory: 512\n    node: pve1\n") +
		strings.ReplaceAll(strings.ReplaceAll(leaseEndManifest, "apps:\n", ""), "name: db", "name: web")
	m = strings.Replace(m, "name: web\n", "name: web\n    node: pve2\n", 1)
	apps := loadAppsText(t, m)
	obs, err := apply.ObserveWith(t.Context(), c, apply.ObserveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(apps, obs)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&apply.Executor{Client: c}).Apply(t.Context(), p, obs); err != nil {
		t.Fatal(err)
	}
	if obs, err = apply.ObserveWith(t.Context(), c, apply.ObserveOptions{DeferSetup: true}); err != nil {
		t.Fatal(err)
	}
	if len(obs.Keepers["pve1"]) == 0 || len(obs.Keepers["pve2"]) == 0 {
		t.Fatalf("keepers %v, want one on each node", obs.Keepers)
	}
	srv.ResetRequests()
	l, err := (&apply.Executor{Client: c}).Lock(t.Context(), obs, []string{"pve1", "pve2"}, apply.LockOptions{Command: "destroy", HandOverListing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	count := func(endpoint string) int {
		stats, _ := srv.Requests()
		for _, s := range stats {
			if s.Endpoint == endpoint {
				return s.Count
			}
		}
		return 0
	}
	if n := count("GET /nodes/{node}/tasks"); n != 2 {
		t.Errorf("the lock on two nodes read %d task lists, want 2 (each node's once, by the last scan)", n)
	}
	listings := count("GET /cluster/resources")
	if obs, err = apply.ObserveWith(l.Context(t.Context()), c, apply.ObserveOptions{DeferSetup: true}); err != nil {
		t.Fatal(err)
	}
	if n := count("GET /cluster/resources"); n != listings {
		t.Errorf("the plan under the lock listed the guests %d times, want none (the last scan's)", n-listings)
	}
	if len(obs.Apps["db"]) != 1 || len(obs.Apps["web"]) != 1 {
		t.Errorf("apps under the lock %v, want db and web", obs.Apps)
	}
}
