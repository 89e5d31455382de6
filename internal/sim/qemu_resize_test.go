package sim

import (
	"net/http"
	"net/url"
	"os"
	"testing"
)

// TestQemu_resize: the disk grows in a resize task (the LV and its data
// file, and size= in the drive); shrinking, a cdrom, a missing disk and
// a locked VM fail the task with qemu-server's message; a bad size is
// the schema's 400; a caller without VM.Config.Disk gets PVE's 403.
func TestQemu_resize(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	grow := k.mustOK(root, http.MethodPut, "/nodes/pve/qemu/200/resize", url.Values{"disk": {"scsi0"}, "size": {"+1G"}})
	if grow.Type != "resize" || !grow.has("  Logical volume pve/vm-200-disk-0 successfully resized.") {
		t.Fatalf("resize task %s:\n%v", grow.Type, grow.log)
	}
	conf := k.vmConfig("200")
	if conf["scsi0"] != "local-lvm:vm-200-disk-0,size=3G" {
		t.Fatalf("after +1G scsi0 is %v", conf["scsi0"])
	}
	path, err := k.srv.cluster.VolumePath("pve", "local-lvm:vm-200-disk-0")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 3<<30 {
		t.Fatalf("the disk's data file after +1G: %v %v", fi, err)
	}
	for _, tc := range []struct {
		name string
		set  url.Values
		exit string
	}{
		{"shrink", url.Values{"disk": {"scsi0"}, "size": {"1G"}}, "shrinking disks is not supported"},
		{"cdrom", url.Values{"disk": {"ide2"}, "size": {"+1G"}}, "you can't resize a cdrom"},
		{"missing disk", url.Values{"disk": {"scsi5"}, "size": {"+1G"}}, "disk 'scsi5' does not exist"},
		{"digest", url.Values{"disk": {"scsi0"}, "size": {"+1G"}, "digest": {"0000000000000000000000000000000000000000"}}, "checksum mismatch (file change by other user?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := k.task(root, http.MethodPut, "/nodes/pve/qemu/200/resize", tc.set)
			if task.ExitStatus != tc.exit {
				t.Fatalf("exit %q, want %q\n%v", task.ExitStatus, tc.exit, task.log)
			}
		})
	}
	if r := k.do(root, http.MethodPut, "/nodes/pve/qemu/200/resize", url.Values{"disk": {"scsi0"}, "size": {"-1G"}}); r.status != 400 || r.errs["size"] == "" {
		t.Fatalf("size -1G: %d %v", r.status, r.errs)
	}
	if r := k.do(root, http.MethodPut, "/nodes/pve/qemu/200/resize", url.Values{"disk": {"net0"}, "size": {"+1G"}}); r.status != 400 || r.errs["disk"] == "" {
		t.Fatalf("disk net0: %d %v", r.status, r.errs)
	}
	_, who := k.newUserToken("sizer@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/200"}, "roles": {"PVEAuditor"}, "users": {"sizer@pve"}}, nil)
	if r := k.do(who, http.MethodPut, "/nodes/pve/qemu/200/resize", url.Values{"disk": {"scsi0"}, "size": {"+1G"}}); r.status != 403 || r.msg != "Permission check failed (/vms/200, VM.Config.Disk)\n" {
		t.Fatalf("without VM.Config.Disk: %d %q", r.status, r.msg)
	}
	if conf := k.vmConfig("200"); conf["scsi0"] != "local-lvm:vm-200-disk-0,size=3G" {
		t.Fatalf("a refused resize changed scsi0 to %v", conf["scsi0"])
	}
}

// vmConfig reads a VM's current config.
func (k *e2e) vmConfig(vmid string) map[string]any {
	k.t.Helper()
	conf := map[string]any{}
	k.ok(k.root(), http.MethodGet, "/nodes/pve/qemu/"+vmid+"/config", url.Values{"current": {"1"}}, &conf)
	return conf
}
