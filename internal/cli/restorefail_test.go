package cli

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/sim"
)

// TestRestoreStoppedBeforeItsVolumesMovedIsRolledBack (found by the
// two-node soak, where a destroy ran just before a restore): a restore of
// an app without a container whose move of a restored volume into the
// keeper fails leaves the restored container stopped, still owning that
// volume. The next apply must not make it the app's (it would run on a
// volume no keeper records, which its next recreate would free, beside
// the kept one): it removes it and makes the app a container on its kept
// volumes.
func TestRestoreStoppedBeforeItsVolumesMovedIsRolledBack(t *testing.T) {
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.writeData(m, "pve", "kept")
	b := c.backup(m, "notes")
	c.writeData(m, "pve", "kept, newer")
	kept := map[string]bool{}
	for _, v := range c.status(m).Apps[0].Volumes {
		kept[v.VolID] = true
	}
	c.mustRun("destroy", "-f", m, "--auto-approve")

	c.srv.SetFaults(sim.FaultSpec{Seed: 1, Write5xx: 1, Match: "move_volume"})
	r := c.runC("restore", "notes", "--archive", b.Archive, "-f", m, "--auto-approve")
	c.srv.SetFaults(sim.FaultSpec{})
	if r.code == 0 {
		t.Fatalf("restore with every move_volume failing exited 0:\n%s%s", r.stdout, r.stderr)
	}
	restoring := 0
	for _, g := range c.srv.Cluster().Resources("vm") {
		if strings.Contains(g.Tags, plan.TagRestoringPrefix+"notes") {
			restoring = g.VMID
		}
	}
	if restoring == 0 {
		t.Fatalf("no restored container left after the failed restore:\n%s%s", r.stdout, r.stderr)
	}

	p := c.run("plan", "-f", m)
	if !strings.Contains(p.stdout, "never reached the keeper") {
		t.Errorf("plan does not say the restored container is removed with the copies that never reached the keeper:\n%s%s", p.stdout, p.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	st := c.status(m)
	app := st.Apps[0]
	if len(app.Containers) != 1 {
		t.Fatalf("after apply: containers %+v, want one", app.Containers)
	}
	for _, g := range c.srv.Cluster().Resources("vm") {
		if strings.Contains(g.Tags, plan.TagRestoringPrefix) {
			t.Errorf("a restored container is left: ct %d tagged %s", g.VMID, g.Tags)
		}
	}
	mps := 0
	for k, v := range c.config(app.Containers[0].VMID) {
		if strings.HasPrefix(k, "mp") {
			mps++
			if !kept[plan.ParseMountPoint(v).Volume] {
				t.Errorf("the app mounts %s as %s, want only its kept volumes %v", v, k, kept)
			}
		}
	}
	if mps != len(kept) {
		t.Errorf("the app has %d mount points, want %d", mps, len(kept))
	}
	if got := c.dataOf(m, "pve"); got != "kept, newer" {
		t.Errorf("data after apply: %q, want the kept volume's", got)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
