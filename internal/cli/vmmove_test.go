package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/testenv"
)

// vmMoveManifest is VM app web with retained volumes data and logs, on
// node (no node: when "").
func vmMoveManifest(t *testing.T, node string) string {
	pin := ""
	if node != "" {
		pin = "    node: " + node + "\n"
	}
	return writeManifest(t, "apps:\n  - name: web\n    kind: vm\n"+pin+"    memory: 512\n"+
		"    network: {ip: 10.20.0.61/24, gateway: 10.20.0.1}\n    ssh: {publicKeys: [\""+vmKey+"\"]}\n"+
		"    vm: {disk: {size: 2G}}\n"+
		"    volumes:\n      - {name: data, size: 1G}\n      - {name: logs, size: 512M}\n")
}

// nodeBytes reads (data == nil) or writes the first 16 bytes of volid's
// file on node.
func (c *cluster) nodeBytes(node, volid string, data []byte) string {
	c.t.Helper()
	return string(c.diskBytesOn(node, volid, data))
}

// vmOn checks that app web's VM is vmid on node, running, and holds
// both retained disks with their data; it returns the volumes.
func (c *cluster) vmOn(m string, vmid int, node string, marks map[string]string) map[string]plan.VolumeInfo {
	c.t.Helper()
	conf, err := c.pveRoot().VMConfigOf(context.Background(), node, vmid, true)
	if err != nil {
		c.t.Fatalf("vm %d on %s: %v", vmid, node, err)
	}
	st, err := c.pveRoot().VMStatusOf(context.Background(), node, vmid)
	if err != nil || st.Status != "running" {
		c.t.Fatalf("vm %d on %s: %+v %v", vmid, node, st, err)
	}
	vols := c.vmVolumes(m)
	for name, want := range marks {
		v := vols[name]
		if v.HolderVMID != vmid || v.Node != node || v.Serial != plan.VMVolumeSerial("web", name) {
			c.t.Fatalf("volume %s is %+v, want on vm %d on %s (config %v)", name, v, vmid, node, conf.Values)
		}
		if got := c.nodeBytes(node, v.VolID, nil); got != want {
			c.t.Fatalf("volume %s (%s on %s) holds %q, want %q", name, v.VolID, node, got, want)
		}
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		c.t.Fatalf("plan after the move: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return vols
}

// noVMVolumesOn fails when node still has a volume named for vmid
// besides the import images (a copy the migration should have freed).
func (c *cluster) noVMVolumesOn(node string, vmid int) {
	c.t.Helper()
	for _, sid := range []string{"local-lvm", "local"} {
		content, err := c.pveRoot().StorageContent(context.Background(), node, sid, "", 0)
		if err != nil {
			continue
		}
		for _, v := range content {
			if plan.VolumeOwner(v.VolID) == vmid {
				c.t.Fatalf("node %s still has %s of vm %d", node, v.VolID, vmid)
			}
		}
	}
}

// TestMoveVMApp (issue 34): a kind: vm app with two retained disks on a
// three-node emulator moves by a change of node: (plan text and -o json
// checked), by corral move, is refused with a snapshot and moved with
// --delete-snapshots, and leaves a node with corral drain. Each time the
// VM keeps its VMID and runs on the new node, both disks stay attached
// with their serials and their bytes, nothing named for the VM is left
// on the old node, and the next plan is empty.
func TestMoveVMApp(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(3))
	c.offerVMImage()
	m1 := vmMoveManifest(t, "pve1")
	c.mustRun("apply", "-f", m1, "--auto-approve")
	vols := c.vmVolumes(m1)
	vmid := vols["data"].HolderVMID
	marks := map[string]string{"data": "web's data 12345", "logs": "web's logs 67890"}
	for name, mark := range marks {
		c.nodeBytes("pve1", vols[name].VolID, []byte(mark))
	}
	c.vmOn(m1, vmid, "pve1", marks)

	m2 := vmMoveManifest(t, "pve2")
	r := c.run("plan", "-f", m2)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "move") || !strings.Contains(r.stdout, "node changes pve1 → pve2: VM") ||
		!strings.Contains(r.stdout, "and so do its retained disks (data, logs)") {
		t.Fatalf("plan of the node change: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("plan of the node change:\n%s", r.stdout)
	r = c.run("plan", "-f", m2, "-o", "json")
	var pj struct {
		Changes []struct {
			Action, From, Node string
			Volumes            []struct{ Name, Action string }
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil || len(pj.Changes) != 1 || pj.Changes[0].Action != "move" ||
		pj.Changes[0].From != "pve1" || pj.Changes[0].Node != "pve2" || len(pj.Changes[0].Volumes) != 2 || pj.Changes[0].Volumes[0].Action != "move" {
		t.Fatalf("plan -o json: %v\n%s", err, r.stdout)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	c.vmOn(m2, vmid, "pve2", marks)
	c.noVMVolumesOn("pve1", vmid)

	free := vmMoveManifest(t, "")
	if r := c.run("move", "web", "--to", "pve3", "-f", m2, "--auto-approve"); r.code == 0 || !strings.Contains(r.stderr, "pins it to node pve2") {
		t.Fatalf("move of a pinned app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("move", "web", "--to", "pve3", "-f", free, "--auto-approve")
	c.vmOn(free, vmid, "pve3", marks)
	c.noVMVolumesOn("pve2", vmid)

	upid, err := c.pveRoot().CreateVMSnapshot(context.Background(), "pve3", vmid, "before", "")
	if err == nil {
		_, err = c.pveRoot().WaitTask(context.Background(), upid, pve.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	r = c.run("move", "web", "--to", "pve1", "-f", free, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "has snapshots (the latest is before)") || !strings.Contains(r.stdout+r.stderr, "--delete-snapshots") {
		t.Fatalf("move with a snapshot: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("move", "web", "--to", "pve1", "-f", free, "--auto-approve", "--delete-snapshots")
	c.vmOn(free, vmid, "pve1", marks)

	r = c.mustRun("drain", "pve1", "-f", free, "--auto-approve")
	t.Logf("drain:\n%s%s", r.stdout, r.stderr)
	vols = c.vmVolumes(free)
	to := vols["data"].Node
	if to == "pve1" || to == "" {
		t.Fatalf("after drain the volumes are %+v\n%s", vols, r.stderr)
	}
	c.vmOn(free, vmid, to, marks)
	c.noVMVolumesOn("pve1", vmid)
}

// TestMoveVMStatusWhileMigrating: with tasks at PVE's durations times
// three (a VM's migration 24 s), corral status, run while PVE migrates
// the VM of a corral apply that moves it shows the app moving from pve1
// to pve2, in text and in JSON (phase vm-migrating, no carrier, the
// fix); after the apply the mark is gone and the VM runs on pve2.
func TestMoveVMStatusWhileMigrating(t *testing.T) {
	t.Parallel()
	// Set up at scale 0: the VM on pve1, and a keeper on either node
	// (corral's lock lives in one; a keeper's create at scale 3 would
	// outlast the migration, and status waits for guests being created).
	dir := t.TempDir()
	c0 := newCluster(t, pvetest.InDir(dir), pvetest.Nodes(2))
	c0.offerVMImage()
	m1, m2 := vmMoveManifest(t, "pve1"), vmMoveManifest(t, "pve2")
	c0.mustRun("apply", "-f", m2, "--auto-approve")
	c0.mustRun("apply", "-f", m1, "--auto-approve")
	vmid := c0.vmVolumes(m1)["data"].HolderVMID
	if err := c0.srv.Close(); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, pvetest.InDir(dir), pvetest.Nodes(2), pvetest.TimeScale(3))
	done := make(chan result, 1)
	go func() { done <- c.run("apply", "-f", m2, "--auto-approve") }()
	ctx := context.Background()
	root := c.pveRoot() // one client: each has its own connections, kept open until the test ends
	testenv.WaitFor(t, "vm locked migrate on pve1", func() bool {
		conf, err := root.VMConfigOf(ctx, "pve1", vmid, true)
		return err == nil && conf.Values["lock"] == "migrate"
	})
	st := c.moveStatus(m2)
	text := c.run("status", "-f", m2)
	if conf, err := root.VMConfigOf(ctx, "pve1", vmid, true); err != nil || conf.Values["lock"] != "migrate" {
		t.Fatalf("the migration ended before status answered (%v): status saw nothing to check", err)
	}
	mv := st.Apps[0].Moving
	if mv == nil || mv.From != "pve1" || mv.To != "pve2" || mv.Phase != "vm-migrating" || mv.CarrierVMID != 0 || !strings.Contains(mv.Fix, "corral apply") {
		t.Fatalf("status -o json while migrating: %+v", st.Apps)
	}
	if !strings.Contains(text.stdout, "(locked: migrate) (moving pve1 → pve2)") || !strings.Contains(text.stdout, "web: moving from pve1 to pve2, migrating: ") {
		t.Fatalf("status while migrating:\n%s%s", text.stdout, text.stderr)
	}
	if r := <-done; r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if st := c.moveStatus(m2); st.Apps[0].Moving != nil {
		t.Fatalf("moving after the move: %+v", *st.Apps[0].Moving)
	}
	c.vmOn(m2, vmid, "pve2", nil)
}
