package apply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/plan"
)

// TestForEachApp_factOrder: a change whose guest work reads another
// app's facts (Change.After) starts only once that app's change is
// finished, though the manifest lists it first and both could run at
// once; when that change fails, the dependent one is not made, and
// says why. Other changes do not wait.
func TestForEachApp_factOrder(t *testing.T) {
	changes := factOrdered([]plan.Change{{App: "web", After: []string{"db"}}, {App: "cache"}, {App: "db"}})
	if got := []string{changes[0].App, changes[1].App, changes[2].App}; !slices.Equal(got, []string{"db", "web", "cache"}) {
		t.Fatalf("factOrdered = %v, want db before web, cache after", got)
	}
	for _, dbFails := range []bool{false, true} {
		var mu sync.Mutex
		var events []string
		note := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, s)
		}
		e := &Executor{Parallelism: 10}
		err := e.forEachApp(context.Background(), changes, func(c plan.Change) error {
			note(c.App + " start")
			if c.App == "db" {
				// Long enough for web to start too, were it not held.
				time.Sleep(100 * time.Millisecond)
				note("db end")
				if dbFails {
					return errors.New("db: create failed")
				}
			}
			return nil
		})
		mu.Lock()
		got := slices.Clone(events)
		mu.Unlock()
		webAt, dbEnd := slices.Index(got, "web start"), slices.Index(got, "db end")
		switch {
		case dbFails && (webAt >= 0 || err == nil || !strings.Contains(err.Error(), "web: not changed: its provisioning reads facts of app db, whose change failed")):
			t.Errorf("db failed: events %v, error %v; want web not started and said so", got, err)
		case !dbFails && (err != nil || webAt < dbEnd):
			t.Errorf("events %v (error %v): web started before db's change ended", got, err)
		case !slices.Contains(got, "cache start"):
			t.Errorf("events %v: cache did not run", got)
		}
	}
}

// TestWithFacts: apply reads the facts a guest work names where this
// run's change left the app (else where it was observed), expands the
// work with them and records the digest of what runs; a fact the plan
// showed with another value stops the app's provisioning, naming both.
func TestWithFacts(t *testing.T) {
	work := plan.GuestWork{Steps: []plan.GuestStep{{Name: "run: echo", Kind: "run", Script: "echo db is ${app:db.vmid} on ${app:db.node}, $${HOME}", Facts: []string{"db.vmid", "db.node"}}}}
	g := &guests{runner: &runner{runState: &runState{}}}
	g.observed = &plan.Observed{Apps: map[string][]*plan.CT{"db": {{VMID: 101, Node: "pve1"}}}}
	change := func(planned map[string]string) plan.Change {
		return plan.Change{App: "web", Desired: &plan.App{Name: "web", GuestDigest: "unknown", Facts: planned}}
	}

	c, got, err := g.withFacts(context.Background(), change(map[string]string{"db.vmid": "101"}), work)
	if err != nil {
		t.Fatal(err)
	}
	if want := "echo db is 101 on pve1, ${HOME}"; got.Steps[0].Script != want || len(got.Steps[0].Facts) != 0 {
		t.Errorf("script %q (facts %v), want %q", got.Steps[0].Script, got.Steps[0].Facts, want)
	}
	if c.Desired.GuestDigest != got.Digest() || c.Desired.Steps[0].Sum != got.Steps[0].Sum() {
		t.Errorf("the change records digest %q, steps %+v: not those of the work that runs", c.Desired.GuestDigest, c.Desired.Steps)
	}

	// db was replaced in this run: its new container is read.
	g.placed("db", "pve2", 140)
	_, _, err = g.withFacts(context.Background(), change(map[string]string{"db.vmid": "101"}), work)
	var fc *FactChangedError
	if !errors.As(err, &fc) || !strings.Contains(err.Error(), "web: ${app:db.vmid} was 101 when the plan was made and is 140 now") {
		t.Errorf("a fact changed since the plan: %v", err)
	}
	if _, got, err = g.withFacts(context.Background(), change(nil), work); err != nil || got.Steps[0].Script != "echo db is 140 on pve2, ${HOME}" {
		t.Errorf("facts known after apply: %q, %v", got.Steps[0].Script, err)
	}
}
