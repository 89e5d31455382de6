package sim

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
)

// TestQemu_protectedKeeperDisks: a protected VM (a keeper of VM disks)
// takes disks in and gives them out by reassign (qemu-server checks no
// protection there), the drive's options (serial) travel with the disk,
// and removing its drives or unused disks is refused until protection is
// cleared (update_vm_api's check_protection), in the order the deletes
// are given.
func TestQemu_protectedKeeperDisks(t *testing.T) {
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"900"}, "memory": {"64"}, "protection": {"1"}})
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"201"}, "scsi0": {"local-lvm:1"}})
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/900/config", url.Values{"scsi1": {"local-lvm:1,serial=crl-0123456789abcdef"}, "scsi2": {"local-lvm:1"}})
	k.writeDisk("pve", "local-lvm:vm-900-disk-0", []byte("kept"))
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/900/move_disk", url.Values{"disk": {"scsi1"}, "target-vmid": {"201"}, "target-disk": {"scsi3"}})
	got := k.vmConfig("201")["scsi3"]
	if got != "local-lvm:vm-201-disk-1,serial=crl-0123456789abcdef,size=1G" {
		t.Fatalf("the app VM's scsi3 is %v", got)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/201/move_disk", url.Values{"disk": {"scsi3"}, "target-vmid": {"900"}, "target-disk": {"scsi1"}})
	if got := k.vmConfig("900")["scsi1"]; got != "local-lvm:vm-900-disk-0,serial=crl-0123456789abcdef,size=1G" {
		t.Fatalf("back in the keeper scsi1 is %v", got)
	}
	if data := k.readDisk("pve", "local-lvm:vm-900-disk-0", 4); !bytes.Equal(data, []byte("kept")) {
		t.Fatalf("the disk holds %q after two reassigns", data)
	}
	for _, tc := range []struct{ del, msg string }{
		{"scsi1", "can't remove drive 'scsi1' - protection mode enabled\n"},
		{"scsi9,scsi2", "can't remove drive 'scsi2' - protection mode enabled\n"},
	} {
		r := k.do(root, http.MethodPut, "/nodes/pve/qemu/900/config", url.Values{"delete": {tc.del}, "force": {"1"}})
		if r.status != 500 || r.msg != tc.msg {
			t.Fatalf("delete=%s: %d %q, want 500 %q", tc.del, r.status, r.msg, tc.msg)
		}
	}
	if r := k.do(root, http.MethodPut, "/nodes/pve/qemu/900/config", url.Values{"delete": {"protection,scsi2"}}); r.status != 200 {
		t.Fatalf("delete=protection,scsi2: %d %q", r.status, r.msg)
	}
	if conf := k.vmConfig("900"); conf["unused0"] != "local-lvm:vm-900-disk-1" || conf["protection"] != nil {
		t.Fatalf("after delete=protection,scsi2: %v", conf)
	}
	if r := k.do(root, http.MethodPut, "/nodes/pve/qemu/900/config", url.Values{"protection": {"1"}}); r.status != 200 {
		t.Fatalf("protection=1: %d %q", r.status, r.msg)
	}
	if r := k.do(root, http.MethodPut, "/nodes/pve/qemu/900/config", url.Values{"delete": {"unused0"}}); r.status != 500 || r.msg != "can't remove unused disk 'local-lvm:vm-900-disk-1' - protection mode enabled\n" {
		t.Fatalf("delete=unused0 on a protected VM: %d %q", r.status, r.msg)
	}
}
