package sim

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
)

// TestQemu_moveDisk: to another storage the data is copied and the old
// volume stays as unused0 (or goes, with delete); to another VM the
// volume is renamed for it and changes configs; qemu-server's
// refusals answer with its messages and parameter errors.
func TestQemu_moveDisk(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"201"}, "scsi0": {"local-lvm:1"}})
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/config", url.Values{"scsi1": {"local-lvm:1"}})
	k.writeDisk("pve", "local-lvm:vm-200-disk-0", []byte("system"))
	k.writeDisk("pve", "local-lvm:vm-200-disk-1", []byte("dataaa"))
	mv := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/move_disk", url.Values{"disk": {"scsi0"}, "storage": {"nfs"}, "format": {"qcow2"}})
	if mv.Type != "qmmove" || !mv.has("copying volume 'local-lvm:vm-200-disk-0' from current storage 'local-lvm' to target storage 'nfs'") ||
		!mv.has("adding source volume 'local-lvm:vm-200-disk-0' as 'unused0' to config") {
		t.Fatalf("move task %s:\n%v", mv.Type, mv.log)
	}
	conf := k.vmConfig("200")
	if conf["scsi0"] != "nfs:200/vm-200-disk-0.qcow2,size=2G" || conf["unused0"] != "local-lvm:vm-200-disk-0" {
		t.Fatalf("after the move %v", conf)
	}
	if got := k.readDisk("pve", "nfs:200/vm-200-disk-0.qcow2", 6); !bytes.Equal(got, []byte("system")) {
		t.Fatalf("the moved disk holds %q", got)
	}
	re := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/move_disk", url.Values{"disk": {"scsi1"}, "target-vmid": {"201"}, "target-disk": {"virtio1"}})
	if re.Type != "qmmove" || re.ID != "200-scsi1>201-virtio1" || !re.has(`  Renamed "vm-200-disk-1" to "vm-201-disk-1" in volume group "pve"`) ||
		!re.has("removing disk 'scsi1' from VM '200' config") {
		t.Fatalf("reassign task %s %s:\n%v", re.Type, re.ID, re.log)
	}
	if conf := k.vmConfig("200"); conf["scsi1"] != nil {
		t.Fatalf("the source still has scsi1: %v", conf)
	}
	if conf := k.vmConfig("201"); conf["virtio1"] != "local-lvm:vm-201-disk-1,size=1G" {
		t.Fatalf("the target's virtio1 is %v", conf["virtio1"])
	}
	if got := k.readDisk("pve", "local-lvm:vm-201-disk-1", 6); !bytes.Equal(got, []byte("dataaa")) {
		t.Fatalf("the reassigned disk holds %q", got)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/move_disk", url.Values{"disk": {"unused0"}, "target-vmid": {"201"}, "target-disk": {"unused3"}})
	if conf := k.vmConfig("201"); conf["unused3"] != "local-lvm:vm-201-disk-2" {
		t.Fatalf("the target's unused3 is %v", conf["unused3"])
	}
	checkReassignBootDisk(t, k)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/201/snapshot", url.Values{"snapname": {"s1"}})
	k.runOn("pve", root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	for _, tc := range []struct {
		name   string
		params url.Values
		status int
		msg    string
		param  string
	}{
		{"both", url.Values{"disk": {"scsi0"}, "storage": {"local-lvm"}, "target-vmid": {"201"}}, 400, "", "target-vmid"},
		{"neither", url.Values{"disk": {"scsi0"}}, 400, "", "storage"},
		{"same vm", url.Values{"disk": {"scsi0"}, "target-vmid": {"200"}}, 400, "", "target-vmid"},
		{"cloud-init drive of a running VM", url.Values{"disk": {"ide2"}, "target-vmid": {"201"}, "target-disk": {"ide0"}}, 500, "Cannot move disk to another VM while the source VM is running - detach first\n", ""},
		{"running", url.Values{"disk": {"scsi0"}, "target-vmid": {"201"}, "target-disk": {"scsi5"}}, 500, "Cannot move disk to another VM while the source VM is running - detach first\n", ""},
		{"key used", url.Values{"disk": {"scsi0"}, "target-vmid": {"201"}}, 500, "Target disk key 'scsi0' is already in use for VM '201'\n", ""},
		{"running to storage", url.Values{"disk": {"scsi0"}, "storage": {"local-lvm"}}, 500, "moving a disk of a running VM (drive-mirror) is not served by the emulator: stop the VM first\n", ""},
		{"same storage", url.Values{"disk": {"scsi0"}, "storage": {"nfs"}}, 500, "you can't move to the same storage with same format\n", ""},
		{"no images", url.Values{"disk": {"scsi0"}, "storage": {"local"}}, 400, "", "storage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.do(root, http.MethodPost, "/nodes/pve/qemu/200/move_disk", tc.params)
			if r.status != tc.status || tc.msg != "" && r.msg != tc.msg || tc.param != "" && r.errs[tc.param] == "" {
				t.Fatalf("%d %q %v, want %d %q %s", r.status, r.msg, r.errs, tc.status, tc.msg, tc.param)
			}
		})
	}
	if r := k.do(root, http.MethodPost, "/nodes/pve/qemu/201/move_disk", url.Values{"disk": {"scsi0"}, "target-vmid": {"200"}, "target-disk": {"scsi7"}}); r.status != 500 || r.msg != "Can't move disk used by a snapshot to another VM\n" {
		t.Fatalf("reassign of a snapshotted disk: %d %q", r.status, r.msg)
	}
	_, who := k.newUserToken("mover@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/201"}, "roles": {"PVEVMAdmin"}, "users": {"mover@pve"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/storage"}, "roles": {"PVEDatastoreUser"}, "users": {"mover@pve"}}, nil)
	if r := k.do(who, http.MethodPost, "/nodes/pve/qemu/201/move_disk", url.Values{"disk": {"unused3"}, "target-vmid": {"200"}}); r.status != 403 || r.msg != "Permission check failed (/vms/200, VM.Config.Disk)\n" {
		t.Fatalf("reassign without VM.Config.Disk on the target: %d %q", r.status, r.msg)
	}
}

// checkReassignBootDisk: giving a new VM's only disk to VM 201 drops it
// from the giver's boot order.
func checkReassignBootDisk(t *testing.T, k *e2e) {
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"202"}, "scsi0": {"local-lvm:1"}, "net0": {"virtio,bridge=vmbr0"}})
	boot := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/202/move_disk", url.Values{"disk": {"scsi0"}, "target-vmid": {"201"}, "target-disk": {"scsi4"}})
	if !boot.has("removing disk 'scsi0' from boot order config") {
		t.Fatalf("reassign of a boot disk:\n%v", boot.log)
	}
	if conf := k.vmConfig("202"); conf["boot"] != "order=net0" || conf["scsi0"] != nil {
		t.Fatalf("after giving its boot disk away VM 202's config is %v", conf)
	}
}
