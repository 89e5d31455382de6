package sim

import (
	"net/http"
	"net/url"
	"testing"
)

// Issue 34: what the third-party VM clients (Ansible's proxmox_kvm,
// bpg's Terraform provider) met in the emulator, each deviation from
// qemu-server as a test of its own, so that it fails without the clients
// installed.

// A VM's /cluster/resources entry carries what pve-manager's
// extract_vm_stats gives a qemu guest, as a CT's does: proxmox_kvm
// finds a VM by its vmid there (KeyError 'vmid' otherwise) and bpg reads
// its name and node.
func TestQemu_resourcesEntry(t *testing.T) {
	k := newE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	var res []map[string]any
	k.ok(root, http.MethodGet, "/cluster/resources", url.Values{"type": {"vm"}}, &res)
	var vm map[string]any
	for _, r := range res {
		if r["id"] == "qemu/200" {
			vm = r
		}
	}
	for key, want := range map[string]any{"vmid": float64(200), "name": "vm200", "type": "qemu", "node": "pve",
		"status": "stopped", "template": float64(0), "maxcpu": float64(2), "maxmem": float64(1 << 30),
		"maxdisk": float64(2 << 30), "uptime": float64(0), "mem": float64(0)} {
		if vm[key] != want {
			t.Errorf("qemu/200's %s = %#v, want %#v (entry %v)", key, vm[key], want, vm)
		}
	}
}
