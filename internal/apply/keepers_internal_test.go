package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/plan"
)

// A keeper's Notes carry a project line per app as well as a record per
// volume: a keeper whose records alone would leave room, but whose
// project lines fill it, must not take another volume (found by `corral
// bench --scale`: 1,000 apps in a project over 5 nodes overfilled the
// first keeper of each node, and PVE refused its description).
func TestForNew_countsProjectLines(t *testing.T) {
	project := strings.Repeat("p", 40)
	full := func(apps int, withProjects bool) *keeper {
		k := &keeper{node: "pve", vmid: 100, records: map[plan.VolumeKey]string{}, projects: map[string]string{}}
		for i := 0; i < apps; i++ {
			app := fmt.Sprintf("app%d", i)
			k.records[plan.VolumeKey{App: app, Name: "data"}] = fmt.Sprintf("local-lvm:vm-100-disk-%d", i)
			if withProjects {
				k.projects[app] = project
			}
		}
		k.volumes = apps
		return k
	}
	for _, tc := range []struct {
		name     string
		first    *keeper
		wantVMID int
	}{
		{"records and project lines fill the first keeper", full(70, true), 101},
		{"the same records without project lines leave room", full(70, false), 100},
		{"an empty keeper", full(0, true), 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			second := &keeper{node: "pve", vmid: 101}
			s := &keeperSet{byNode: map[string][]*keeper{"pve": {tc.first, second}}}
			k, done, err := s.forNew(context.Background(), "pve", plan.VolumeKey{App: "new", Name: "data"}, "local-lvm")
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			if k.vmid != tc.wantVMID {
				notes := plan.KeeperNotes{Records: tc.first.records, Projects: tc.first.projects}.Render()
				t.Errorf("forNew picked keeper %d, want %d (first keeper's Notes: %d characters)", k.vmid, tc.wantVMID, len(notes))
			}
		})
	}
}

// Volumes arriving at once are spread over the keepers with room (a
// drain onto a node with three keepers kept one busy and two idle), while
// the volumes of one app stay together in one keeper's window.
func TestForNew_spreadsPendingVolumes(t *testing.T) {
	a, b := &keeper{node: "pve", vmid: 100}, &keeper{node: "pve", vmid: 101}
	s := &keeperSet{byNode: map[string][]*keeper{"pve": {a, b}}}
	pick := func(app, name string) *keeper {
		t.Helper()
		k, _, err := s.forNew(context.Background(), "pve", plan.VolumeKey{App: app, Name: name}, "local-lvm")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, step := range []struct {
		app, name string
		want      *keeper
	}{
		{"one", "home", a},   // both idle: the oldest
		{"one", "cache", a},  // with its app's other volume
		{"two", "home", b},   // a has two pending
		{"three", "home", b}, // a 2, b 1
		{"four", "home", a},  // a 2, b 2: the oldest
		{"two", "cache", b},  // with its app, though b is as busy
	} {
		if got := pick(step.app, step.name); got != step.want {
			t.Errorf("%s/%s: keeper %d, want %d", step.app, step.name, got.vmid, step.want.vmid)
		}
	}
}

// A node's waiters go on only when every keeper being created there is
// created, and learn when one failed; a finish before the next expect
// must not close the wait twice.
func TestKeeperSet_readyWaitsForEveryCreate(t *testing.T) {
	ctx := context.Background()
	s := &keeperSet{byNode: map[string][]*keeper{}}
	first, second := s.expect("pve"), s.expect("pve")
	first(&keeper{node: "pve", vmid: 100}, nil)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.ready(short, "pve"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ready = %v while a keeper was still being created; want it to wait", err)
	}
	ready := make(chan error, 1)
	go func() { ready <- s.ready(ctx, "pve") }()
	second(nil, fmt.Errorf("injected"))
	if err := <-ready; err == nil || !strings.Contains(err.Error(), "could not be created") {
		t.Fatalf("ready after a failed create: %v", err)
	}
	if len(s.byNode["pve"]) != 1 {
		t.Errorf("keepers on pve: %d, want the one created", len(s.byNode["pve"]))
	}
	// Expected again after all ended: a fresh wait, closed once.
	third := s.expect("pve")
	third(&keeper{node: "pve", vmid: 101}, nil)
	if err := s.ready(ctx, "pve"); err != nil {
		t.Errorf("ready after a later create: %v", err)
	}
	if err := s.ready(ctx, "other"); err != nil {
		t.Errorf("ready on a node without creates: %v", err)
	}
}
