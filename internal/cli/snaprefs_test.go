package cli

import (
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/testenv"
)

// withoutData rewrites the manifest at path (so that it stays the
// manifest that declared notes) as the notes app of appManifest with its
// data volume removed, and returns path.
func withoutData(t *testing.T, path string) string {
	t.Helper()
	m := strings.ReplaceAll(appManifest, "MEMORY", "512")
	cut := "      - name: data\n        size: 1G\n        mount: /srv/data\n"
	if !strings.Contains(m, cut) {
		t.Fatal("appManifest no longer has the data volume this test removes")
	}
	if err := os.WriteFile(path, []byte(strings.Replace(m, cut, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// snapshotOfRemovedVolume applies notes, snapshots it as s1 (covering
// data and cache), removes data from the manifest and applies: data is
// back in the keeper, and s1 of the app's container still names it.
func (c *cluster) snapshotOfRemovedVolume() (m string, vmid int, data string) {
	c.t.Helper()
	full := writeManifestIn(c.t, "demo", strings.ReplaceAll(appManifest, "MEMORY", "512")) // defaulted: edited in place below
	vmid, vols := c.setupNotes(full)
	c.mustC("snapshot", "notes", "s1", "-f", full)
	m = withoutData(c.t, full)
	c.mustRun("apply", "-f", m, "--auto-approve")
	data = vols["data"]
	if c.gone(data) || holderOf(c.volumes(), data) == "ct "+strconv.Itoa(vmid) {
		c.t.Fatalf("setup: data (%s) gone %v, holder %q; want it back in the keeper", data, c.gone(data), holderOf(c.volumes(), data))
	}
	return m, vmid, data
}

// Snapshots are references (issue 26, scenario 6): volumes prune and
// volumes rm refuse a volume a snapshot keeps, naming the snapshot, its
// container and node and the command that removes it; a rollback to it
// then still works. Once the snapshot is gone (removed, or destroyed with
// its container) the volume is freed.
func TestFreeRefusesASnapshotsVolume(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m, vmid, data := c.snapshotOfRemovedVolume()
	wants := []string{data, "snapshot s1 of CT " + strconv.Itoa(vmid), "on node pve as mp", "`corral snapshot notes s1 --delete`",
		"`pct delsnapshot " + strconv.Itoa(vmid) + " s1`", "corral frees no volume a snapshot keeps"}
	for _, args := range [][]string{{"volumes", "prune"}, {"volumes", "rm", data}} {
		r := c.run(append(args, "-f", m, "--auto-approve")...)
		if r.code != ExitError || c.gone(data) {
			t.Errorf("%s: exit %d, data gone %v; want refused\n%s%s", args, r.code, c.gone(data), r.stdout, r.stderr)
		}
		for _, want := range wants {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s refusal lacks %q:\n%s", args, want, r.stdout)
			}
		}
	}
	c.mustC("rollback", "notes", "s1", "--auto-approve")
	if got, _ := os.ReadFile(c.file(data, "data.txt")); string(got) != "precious" {
		t.Errorf("data after the rollback to s1: %q", got)
	}

	// The snapshot removed: prune frees what no app declares.
	c.mustRun("apply", "-f", m, "--auto-approve") // data detached again
	c.mustC("snapshot", "notes", "s1", "--delete", "-f", m)
	out := decodeFree(t, c.mustRun("volumes", "prune", "-f", m, "--auto-approve", "-o", "json"))
	if len(out.Freed) != 1 || out.Freed[0] != data || !c.gone(data) {
		t.Errorf("prune after the snapshot was removed: freed %v, data gone %v", out.Freed, c.gone(data))
	}

	// A snapshot goes with its container: destroy, then prune frees.
	c.mustC("snapshot", "notes", "s2", "-f", m)
	cache := volidOf(c.volumes(), "notes", "cache")
	c.mustRun("destroy", "-f", m, "--auto-approve")
	// The same manifest, now naming another app (in place: another
	// directory named demo would be another manifest, issue 26).
	other := m
	if err := os.WriteFile(other, []byte(strings.ReplaceAll(strings.ReplaceAll(appManifest, "MEMORY", "512"), "notes", "other")), 0o644); err != nil {
		t.Fatal(err)
	}
	out = decodeFree(t, c.mustRun("volumes", "prune", "-f", other, "--auto-approve", "-o", "json"))
	if len(out.Freed) != 1 || out.Freed[0] != cache || !c.gone(cache) {
		t.Errorf("prune after the app (and its snapshot) was destroyed: freed %v, want %s", out.Freed, cache)
	}
}

// A rollback to a snapshot whose volume is gone refuses before it
// touches the container, naming the volume, the snapshot and why.
func TestRollbackRefusesASnapshotWhoseVolumeIsGone(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m, vmid, data := c.snapshotOfRemovedVolume()
	// Freed behind corral's back (pvesm free as root).
	ctx := testenv.Context(t)
	root := c.pveRoot()
	sid, _, _ := strings.Cut(data, ":")
	upid, err := root.DeleteVolume(ctx, "pve", sid, data)
	if err != nil {
		t.Fatal(err)
	}
	if upid != "" {
		if _, err := root.WaitTask(ctx, upid, pve.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if !c.gone(data) {
		t.Fatalf("setup: %s still there", data)
	}
	before := c.config(vmid)
	r := c.runC("rollback", "notes", "s1", "--auto-approve", "-f", m)
	if r.code == 0 {
		t.Fatalf("rollback to a snapshot whose volume is gone succeeded:\n%s", r.stdout)
	}
	for _, want := range []string{"snapshot s1", "CT " + strconv.Itoa(vmid), data, "no longer exists", "nothing was changed", "corral snapshot notes s1 --delete"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	after := c.config(vmid)
	if !maps.Equal(before, after) {
		t.Errorf("the refused rollback changed ct %d: %v → %v", vmid, before, after)
	}
	if st := c.status(m).Apps[0].Containers[0].Status; st != "running" {
		t.Errorf("app %s after the refused rollback, want still running", st)
	}
}

// destroy --delete-volumes refuses, before anything changes, to free a
// volume a snapshot of another container keeps: here one of the keeper
// itself, taken by hand as root. The app's own snapshots go with its
// container and do not stop it.
func TestDestroyDeleteVolumesSparesASnapshotsVolume(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.mustC("snapshot", "notes", "own", "-f", m) // destroyed with the container
	cache := volidOf(c.volumes(), "notes", "cache")
	keeper := c.keeperVMID(m)
	ctx := testenv.Context(t)
	root := c.pveRoot()
	upid, err := root.CreateSnapshot(ctx, "pve", keeper, "ks", "by hand")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.WaitTask(ctx, upid, pve.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	r := c.run("destroy", "-f", m, "--auto-approve", "--delete-volumes")
	if r.code == 0 || c.gone(cache) {
		t.Fatalf("destroy --delete-volumes of a volume the keeper's snapshot keeps: exit %d, cache gone %v\n%s%s", r.code, c.gone(cache), r.stdout, r.stderr)
	}
	for _, want := range []string{cache, "snapshot ks of CT " + strconv.Itoa(keeper), "`pct delsnapshot " + strconv.Itoa(keeper) + " ks` on node pve", "corral frees no volume a snapshot keeps"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	if holderOf(c.volumes(), cache) == "" {
		t.Errorf("the keeper no longer records %s after the refused free", cache)
	}
	if a := c.status(m).Apps[0]; len(a.Containers) != 1 || a.Containers[0].Status != "running" {
		t.Errorf("the refused destroy changed the app: %+v", a.Containers)
	}

	// The keeper's snapshot removed, the app's own does not stop it.
	upid, err = root.DeleteSnapshot(ctx, "pve", keeper, "ks", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.WaitTask(ctx, upid, pve.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	c.mustRun("destroy", "-f", m, "--auto-approve", "--delete-volumes")
	if !c.gone(cache) {
		t.Errorf("%s kept after destroy --delete-volumes with only the app's own snapshot", cache)
	}
}
