package sim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// limitedUser makes user id with a role of privs on each of paths and
// returns its token.
func limitedUser(k *e2e, id string, privs string, paths ...string) e2eCaller {
	k.t.Helper()
	role := "Role" + strings.NewReplacer("@", "", ".", "").Replace(id)
	k.ok(k.root(), http.MethodPost, "/access/roles", url.Values{"roleid": {role}, "privs": {privs}}, nil)
	_, who := k.newUserToken(id, "tok", false)
	for _, p := range paths {
		k.ok(k.root(), http.MethodPut, "/access/acl", url.Values{"path": {p}, "roles": {role}, "users": {id}}, nil)
	}
	return who
}

// TestQemuRestore_refusals: what create_vm refuses of a restore before
// its task (schema-level conflicts, a missing archive, the privileges in
// PVE's order) and what the task refuses.
func TestQemuRestore_refusals(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	k.srv.Cluster().SetVMRuntime(model.NewAgentVMRuntime())
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	volid := vmBackupOf(t, k, "200")
	k.create(root, "100", nil)
	alloc := limitedUser(k, "alloc@pve", "VM.Allocate,VM.Config.Options", "/vms/300")
	space := limitedUser(k, "space@pve", "VM.Allocate,Datastore.AllocateSpace", "/vms/300", "/storage/local")
	backup := limitedUser(k, "backup@pve", "VM.Allocate,Datastore.AllocateSpace,VM.Backup", "/vms/300", "/storage/local", "/vms/200")
	bridged := limitedUser(k, "bridged@pve", "VM.Allocate,Datastore.AllocateSpace,VM.Backup,SDN.Use", "/vms/302", "/storage/local", "/vms/200", "/sdn/zones/localnetwork/vmbr0")

	for _, tc := range []struct {
		name   string
		who    e2eCaller
		set    url.Values
		status int
		msg    string // the message, or the 400's parameter error
	}{
		{"drive with archive", root, url.Values{"vmid": {"300"}, "scsi0": {"local-lvm:1"}}, 400, "option conflicts with option 'archive'"},
		{"missing archive", root, url.Values{"vmid": {"300"}, "archive": {"local:backup/vzdump-qemu-999-2020_01_01-00_00_00.vma.zst"}}, 500,
			"can't find file 'local:backup/vzdump-qemu-999-2020_01_01-00_00_00.vma.zst'\n"},
		{"existing VM", root, url.Values{"vmid": {"200"}}, 500, "unable to restore VM 200 - VM 200 already exists on node 'pve'\n"},
		{"existing CT, even with force", root, url.Values{"vmid": {"100"}, "force": {"1"}}, 500, "unable to restore VM 100 - CT 100 already exists on node 'pve'\n"},
		{"no VM.Allocate", alloc, url.Values{"vmid": {"301"}}, 403, "Permission check failed\n"},
		{"target storage", alloc, url.Values{"vmid": {"300"}, "storage": {"local-lvm"}}, 403, "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)\n"},
		{"archive storage", alloc, url.Values{"vmid": {"300"}}, 403, "Permission check failed (/storage/local, Datastore.AllocateSpace)\n"},
		{"archive's VM", space, url.Values{"vmid": {"300"}}, 403, "Permission check failed (/vms/200, VM.Backup)\n"},
		{"override option", backup, url.Values{"vmid": {"300"}, "memory": {"4096"}}, 403, "Permission check failed (/vms/300, VM.Config.Memory)\n"},
		{"force needs VM.Backup", space, url.Values{"vmid": {"200"}, "force": {"1"}}, 403, "Permission check failed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := url.Values{"archive": {volid}}
			for key, v := range tc.set {
				p[key] = v
			}
			r := k.do(tc.who, http.MethodPost, "/nodes/pve/qemu", p)
			got := r.msg
			if r.status == 400 {
				got = strings.Join(mapValues(r.errs), ";")
			}
			if r.status != tc.status || got != tc.msg {
				t.Fatalf("%d %q %v, want %d %q", r.status, r.msg, r.errs, tc.status, tc.msg)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		who    e2eCaller
		set    url.Values
		status string
	}{
		{"bridge of the backed-up NIC", backup, url.Values{"vmid": {"300"}}, "403 Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)"},
		{"disk storage", bridged, url.Values{"vmid": {"302"}}, "403 Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)"},
		{"live-restore", root, url.Values{"vmid": {"301"}, "live-restore": {"1"}}, "live-restore is only compatible with backup images from a Proxmox Backup Server"},
		{"target storage without images", root, url.Values{"vmid": {"303"}, "storage": {"local"}}, "Content type 'images' is not available on storage 'local'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := url.Values{"archive": {volid}}
			for key, v := range tc.set {
				p[key] = v
			}
			task := k.task(tc.who, http.MethodPost, "/nodes/pve/qemu", p)
			if task.ExitStatus != tc.status || !task.has("WARN: error before or during data restore, some or all disks were not completely restored. VM "+p.Get("vmid")+" state is NOT cleaned up.") {
				t.Fatalf("task ended %q, want %q\n%s", task.ExitStatus, tc.status, strings.Join(task.log, "\n"))
			}
			// PVE leaves the VM's (empty) config: it can be destroyed (which
			// drops the VM's ACLs, so each case has its own VMID).
			k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/"+p.Get("vmid"), nil)
		})
	}
	// Over a running VM with force: the task refuses it and unlocks it.
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	task := k.task(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"200"}, "archive": {volid}, "force": {"1"}})
	if task.ExitStatus != "unable to restore VM 200 - vm is running" || vmConfigOf(t, k, "200")["lock"] != nil {
		t.Fatalf("forced restore over a running VM: %q, config %v", task.ExitStatus, vmConfigOf(t, k, "200"))
	}
	var content []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/storage/local-lvm/content", url.Values{"content": {"images"}}, &content)
	for _, c := range content {
		if c["vmid"] != float64(200) { // only VM 200's disk and cloud-init drive
			t.Fatalf("refused restores left volumes: %v", content)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
