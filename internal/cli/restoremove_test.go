package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
)

// otherNode is the node of a 2-node emulator that is not n.
func otherNode(n string) string {
	if n == "pve1" {
		return "pve2"
	}
	return "pve1"
}

// configs are the configs of every guest, by VMID (what a refused
// command must leave as it was, keeper notes included).
func (c *cluster) configs() map[int]map[string]string {
	c.t.Helper()
	out := map[int]map[string]string{}
	for _, r := range c.srv.Cluster().Resources("vm") {
		out[r.VMID] = c.config(r.VMID)
	}
	return out
}

// dataOf reads data.txt in notes' data volume on node, by the status of
// manifest m.
func (c *cluster) dataOf(m, node string) string {
	c.t.Helper()
	for _, v := range c.status(m).Apps[0].Volumes {
		if v.Name == "data" {
			b, err := os.ReadFile(filepath.Join(c.volumeDir(node, v.VolID), "data.txt"))
			if err != nil {
				c.t.Fatalf("data.txt of %s on %s: %v", v.VolID, node, err)
			}
			return string(b)
		}
	}
	c.t.Fatal("notes has no data volume")
	return ""
}

// writeData writes data.txt in notes' data volume on node.
func (c *cluster) writeData(m, node, text string) {
	c.t.Helper()
	for _, v := range c.status(m).Apps[0].Volumes {
		if v.Name == "data" {
			if err := os.WriteFile(filepath.Join(c.volumeDir(node, v.VolID), "data.txt"), []byte(text), 0o644); err != nil {
				c.t.Fatal(err)
			}
		}
	}
}

// TestRestoreReplaceAfterMove is issue 26's scenario 3: apply on one
// node, backup (to that node's local storage), move to the other node,
// restore --replace from the first node's archive. The archive cannot be
// read on the app's node, so the restore is refused before anything
// changes, naming the archive's node and the fix; the app keeps running
// on its new node with its data, each volume recorded once, and the next
// plan is empty. Following the fix (move back, restore) restores the
// archive's data.
func TestRestoreReplaceAfterMove(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t, pvetest.Nodes(2))
	apps, _ := c.where()
	from := apps["notes"]
	to := otherNode(from)
	c.writeData(m, from, "precious")
	b := c.backup(m, "notes")
	if !strings.HasPrefix(b.Archive, "local:") {
		t.Fatalf("archive %s: want one on the node-local storage local", b.Archive)
	}
	c.mustRun("move", "notes", "--to", to, "-f", m, "--auto-approve")
	c.writeData(m, to, "after the move")
	before, beforeConf := c.state(), c.configs()

	r := c.runC("restore", "notes", "--archive", b.Archive, "--replace", "-f", m, "--auto-approve")
	if r.code == 0 {
		t.Fatalf("restore of %s's archive onto %s succeeded:\n%s%s", from, to, r.stdout, r.stderr)
	}
	for _, want := range []string{"refused before any change", b.Archive, "node " + from, "app notes runs on node " + to, "corral move notes --to " + from} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("restore refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "does not exist") {
		t.Errorf("the restore reached PVE:\n%s", r.stderr)
	}
	if after := c.state(); !reflect.DeepEqual(before, after) {
		t.Errorf("the refused restore changed the cluster:\nbefore %+v\nafter  %+v", before, after)
	}
	if after := c.configs(); !reflect.DeepEqual(beforeConf, after) {
		t.Errorf("the refused restore changed a guest config:\nbefore %v\nafter  %v", beforeConf, after)
	}
	if got := c.dataOf(m, to); got != "after the move" {
		t.Errorf("data after the refused restore = %q", got)
	}
	c.noRecordTwice()
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after the refused restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The fix the refusal names: move back, then restore.
	c.mustRun("move", "notes", "--to", from, "-f", m, "--auto-approve")
	c.restoreReplaceOn(m, b.Archive, from)
}

// restoreReplaceOn runs restore --replace of app notes (manifest m) from
// archive and checks the result: the app on node with the archive's data
// ("precious"), each volume recorded once, and an empty plan.
func (c *cluster) restoreReplaceOn(m, archive, node string) {
	c.t.Helper()
	r := c.mustC("restore", "notes", "--archive", archive, "--replace", "-f", m, "--auto-approve")
	if apps, _ := c.where(); apps["notes"] != node {
		c.t.Fatalf("notes restored on %q, want %s\n%s%s", apps["notes"], node, r.stdout, r.stderr)
	}
	if got := c.dataOf(m, node); got != "precious" {
		c.t.Errorf("restored data.txt = %q, want the archive's", got)
	}
	c.noRecordTwice()
	if r := c.run("plan", "-f", m); r.code != 0 {
		c.t.Fatalf("plan after the restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// noRecordTwice fails when a volume record (app/name) is held by two
// keepers, or a volume by two holders.
func (c *cluster) noRecordTwice() {
	c.t.Helper()
	seen, held := map[string]string{}, map[string]string{}
	for _, v := range c.volumes() {
		key := v.App + "/" + v.Name
		if v.App != "" && v.Name != "" {
			if was, ok := seen[key]; ok {
				c.t.Errorf("volume %s is recorded twice: %s and %s (%s)", key, was, v.VolID, v.Holder)
			}
			seen[key] = v.VolID + " (" + v.Holder + ")"
		}
		id := v.Node + "/" + v.VolID
		if was, ok := held[id]; ok {
			c.t.Errorf("volume %s is listed twice: held by %s and %s", id, was, v.Holder)
		}
		held[id] = v.Holder
	}
}

// TestRestoreDuringMoveRefused: while an app's move is interrupted (its
// carrier holds its volumes), restore --replace is refused before any
// change, naming the carrier and the command that finishes the move;
// once apply has finished it, the plan is empty and each volume is
// recorded once.
func TestRestoreDuringMoveRefused(t *testing.T) {
	t.Parallel()
	c := newMoveCluster(t)
	m1, m2 := writeManifest(t, moveManifestOn("pve1")), writeManifest(t, moveManifestOn("pve2"))
	c.mustRun("apply", "-f", m1, "--auto-approve")
	b := c.backup(m1, "web")
	c.interruptMove(m1, m2)
	mv := c.moveStatus(m2).Apps[0].Moving
	if mv == nil {
		t.Fatal("web is not moving after the interrupted apply")
	}
	before, beforeConf := c.state(), c.configs()

	r := c.runC("restore", "web", "--archive", b.Archive, "--replace", "-f", m2, "--auto-approve")
	want := fmt.Sprintf("app web is being moved from pve1 to pve2 (carrier ct %d on node %s", mv.CarrierVMID, mv.CarrierNode)
	if r.code == 0 || !strings.Contains(r.stderr, "refused before any change") || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "corral apply") {
		t.Fatalf("restore during a move: exit %d, want a refusal containing %q\n%s%s", r.code, want, r.stdout, r.stderr)
	}
	if after := c.state(); !reflect.DeepEqual(before, after) {
		t.Errorf("the refused restore changed the cluster's guests or volumes")
	}
	if after := c.configs(); !reflect.DeepEqual(beforeConf, after) {
		t.Errorf("the refused restore changed a guest config:\nbefore %v\nafter  %v", beforeConf, after)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	c.noRecordTwice()
	if r := c.run("plan", "-f", m2); r.code != 0 {
		t.Fatalf("plan after the move: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRestoreAfterMoveInterrupted: after a move, a backup on the app's
// new node restores there; a restore --replace whose new container
// cannot start (every start request is refused) stops with the restored
// container stopped and tagged a restore in flight, on the new node; the
// next apply rolls it back (the old container runs again with its data),
// each volume is recorded once, and the plan is empty. Without the fault
// the same restore puts the archive's data on the new node.
func TestRestoreAfterMoveInterrupted(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t, pvetest.Nodes(2))
	apps, _ := c.where()
	to := otherNode(apps["notes"])
	c.mustRun("move", "notes", "--to", to, "-f", m, "--auto-approve")
	c.writeData(m, to, "precious")
	b := c.backup(m, "notes")
	c.writeData(m, to, "later")
	old := c.status(m).Apps[0].Containers[0].VMID

	c.srv.SetFaults(sim.FaultSpec{Seed: 1, Write5xx: 1, Match: "/status/start"})
	r := c.runC("restore", "notes", "--archive", b.Archive, "--replace", "-f", m, "--auto-approve")
	c.srv.SetFaults(sim.FaultSpec{})
	if r.code == 0 || !strings.Contains(r.stderr, "did not start") {
		t.Fatalf("restore with every start failing: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	restoring := 0
	for _, res := range c.srv.Cluster().Resources("vm") {
		if strings.Contains(res.Tags, "corral-restoring-notes") {
			restoring++
			if res.Node != to {
				t.Errorf("restored ct %d is on %s, want %s (the app's node)", res.VMID, res.Node, to)
			}
		}
	}
	if restoring != 1 {
		t.Fatalf("%d containers tagged as a restore in flight, want 1", restoring)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	st := c.status(m).Apps[0]
	if len(st.Containers) != 1 || st.Containers[0].VMID != old || st.Containers[0].Status != "running" {
		t.Fatalf("notes after the apply: %+v, want the old ct %d running", st.Containers, old)
	}
	if apps, _ := c.where(); apps["notes"] != to {
		t.Fatalf("notes on %q after the apply, want %s", apps["notes"], to)
	}
	if got := c.dataOf(m, to); got != "later" {
		t.Errorf("data after the rollback = %q, want the old container's", got)
	}
	c.noRecordTwice()
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after the rollback: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	c.restoreReplaceOn(m, b.Archive, to)
}

// TestRestoreAfterMoveAndDestroyRefused: an app moved, then destroyed
// (its volumes stay in the keeper of its new node), is restored on the
// node whose keeper records its volumes; an archive of the old node's
// local storage is refused there before any change, naming the archive's
// node and the ways on, and the records are left as they were.
func TestRestoreAfterMoveAndDestroyRefused(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t, pvetest.Nodes(2))
	apps, _ := c.where()
	from := apps["notes"]
	to := otherNode(from)
	b := c.backup(m, "notes")
	c.mustRun("move", "notes", "--to", to, "-f", m, "--auto-approve")
	c.mustRun("destroy", "-f", m, "--auto-approve")
	before, beforeConf := c.state(), c.configs()

	r := c.runC("restore", "notes", "--archive", b.Archive, "-f", m, "--auto-approve")
	for _, want := range []string{"refused before any change", "is on storage local of node " + from, "app notes has no container and its volumes are recorded by the keeper on node " + to, "--as NAME"} {
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("restore of a destroyed app from the other node's archive: exit %d, want %q in\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if after := c.state(); !reflect.DeepEqual(before, after) {
		t.Errorf("the refused restore changed the cluster's guests or volumes")
	}
	if after := c.configs(); !reflect.DeepEqual(beforeConf, after) {
		t.Errorf("the refused restore changed a guest config:\nbefore %v\nafter  %v", beforeConf, after)
	}
	c.noRecordTwice()
}

// TestRestoreReplaceAfterMoveFromSharedBackups: the archive is on a
// backup storage every node reads (NFS), so restore --replace after a
// move restores onto the app's new node: the archive's data, the app on
// that node, each volume recorded once, the displaced volume kept as
// *-replaced-*, and an empty plan.
func TestRestoreReplaceAfterMoveFromSharedBackups(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t, pvetest.Nodes(2), pvetest.SharedStorage("nfs"))
	apps, _ := c.where()
	from := apps["notes"]
	to := otherNode(from)
	c.writeData(m, from, "precious")
	b := c.backup(m, "notes", "--storage", "nfs")
	if !strings.HasPrefix(b.Archive, "nfs:") {
		t.Fatalf("archive %s: want one on the shared storage nfs", b.Archive)
	}
	c.mustRun("move", "notes", "--to", to, "-f", m, "--auto-approve")
	c.writeData(m, to, "after the move")

	c.restoreReplaceOn(m, b.Archive, to)
	replaced := false
	for _, v := range c.status(m).Apps[0].Volumes {
		replaced = replaced || strings.Contains(v.Name, "-replaced-")
	}
	if !replaced {
		t.Errorf("the displaced volume is not kept as *-replaced-*: %+v", c.status(m).Apps[0].Volumes)
	}
}
