package sim

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// vmOpsE2E is an emulator of one node with the shared NFS storage (a
// dir-like storage with images, where a disk is raw or qcow2).
func vmOpsE2E(t *testing.T) *e2e {
	return openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), NodeMemory: 32 << 30, SharedStorage: []string{model.SharedNFS}})
}

// writeDisk writes data at the start of volid's data file.
func (k *e2e) writeDisk(node, volid string, data []byte) {
	k.t.Helper()
	path, err := k.srv.cluster.VolumePath(node, volid)
	if err != nil {
		k.t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteAt(data, 0)
		f.Close()
	}
	if err != nil {
		k.t.Fatal(err)
	}
}

// readDisk reads n bytes at the start of volid's data file.
func (k *e2e) readDisk(node, volid string, n int) []byte {
	k.t.Helper()
	path, err := k.srv.cluster.VolumePath(node, volid)
	if err != nil {
		k.t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		k.t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		k.t.Fatal(err)
	}
	return b
}

// TestQemu_snapshot: a snapshot is a [s1] section and a storage snapshot
// per disk (not the cloud-init drive); a rollback brings the disk's data
// and the config back; deleting it re-parents the config; qemu-server's
// refusals fail the task or the call with its message; the rollback
// keeps the VM's Notes as they are.
func TestQemu_snapshot(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	k.writeDisk("pve", "local-lvm:vm-200-disk-0", []byte("before"))
	snap := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"s1"}, "description": {"first"}})
	if snap.Type != "qmsnapshot" || !snap.has("snapshotting 'drive-scsi0' (local-lvm:vm-200-disk-0)") ||
		!snap.has(`  Logical volume "snap_vm-200-disk-0_s1" created.`) || snap.has("snapshotting 'drive-ide2' (local-lvm:vm-200-cloudinit)") {
		t.Fatalf("snapshot task %s:\n%v", snap.Type, snap.log)
	}
	if conf := k.vmConfig("200"); conf["parent"] != "s1" || conf["lock"] != nil {
		t.Fatalf("after the snapshot the config is %v", conf)
	}
	var list []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/snapshot", nil, &list)
	if len(list) != 2 || list[0]["name"] != "s1" || list[0]["description"] != "first" || list[0]["vmstate"] != float64(0) ||
		list[1]["name"] != "current" || list[1]["parent"] != "s1" || list[1]["running"] != float64(0) {
		t.Fatalf("snapshot list %v", list)
	}
	var sc map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/snapshot/s1/config", nil, &sc)
	if sc["cores"] != float64(2) || sc["scsi0"] != "local-lvm:vm-200-disk-0,size=2G" || sc["snaptime"] == nil {
		t.Fatalf("snapshot config %v", sc)
	}
	k.writeDisk("pve", "local-lvm:vm-200-disk-0", []byte("after!"))
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"cores": {"4"}, "description": {"notes written after s1"}}, nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"s2"}})
	rb := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/snapshot/s1/rollback", url.Values{"start": {"1"}})
	if rb.Type != "qmrollback" {
		t.Fatalf("rollback task %s", rb.Type)
	}
	if got := k.readDisk("pve", "local-lvm:vm-200-disk-0", 6); !bytes.Equal(got, []byte("before")) {
		t.Fatalf("after the rollback the disk holds %q", got)
	}
	conf := k.vmConfig("200")
	// The Notes are the VM's now, not the snapshot's (AbstractConfig's
	// __snapshot_apply_config keeps the description).
	if desc, _ := conf["description"].(string); conf["cores"] != float64(2) || conf["parent"] != "s1" || strings.TrimSpace(desc) != "notes written after s1" {
		t.Fatalf("after the rollback the config is %v", conf)
	}
	var status map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/status/current", nil, &status)
	if status["status"] != "running" {
		t.Fatalf("rollback with start=1 left the VM %v", status["status"])
	}
	checkSnapshotRefusals(t, k)
	del := k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/200/snapshot/s1", nil)
	if del.Type != "qmdelsnapshot" || !del.has(`  Logical volume "snap_vm-200-disk-0_s1" successfully removed.`) {
		t.Fatalf("delete task %s:\n%v", del.Type, del.log)
	}
	if conf := k.vmConfig("200"); conf["parent"] != nil {
		t.Fatalf("after deleting s1 (the first) the config's parent is %v", conf["parent"])
	}
	var s2 map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/snapshot/s2/config", nil, &s2)
	if s2["parent"] != nil {
		t.Fatalf("s2's parent after deleting s1 is %v", s2["parent"])
	}
}

// TestQemu_snapshotQcow2AndPerms: a qcow2 disk on a dir-like storage
// can snapshot; VM.Snapshot is needed to take one, VM.PowerMgmt too for
// a rollback with start.
func TestQemu_snapshotQcow2AndPerms(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"202"}, "scsi0": {"nfs:1,format=qcow2"}})
	if conf := k.vmConfig("202"); conf["scsi0"] != "nfs:202/vm-202-disk-0.qcow2,size=1G" {
		t.Fatalf("a qcow2 disk on nfs: %v", conf["scsi0"])
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/202/snapshot", url.Values{"snapname": {"s1"}})
	_, who := k.newUserToken("snapper@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/202"}, "roles": {"PVEAuditor"}, "users": {"snapper@pve"}}, nil)
	if r := k.do(who, http.MethodPost, "/nodes/pve/qemu/202/snapshot", url.Values{"snapname": {"s2"}}); r.status != 403 || r.msg != "Permission check failed (/vms/202, VM.Snapshot)\n" {
		t.Fatalf("snapshot without VM.Snapshot: %d %q", r.status, r.msg)
	}
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/202"}, "roles": {"PVEVMUser"}, "users": {"snapper@pve"}}, nil)
	k.ok(root, http.MethodPost, "/access/roles", url.Values{"roleid": {"Snap"}, "privs": {"VM.Snapshot,VM.Audit"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/202"}, "roles": {"Snap"}, "users": {"snapper@pve"}, "delete": {"0"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/202"}, "roles": {"PVEVMUser"}, "users": {"snapper@pve"}, "delete": {"1"}}, nil)
	if r := k.do(who, http.MethodPost, "/nodes/pve/qemu/202/snapshot/s1/rollback", url.Values{"start": {"1"}}); r.status != 403 || r.msg != "Permission check failed (/vms/202, VM.PowerMgmt)\n" {
		t.Fatalf("rollback with start without VM.PowerMgmt: %d %q", r.status, r.msg)
	}
	k.mustOK(who, http.MethodPost, "/nodes/pve/qemu/202/snapshot/s1/rollback", nil)
}

// checkSnapshotRefusals: with VM 200 running and its snapshot s1, each
// refusal fails the task or the call with qemu-server's message.
func checkSnapshotRefusals(t *testing.T, k *e2e) {
	root := k.root()
	for _, tc := range []struct {
		name, method, path string
		params             url.Values
		exit               string // the task's exit status, or
		msg                string // the call's 500
	}{
		{"name used", http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"s1"}}, "snapshot name 's1' already used", ""},
		{"current", http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"current"}}, "", "unable to use snapshot name 'current' (reserved name)\n"},
		{"vmstate running", http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"s3"}, "vmstate": {"1"}}, "", "saving the VM state (vmstate) is not served by the emulator: take the snapshot without vmstate\n"},
		{"rollback missing", http.MethodPost, "/nodes/pve/qemu/200/snapshot/nope/rollback", nil, "snapshot 'nope' does not exist", ""},
		{"delete missing", http.MethodDelete, "/nodes/pve/qemu/200/snapshot/nope", nil, "snapshot 'nope' does not exist", ""},
		{"raw on nfs", http.MethodPost, "/nodes/pve/qemu/201/snapshot", url.Values{"snapname": {"s1"}}, "snapshot feature is not available", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "raw on nfs" {
				k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"201"}, "scsi0": {"nfs:1"}})
			}
			if tc.msg != "" {
				if r := k.do(root, tc.method, tc.path, tc.params); r.status != 500 || r.msg != tc.msg {
					t.Fatalf("%d %q, want 500 %q", r.status, r.msg, tc.msg)
				}
				return
			}
			if task := k.task(root, tc.method, tc.path, tc.params); task.ExitStatus != tc.exit {
				t.Fatalf("exit %q, want %q\n%v", task.ExitStatus, tc.exit, task.log)
			}
		})
	}
}

// TestQemu_destroyFreesSnapshots: destroying a VM frees its disks'
// snapshots with them, on LVM-thin and on NFS.
func TestQemu_destroyFreesSnapshots(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"205"}, "scsi0": {"local-lvm:1"}, "scsi1": {"nfs:1,format=qcow2"}})
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/205/snapshot", url.Values{"snapname": {"s1"}})
	snaps := func() []string {
		var out []string
		filepath.WalkDir(k.dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(path, "snap_") {
				out = append(out, path)
			}
			return nil
		})
		return out
	}
	if got := snaps(); len(got) != 2 {
		t.Fatalf("after the snapshot the snapshot files are %v, want two", got)
	}
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/205", nil)
	if got := snaps(); len(got) != 0 {
		t.Fatalf("after the destroy snapshot files remain: %v", got)
	}
}
