package bench

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestFirstApplyCreatesTheAppBesideItsKeeper: on a node without a keeper
// the app's container is created while the keeper is, not after it
// (issue 30: a first apply took the keeper's 11 s longer than the
// peer's), and its volumes still end up attached to it. Read from the
// emulator's task list at time scale 0.05 (each vzcreate 0.55 s).
func TestFirstApplyCreatesTheAppBesideItsKeeper(t *testing.T) {
	g, err := newRig(t.TempDir(), 0.05, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	apps, err := parseApps(appsYAML(1, 1, debian12))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := g.run(ctx, apps, false); err != nil {
		t.Fatal(err)
	}
	obs, err := g.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Keepers["pve"]) != 1 || len(obs.Apps) != 1 {
		t.Fatalf("after apply: %d keepers, %d apps; want 1 and 1", len(obs.Keepers["pve"]), len(obs.Apps))
	}
	keeper := strconv.Itoa(obs.Keepers["pve"][0].VMID)
	creates := map[string][2]int64{} // vmid → began, ended
	for _, tt := range g.srv.TaskTimes() {
		if tt.Type == "vzcreate" {
			creates[tt.ID] = [2]int64{tt.Began, tt.Ended}
		}
	}
	k, ok := creates[keeper]
	if !ok || len(creates) != 2 {
		t.Fatalf("vzcreate tasks %v, want the keeper's (%s) and the app's", creates, keeper)
	}
	for id, app := range creates {
		if id != keeper && app[0] >= k[1] {
			t.Errorf("the app's vzcreate (CT %s) began %v after the keeper's ended; want it to run beside it", id, time.Duration(app[0]-k[1]))
		}
	}
	plan, err := g.plan(ctx, apps)
	if err != nil {
		t.Fatal(err)
	}
	if plan.HasChanges() {
		t.Errorf("plan after apply is not empty: %+v", plan.Changes)
	}
}
