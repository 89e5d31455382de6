package cli

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

// Issue 26, scenario 1: a keeper's tags edited in the web UI. The keeper
// keeps its name, protection, Notes and /corral/APP/VOLUME mount points,
// so it is damaged, never absent: plan and apply refuse the app whose data
// it holds, naming the keeper and the fix, and nothing changes (before,
// apply made a second keeper and new empty volumes and swapped them in).
// Putting the tags back as the message says makes the plan empty again.
func TestKeeperTagsEditedRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, tags string }{
		{"keeper tag removed", "corral"},
		{"keeper tag renamed", "corral;corral-keepers"},
		{"every tag removed", ""},
		{"tags replaced", "storage;pet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			m := writeManifest(t, threeVolumes("alpha"))
			c.mustRun("apply", "-f", m, "--auto-approve")
			before := c.volumes()
			k := c.keepers()[0]
			app := c.status(m).Apps[0].Containers[0].VMID
			appConf := c.config(app)
			root := model.Auth{UserID: "root@pam"}
			edit := map[string]string{"tags": tc.tags}
			if tc.tags == "" {
				edit = map[string]string{"delete": "tags"}
			}
			if err := c.srv.Cluster().UpdateCTConfig(root, "pve", k, edit); err != nil {
				t.Fatal(err)
			}
			// The manifest also asks for a change, so that a refusal is not
			// mistaken for a plan with nothing to do.
			m2 := writeManifest(t, strings.Replace(threeVolumes("alpha"), "memory: 256", "memory: 384", 1))
			for _, args := range [][]string{{"plan", "-f", m2}, {"apply", "-f", m2, "--auto-approve"}} {
				r := c.run(args...)
				out := r.stdout + r.stderr
				ks := strconv.Itoa(k)
				if r.code != 1 || !strings.Contains(out, "keeper") || !strings.Contains(out, "CT "+ks+" on pve") ||
					!strings.Contains(out, "pct set "+ks+" --tags 'corral;corral-keeper'") || !strings.Contains(out, "alpha/a") {
					t.Fatalf("corral %s with the keeper's tags edited: exit %d, want 1 naming keeper CT %d and the fix\n%s", args[0], r.code, k, out)
				}
				if strings.Contains(out, "Apply complete") || strings.Contains(out, "no keeper on node") || strings.Contains(out, ": create") {
					t.Fatalf("corral %s planned around the damaged keeper:\n%s", args[0], out)
				}
			}
			if n := len(c.srv.Cluster().Resources("vm")); n != 2 {
				t.Errorf("%d guests after the refused apply, want 2 (the app and its keeper)", n)
			}
			if got := c.config(app); got["memory"] != appConf["memory"] || got["mp0"] != appConf["mp0"] || got["mp1"] != appConf["mp1"] || got["mp2"] != appConf["mp2"] {
				t.Errorf("the app's config changed under a refused apply:\nbefore %v\nafter  %v", appConf, got)
			}
			if st := c.status(m2); len(st.Apps) != 1 || st.Apps[0].Drift != "refused" {
				t.Errorf("status while the keeper is damaged: %+v, want alpha refused", st.Apps)
			}
			// corral volumes still shows where the data is.
			r := c.mustRun("volumes")
			for _, v := range before {
				if !strings.Contains(r.stdout, v.VolID) {
					t.Errorf("corral volumes lost %s while its keeper's tags were edited:\n%s", v.VolID, r.stdout)
				}
			}
			if err := c.srv.Cluster().UpdateCTConfig(root, "pve", k, map[string]string{"tags": "corral;corral-keeper"}); err != nil {
				t.Fatal(err)
			}
			c.mustRun("apply", "-f", m2, "--auto-approve")
			if r := c.run("plan", "-f", m2); r.code != 0 {
				t.Fatalf("plan after the tags were put back and applied: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			after := c.volumes()
			if !slices.EqualFunc(before, after, func(a, b plan.VolumeInfo) bool { return a.VolID == b.VolID }) {
				t.Errorf("volumes changed: before %v, after %v", before, after)
			}
		})
	}
}

// Issue 26, scenario 4: the apply that finishes an interrupted move goes
// on to the manifest's other changes in the same run, and says "Apply
// complete" only when a fresh plan is empty (before, it finished the move,
// said complete, and the next plan still showed the memory change).
func TestApplyFinishingAMoveMakesTheOtherChanges(t *testing.T) {
	t.Parallel()
	c := newMoveCluster(t)
	m1, m2 := writeManifest(t, moveManifestOn("pve1")), writeManifest(t, moveManifestOn("pve2"))
	c.interruptMove(m1, m2)
	m3 := writeManifest(t, strings.Replace(moveManifestOn("pve2"), "memory: 256", "memory: 384", 1))
	c.applyCompleteAndTrue(m3)
	c.checkMoved(m3, "pve2", "pve1", nil)
}

// applyCompleteAndTrue runs apply of m, which must exit 0 saying "Apply
// complete", and a plan right after it, which must be empty.
func (c *cluster) applyCompleteAndTrue(m string) {
	c.t.Helper()
	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code != 0 || !strings.Contains(r.stderr, "Apply complete") {
		c.t.Fatalf("apply: exit %d, want 0 and Apply complete\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		c.t.Fatalf("plan after the apply that said complete: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Issue 26, scenario 5: a move stopped right after its carrier was made
// (every move_volume refused: the carrier exists, nothing was handed to
// it). The next apply ends with the app on the new node WITH its volumes
// and data, and "Apply complete" only then; no second apply is needed.
func TestApplyAfterMoveStoppedAtTheCarrier(t *testing.T) {
	t.Parallel()
	c := newMoveCluster(t)
	m1, m2 := writeManifest(t, moveManifestOn("pve1")), writeManifest(t, moveManifestOn("pve2"))
	c.mustRun("apply", "-f", m1, "--auto-approve")
	old := c.markWeb(m1, "pve1")
	c.srv.SetFaults(sim.FaultSpec{Seed: 1, Write5xx: 1, Match: "/move_volume"})
	if r := c.run("apply", "-f", m2, "--auto-approve"); r.code == 0 {
		t.Fatalf("apply with every move_volume refused succeeded:\n%s%s", r.stdout, r.stderr)
	}
	c.srv.SetFaults(sim.FaultSpec{})
	if _, carriers := c.where(); carriers != 1 {
		t.Fatalf("%d carriers after the stopped move, want 1", carriers)
	}
	c.applyCompleteAndTrue(m2)
	c.checkMoved(m2, "pve2", "pve1", old)
}

// An app container whose corral-app tag was removed while the corral tag
// stayed is recognized by the keeper volumes it mounts, as one with no
// tags at all is (before, a container tagged only corral was skipped,
// and the plan created the app a second time beside it).
func TestAppTagRemovedCorralTagKept(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, threeVolumes("alpha"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid := c.status(m).Apps[0].Containers[0].VMID
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", vmid, map[string]string{"tags": "corral;mytag"}); err != nil {
		t.Fatal(err)
	}
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "lacks corral's tags") || strings.Contains(r.stdout, "+ app alpha") {
		t.Fatalf("plan after the app tag was removed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if n := len(c.srv.Cluster().Resources("vm")); n != 2 {
		t.Errorf("%d guests after apply, want 2 (app and keeper)", n)
	}
	if tags := c.config(vmid)["tags"]; !strings.Contains(tags, "corral-app-alpha") {
		t.Errorf("tags=%q, want corral's tags back", tags)
	}
}
