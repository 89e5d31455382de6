package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
)

// TestDestroyDeleteVolumesReadsPerApp: freeing the volumes of a destroy
// --delete-volumes reads the node's guest configs and snapshots a bounded
// number of times per app, however many apps the node holds (issue 30:
// each free read every guest of the node, 13 reads per app at 100 apps
// and 106 at 1,000). Counted on one node at 20 and 40 apps: the reads per
// app must not grow with the apps.
func TestDestroyDeleteVolumesReadsPerApp(t *testing.T) {
	reads := map[int]int{}
	for _, n := range []int{20, 40} {
		g, err := newRig(t.TempDir(), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		apps, err := parseApps(strings.ReplaceAll(appsYAML(n, 1, debian12), "backup: false}", "backup: false, reclaim: delete}"))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := g.run(ctx, apps, false); err != nil {
			t.Fatal(err)
		}
		before, err := g.observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keepers := len(before.Keepers["pve"])
		g.srv.ResetRequests()
		if err := g.destroy(ctx, apps, true); err != nil {
			t.Fatal(err)
		}
		stats, total := g.srv.Requests()
		for _, s := range stats {
			if guestRead(s.Endpoint) {
				reads[n] += s.Count
			}
			t.Logf("%d apps: %s %d", n, s.Endpoint, s.Count)
			// The free batches of the node's keepers share one read of
			// its guests' snapshots (nodeChecks): each keeper's list is
			// read by the guard before the destroy and once for the
			// frees, not once per batch (issue 30).
			if s.Endpoint == "GET /nodes/{node}/lxc/{vmid}/snapshot" && s.Count > 2*keepers {
				t.Errorf("%d apps, %d keepers: %d snapshot lists, want at most two per keeper", n, keepers, s.Count)
			}
		}
		if n == 40 && keepers < 2 {
			t.Errorf("%d apps: %d keepers on the node, want several (the batches' shared read is what this counts)", n, keepers)
		}
		t.Logf("%d apps: %d requests, %d guest config and snapshot reads (%.2f per app)", n, total, reads[n], float64(reads[n])/float64(n))
		obs, err := g.observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if left := volumesLeft(obs); left != n {
			t.Errorf("%d apps: %d volumes left in the keeper, want %d (the retained ones)", n, left, n)
		}
	}
	per20, per40 := float64(reads[20])/20, float64(reads[40])/40
	if per40 > per20+0.5 {
		t.Errorf("guest reads per app grow with the apps: %.2f at 20 apps, %.2f at 40 (want about the same)", per20, per40)
	}
	// Per app: the plan's read of its config, the identity check's, the
	// detach's, and a share of the free batch's read of the node; not
	// the snapshot list of a container the destroy removes with its
	// snapshots (issue 30: 4.5 per app with it).
	if per40 > 4 {
		t.Errorf("%.2f guest reads per app at 40 apps, want at most 4 (its own config reads and a share of one read of the node per batch)", per40)
	}
}

// guestRead is an endpoint that reads one guest's config or snapshots.
func guestRead(endpoint string) bool {
	if !strings.HasPrefix(endpoint, "GET ") || !strings.Contains(endpoint, "/lxc/") {
		return false
	}
	for _, s := range []string{"/config", "/pending", "/snapshot"} {
		if strings.Contains(endpoint, s) {
			return true
		}
	}
	return false
}

// volumesLeft counts the volumes the keepers record.
func volumesLeft(obs *plan.Observed) int {
	n := 0
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			n += len(k.Records)
		}
	}
	return n
}

// destroy observes, plans a destroy of apps (freeing their reclaim:
// delete volumes with deleteVolumes) and carries it out.
func (g *rig) destroy(ctx context.Context, apps []plan.App, deleteVolumes bool) error {
	obs, err := g.observe(ctx)
	if err != nil {
		return err
	}
	p, err := plan.Destroy(apps, obs, deleteVolumes)
	if err != nil {
		return err
	}
	_, err = (&apply.Executor{Client: g.client}).Destroy(ctx, p, obs)
	return err
}

func (g *rig) observe(ctx context.Context) (*plan.Observed, error) {
	return apply.Observe(ctx, g.client)
}
