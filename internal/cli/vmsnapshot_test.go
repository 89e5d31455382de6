package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

// vmSnapManifest is VM app web (vmid 160, the agent answering) with the
// retained volumes named in vols.
func vmSnapManifest(t *testing.T, vols ...string) string {
	text := "apps:\n  - name: web\n    kind: vm\n    vmid: 160\n    memory: 512\n" +
		"    network: {ip: 10.20.0.61/24, gateway: 10.20.0.1}\n    ssh: {publicKeys: [\"" + vmKey + "\"]}\n" +
		"    vm: {disk: {size: 2G}, user: admin}\n"
	if len(vols) > 0 {
		text += "    volumes:\n"
		for _, v := range vols {
			text += "      - {name: " + v + ", size: 512M}\n"
		}
	}
	return writeManifest(t, text)
}

// vmSnapshotList is corral snapshots web -o json.
func (c *cluster) vmSnapshotList(m string) []apply.SnapshotInfo {
	c.t.Helper()
	r := c.mustC("snapshots", "web", "-f", m, "-o", "json")
	var out struct {
		Kind      string               `json:"kind"`
		VMID      int                  `json:"vmid"`
		Snapshots []apply.SnapshotInfo `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Kind != "vm" || out.VMID != 160 {
		c.t.Fatalf("snapshots -o json: %v\n%s", err, r.stdout)
	}
	return out.Snapshots
}

// TestVMSnapshotCommands (issue 34): corral snapshot of a VM app takes a
// snapshot of its VM without the RAM state, holding its root disk and
// the retained volume it holds (-o json and the text say so, and that
// the volume cannot go back to the keeper VM meanwhile); snapshots lists
// it (RAM no); rollback asks first, then brings back the disks' bytes
// and leaves the VM running as it was; snapshot --delete removes it.
func TestVMSnapshotCommands(t *testing.T) {
	t.Parallel()
	c, _ := vmBackupCluster(t)
	m := vmSnapManifest(t, "data")
	c.mustRun("apply", "-f", m, "--auto-approve")
	if snaps := c.vmSnapshotList(m); len(snaps) != 0 {
		t.Fatalf("snapshots before any: %+v", snaps)
	}
	if r := c.mustC("snapshots", "web", "-f", m); !strings.Contains(r.stdout, "App web (vm 160) has no snapshots.") {
		t.Errorf("snapshots of none:\n%s", r.stdout)
	}
	data := c.vmVolumes(m)["data"]
	c.diskBytes(data.VolID, []byte("before snapshot1"))
	r := c.mustC("snapshot", "web", "s1", "-f", m, "-o", "json")
	var taken struct {
		Kind, Snapshot string
		VMID           int
		RAM            *bool
		Covers         []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &taken); err != nil || taken.Kind != "vm" || taken.Snapshot != "s1" || taken.VMID != 160 || taken.RAM == nil || *taken.RAM {
		t.Fatalf("snapshot -o json: %v\n%s", err, r.stdout)
	}
	wantCovers := []string{"scsi0 (local-lvm:vm-160-disk-0)", "volume data (" + strings.TrimPrefix(data.Holder, "vm 160 ") + ", " + data.VolID + ")", "the config"}
	if strings.Join(taken.Covers, "|") != strings.Join(wantCovers, "|") {
		t.Errorf("snapshot covers %q, want %q", taken.Covers, wantCovers)
	}
	c.diskBytes(data.VolID, []byte("after snapshot1!"))
	r = c.mustC("snapshot", "web", "s2", "-f", m)
	for _, want := range []string{"Snapshot s2 of app web (vm 160) taken, without the RAM state", "volume data (", "the app's volumes cannot go back to the keeper VM"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("snapshot's text lacks %q:\n%s", want, r.stdout)
		}
	}
	snaps := c.vmSnapshotList(m)
	if len(snaps) != 2 || snaps[0].Name != "s1" || snaps[1].Name != "s2" || !snaps[1].Current || snaps[0].RAM == nil || *snaps[0].RAM {
		t.Fatalf("snapshots: %+v", snaps)
	}
	if r := c.mustC("snapshots", "web", "-f", m); !strings.Contains(r.stdout, "RAM") || !strings.Contains(r.stdout, "s2") {
		t.Errorf("snapshots' table:\n%s", r.stdout)
	}
	// Completion offers the VM's snapshots.
	var out, errb bytes.Buffer
	Run(context.Background(), slices.Concat([]string{"__complete", "rollback", "web"}, c.connArgs(), []string{"-f", m, ""}), strings.NewReader(""), &out, &errb)
	if got := strings.Fields(strings.Split(out.String(), ":")[0]); strings.Join(got, ",") != "s1,s2" {
		t.Errorf("completion of rollback web: %q\n%s", out.String(), errb.String())
	}
	// No terminal, no --auto-approve: nothing happens.
	if r := c.runC("rollback", "web", "s1", "-f", m); r.code == 0 || !strings.Contains(r.stderr, "refusing to change anything without confirmation") {
		t.Fatalf("rollback without confirmation: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := c.diskBytes(data.VolID, nil); !bytes.Equal(got, []byte("after snapshot1!")) {
		t.Fatalf("the refused rollback changed the disk: %q", got)
	}
	r = c.mustC("rollback", "web", "s1", "-f", m, "--auto-approve", "-o", "json")
	var rolled struct{ Kind, Snapshot string }
	if err := json.Unmarshal([]byte(r.stdout), &rolled); err != nil || rolled.Kind != "vm" || rolled.Snapshot != "s1" {
		t.Fatalf("rollback -o json: %v\n%s", err, r.stdout)
	}
	if got := c.diskBytes(data.VolID, nil); !bytes.Equal(got, []byte("before snapshot1")) {
		t.Errorf("after the rollback the volume holds %q", got)
	}
	if _, status, _ := c.vmOf(m); status != "running" {
		t.Errorf("after the rollback of a running VM it is %s, want running again", status)
	}
	r = c.mustC("snapshot", "web", "s2", "--delete", "-f", m, "-o", "json")
	if !strings.Contains(r.stdout, `"deleted":"s2"`) && !strings.Contains(r.stdout, `"deleted": "s2"`) {
		t.Errorf("snapshot --delete -o json:\n%s", r.stdout)
	}
	if snaps := c.vmSnapshotList(m); len(snaps) != 1 || snaps[0].Name != "s1" || !snaps[0].Current {
		t.Errorf("snapshots after the delete: %+v", snaps)
	}
	if r := c.runC("snapshot", "web", "nope", "--delete", "-f", m); r.code == 0 {
		t.Errorf("snapshot --delete of a snapshot that is not there: exit 0\n%s", r.stdout)
	}
	vmRollbackAfterAttach(t, c)
}

// vmRollbackAfterAttach: a retained volume attached after snapshot s1
// would lose its serial in a rollback to s1 (qemu-server keeps it as an
// unused disk), so rollback refuses before anything changes, naming the
// disk and the command that removes the snapshot; a stopped VM stays
// stopped after a rollback, and --start starts it.
func vmRollbackAfterAttach(t *testing.T, c *cluster) {
	m := vmSnapManifest(t, "data", "more")
	c.mustRun("apply", "-f", m, "--auto-approve")
	more := c.vmVolumes(m)["more"]
	if more.HolderVMID != 160 {
		t.Fatalf("volume more: %+v", more)
	}
	ctx := context.Background()
	before, err := c.pveRoot().VMConfigOf(ctx, "pve", 160, false)
	if err != nil {
		t.Fatal(err)
	}
	r := c.runC("rollback", "web", "s1", "-f", m, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stderr, "rollback of VM 160 on node pve to snapshot s1 refused; nothing was changed") ||
		!strings.Contains(r.stderr, more.VolID+", a retained volume) was attached after the snapshot") || !strings.Contains(r.stderr, "corral snapshot web s1 --delete") {
		t.Fatalf("rollback past an attach: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	after, err := c.pveRoot().VMConfigOf(ctx, "pve", 160, false)
	if err != nil || after.Digest != before.Digest {
		t.Fatalf("the refused rollback changed the VM's config (%v)", err)
	}
	// Without the new volume the snapshot fits again.
	m = vmSnapManifest(t, "data")
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.mustC("snapshot", "web", "s3", "-f", m)
	root := c.pveRoot()
	upid, err := root.StopVM(ctx, "pve", 160)
	if err == nil {
		_, err = root.WaitTask(ctx, upid, pve.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	c.mustC("rollback", "web", "s3", "-f", m, "--auto-approve")
	if _, status, _ := c.vmOf(m); status != "stopped" {
		t.Errorf("after the rollback of a stopped VM it is %s", status)
	}
	c.mustC("rollback", "web", "s3", "-f", m, "--auto-approve", "--start")
	if _, status, _ := c.vmOf(m); status != "running" {
		t.Errorf("after rollback --start it is %s", status)
	}
	if d := plan.VMVolumeDisks(after.Values); len(d) != 2 {
		t.Errorf("the VM held %d retained disks before, want 2", len(d))
	}
	vmDetachHeldRefused(t, c, m)
}

// vmDetachHeldRefused: while snapshots s1 and s3 hold volume data, an
// apply that drops it and a destroy are refused before anything
// changes (PVE would not move the disk to the keeper VM, after corral
// stopped the VM for it), naming the snapshots and the fix; once they
// are removed the volume goes back to the keeper VM.
func vmDetachHeldRefused(t *testing.T, c *cluster, m string) {
	data := c.vmVolumes(m)["data"]
	bare := vmSnapManifest(t)
	for _, args := range [][]string{{"apply", "-f", bare, "--auto-approve"}, {"destroy", "-f", m, "--auto-approve"}} {
		r := c.run(args...)
		if r.code == 0 || !strings.Contains(r.stderr, "PVE will not move a disk a snapshot holds to another VM") ||
			!strings.Contains(r.stderr, "snapshot s1 holds "+strings.TrimPrefix(data.Holder, "vm 160 ")+" ("+data.VolID+"); snapshot s3 holds") ||
			!strings.Contains(r.stderr, "nothing was changed") || !strings.Contains(r.stderr, "corral snapshot web NAME --delete") {
			t.Fatalf("%s while a snapshot holds a volume: exit %d\n%s%s", args[0], r.code, r.stdout, r.stderr)
		}
		if _, status, _ := c.vmOf(m); status != "running" || c.vmVolumes(m)["data"].HolderVMID != 160 {
			t.Fatalf("after the refused %s: vm %s, data %+v", args[0], status, c.vmVolumes(m)["data"])
		}
	}
	c.mustC("snapshot", "web", "s1", "--delete", "-f", m)
	c.mustC("snapshot", "web", "s3", "--delete", "-f", m)
	c.mustRun("apply", "-f", bare, "--auto-approve")
	if got := c.vmVolumes(m)["data"]; !strings.HasPrefix(got.Holder, "keeper vm ") {
		t.Errorf("after the snapshots' removal data is %+v, want it on the keeper VM", got)
	}
}

// TestVMSnapshotRefusedOnRawDisk (issue 34): a VM app with a disk that
// is a raw file on an NFS storage (added by hand; corral's own are
// qcow2 there) cannot be snapshotted (PVE: "snapshot feature is not
// available"): corral snapshot says why, that none was taken and what
// to use instead.
func TestVMSnapshotRefusedOnRawDisk(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.SharedStorage(model.SharedNFS))
	c.srv.Cluster().SetVMRuntime(model.NewAgentVMRuntime())
	c.offerVMImage()
	m := writeManifest(t, strings.Replace(vmAppText("10.20.0.62/24", "", ""), "disk: {size: 2G}", "disk: {size: 2G, storage: nfs}", 1))
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, _, _ := c.vmOf(m)
	if err := c.pveRoot().Put(context.Background(), "/nodes/pve/qemu/"+strconv.Itoa(vmid)+"/config", url.Values{"scsi5": {"nfs:1,format=raw"}}, nil); err != nil {
		t.Fatal(err)
	}
	r := c.runC("snapshot", "web", "s1", "-f", m)
	if r.code == 0 || !strings.Contains(r.stderr, "cannot be snapshotted") || !strings.Contains(r.stderr, "snapshot feature is not available") ||
		!strings.Contains(r.stderr, "no snapshot was taken — use `corral backup web` instead") {
		t.Fatalf("snapshot of a raw disk: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := c.vmSnapshots(vmid); n != 0 {
		t.Errorf("%d snapshots after the refusal", n)
	}
}
