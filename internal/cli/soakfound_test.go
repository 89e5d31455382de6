package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
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
	t.Parallel()
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

// TestKeeperOfRemovedAppsRepaired (found by the two-node soak): a keeper
// whose only records are the retained volumes of a project's removed app,
// on a node where none of the manifest's apps runs, is still the
// project's: when its protection is cleared in the web UI, the project's
// plan shows the repair and apply makes it.
func TestKeeperOfRemovedAppsRepaired(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(2))
	two := `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    node: pve1
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
  - name: old
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    node: pve2
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
`
	m := writeManifestIn(t, "demo", two) // defaulted: edited in place below
	c.mustRun("apply", "-f", m, "--auto-approve")
	one, _, _ := strings.Cut(two, "  - name: old")
	if err := os.WriteFile(m, []byte(one), 0o644); err != nil {
		t.Fatal(err)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	keeper := 0
	for _, g := range c.srv.Cluster().Resources("vm") {
		if g.Node == "pve2" && strings.Contains(g.Tags, plan.TagKeeper) {
			keeper = g.VMID
		}
	}
	if keeper == 0 {
		t.Fatal("no keeper on pve2")
	}
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve2", keeper, map[string]string{"protection": "0"}); err != nil {
		t.Fatal(err)
	}
	p := c.run("plan", "-f", m)
	if p.code != ExitChanges || !strings.Contains(p.stdout, "protection is off") {
		t.Fatalf("plan with the keeper of the removed app's volume unprotected: exit %d, want 2 and the repair\n%s%s", p.code, p.stdout, p.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if got := c.config(keeper)["protection"]; got != "1" {
		t.Errorf("keeper %d protection after apply: %q, want 1", keeper, got)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestPinnedAppWithoutContainerOnAnotherNode (found by the two-node
// soak): an app pinned with node: whose container was destroyed, then
// pinned to the other node, has its data on the first. The plan refuses,
// and its fix (corral move refuses a pinned app, so the pin does the
// move) works as written: the app ends on the new node with its data.
func TestPinnedAppWithoutContainerOnAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(2))
	on := pinnedManifest
	m := writeManifestIn(t, "demo", on("pve2")) // defaulted: edited in place below
	c.mustRun("apply", "-f", m, "--auto-approve")
	vol := c.status(m).Apps[0].Volumes[0].VolID
	if err := os.WriteFile(filepath.Join(c.volumeDir("pve2", vol), "data.txt"), []byte("pinned"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.mustRun("destroy", "-f", m, "--auto-approve")
	write := func(node string) {
		if err := os.WriteFile(m, []byte(on(node)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pve1")
	r := c.run("plan", "-f", m)
	fix := "set node: pve2 and apply (the app is created there on its volume), then set node: pve1 again and apply"
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, fix) {
		t.Fatalf("plan: exit %d, want 1 and the fix %q\n%s%s", r.code, fix, r.stdout, r.stderr)
	}
	write("pve2")
	c.mustRun("apply", "-f", m, "--auto-approve")
	write("pve1")
	c.mustRun("apply", "-f", m, "--auto-approve")
	apps, _ := c.where()
	if apps["pin"] != "pve1" {
		t.Fatalf("app on %q after following the fix, want pve1", apps["pin"])
	}
	if got := c.dataOf(m, "pve1"); got != "pinned" {
		t.Errorf("data on pve1: %q, want the data written on pve2", got)
	}
}

// TestApplyWithNothingToDoWaitsForAHeldLock (found by the soak): apply
// read "no changes" while a destroy killed mid-stop held the lock, and its
// stop landed just after the read: the app was left stopped after
// "complete". An apply whose plan is empty waits for a lock another
// corral holds on its apps' nodes and plans again under it before saying
// so; plan, which changes nothing, does not wait.
func TestApplyWithNothingToDoWaitsForAHeldLock(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, threeVolumes("alpha"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.holdLease("ops@elsewhere:4242", "destroy")
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan while another corral holds the lock: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := c.run("apply", "-f", m, "--auto-approve", "--lock-timeout", "0")
	if r.code != ExitError || !strings.Contains(r.stderr, "ops@elsewhere:4242") {
		t.Fatalf("apply with nothing to do while another corral holds the lock: exit %d, want 1 naming the holder\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun(append([]string{"unlock", "--force"}, c.connArgs()...)...)
	if r := c.run("apply", "-f", m, "--auto-approve", "--lock-timeout", "0"); r.code != 0 || !strings.Contains(r.stdout, "No changes") {
		t.Errorf("apply once the lock is free: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestMoveOfAnAppWhoseTagWasEdited (found by the soak): an app's
// container whose corral-app tag was removed in the web UI is still
// recognized by the volume it mounts; a change of node: then moves it
// (the plan said so) instead of failing with "no container", and the tag
// is back afterwards.
func TestMoveOfAnAppWhoseTagWasEdited(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(2))
	on := pinnedManifest
	m := writeManifestIn(t, "demo", on("pve1")) // defaulted: edited in place below
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.writeData(m, "pve1", "tagless")
	vmid := c.status(m).Apps[0].Containers[0].VMID
	tags := strings.ReplaceAll(c.config(vmid)["tags"], "corral-app-pin", "")
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve1", vmid, map[string]string{"tags": tags}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m, []byte(on("pve2")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code != 0 {
		t.Fatalf("apply moving the app whose tag was edited: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if apps, _ := c.where(); apps["pin"] != "pve2" {
		t.Fatalf("app on %q, want pve2", apps["pin"])
	}
	if got := c.config(vmid)["tags"]; !strings.Contains(got, "corral-app-pin") {
		t.Errorf("tags after the move: %q, want corral-app-pin back", got)
	}
	if got := c.dataOf(m, "pve2"); got != "tagless" {
		t.Errorf("data after the move: %q", got)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after the move: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// pinnedManifest is app pin, with one volume, pinned to node.
func pinnedManifest(node string) string {
	return "apps:\n  - name: pin\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    node: " + node +
		"\n    volumes:\n      - name: data\n        size: 1G\n        mount: /srv/data\n"
}
