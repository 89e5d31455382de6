package sim

import (
	"net/http"
	"net/url"
	"testing"
)

// TestQemu_opsPermissions: each disk and lifecycle route answers PVE's
// 403 to a caller with only VM.Audit on the VM (the schema's privilege
// named), and the schema's 400 naming the parameter to a bad one.
func TestQemu_opsPermissions(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"s1"}})
	_, who := k.newUserToken("auditor@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/200"}, "roles": {"PVEAuditor"}, "users": {"auditor@pve"}}, nil)
	for _, tc := range []struct {
		method, path string
		params       url.Values
		priv         string
	}{
		{http.MethodPut, "/nodes/pve/qemu/200/resize", url.Values{"disk": {"scsi0"}, "size": {"+1G"}}, "VM.Config.Disk"},
		{http.MethodPost, "/nodes/pve/qemu/200/move_disk", url.Values{"disk": {"scsi0"}, "storage": {"nfs"}}, "VM.Config.Disk"},
		{http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"s2"}}, "VM.Snapshot"},
		{http.MethodDelete, "/nodes/pve/qemu/200/snapshot/s1", nil, "VM.Snapshot"},
		{http.MethodPost, "/nodes/pve/qemu/200/snapshot/s1/rollback", nil, "VM.Snapshot|VM.Snapshot.Rollback"},
		{http.MethodPut, "/nodes/pve/qemu/200/snapshot/s1/config", url.Values{"description": {"x"}}, "VM.Snapshot"},
		{http.MethodPost, "/nodes/pve/qemu/200/template", nil, "VM.Allocate"},
		{http.MethodPost, "/nodes/pve/qemu/200/clone", url.Values{"newid": {"201"}}, "VM.Clone"},
		{http.MethodPost, "/nodes/pve/qemu/200/migrate", url.Values{"target": {"pve"}}, "VM.Migrate"},
		{http.MethodGet, "/nodes/pve/qemu/200/migrate", nil, "VM.Migrate"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			want := "Permission check failed (/vms/200, " + tc.priv + ")\n"
			if r := k.do(who, tc.method, tc.path, tc.params); r.status != 403 || r.msg != want {
				t.Fatalf("%d %q, want 403 %q", r.status, r.msg, want)
			}
		})
	}
	var list []map[string]any
	k.ok(who, http.MethodGet, "/nodes/pve/qemu/200/snapshot", nil, &list) // VM.Audit reads them
	for _, tc := range []struct {
		method, path string
		params       url.Values
		param        string
	}{
		{http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"1st"}}, "snapname"},
		{http.MethodPost, "/nodes/pve/qemu/200/clone", nil, "newid"},
		{http.MethodPost, "/nodes/pve/qemu/200/clone", url.Values{"newid": {"7"}}, "newid"},
		{http.MethodPost, "/nodes/pve/qemu/200/migrate", nil, "target"},
		{http.MethodPost, "/nodes/pve/qemu/200/template", url.Values{"disk": {"net0"}}, "disk"},
		{http.MethodPost, "/nodes/pve/qemu/200/move_disk", url.Values{"disk": {"scsi0"}, "storage": {"nfs"}, "format": {"vdi"}}, "format"},
		{http.MethodPut, "/nodes/pve/qemu/200/resize", url.Values{"disk": {"scsi0"}}, "size"},
	} {
		t.Run("400 "+tc.param+" "+tc.path, func(t *testing.T) {
			if r := k.do(root, tc.method, tc.path, tc.params); r.status != 400 || r.errs[tc.param] == "" {
				t.Fatalf("%d %q %v, want 400 naming %s", r.status, r.msg, r.errs, tc.param)
			}
		})
	}
}
