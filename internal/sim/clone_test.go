package sim

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// waitTemplate converts CT vmid to a template and waits for template: 1.
func (k *e2e) waitTemplate(vmid string) {
	k.t.Helper()
	k.ok(k.root(), http.MethodPost, "/nodes/pve/lxc/"+vmid+"/template", nil, nil)
	testenv.WaitFor(k.t, "CT "+vmid+" to be a template", func() bool {
		return k.config(vmid, false)["template"] == float64(1)
	})
}

// Issue 33: POST /nodes/{node}/lxc/{vmid}/clone as API2/LXC.pm clone_vm:
// a vzclone task of the source; a full clone copies the data to new
// volumes (on storage= if given) with new MAC addresses and no
// snapshots; a template's clone is linked by default (a thin snapshot of
// the base volume on LVM-thin), which a dir storage cannot do; pool=
// puts the clone in the pool; the checks answer with PVE's messages.
func TestClone_fullAndLinked(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		k.create(root, "101", url.Values{"net0": {"name=eth0,bridge=vmbr0,ip=dhcp"}})
		dir, err := k.srv.cluster.VolumePath("pve", "local-lvm:vm-101-disk-0")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("from 101"), 0o644); err != nil {
			t.Fatal(err)
		}
		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/snapshot", url.Values{"snapname": {"s1"}})
		k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"web"}}, nil)

		// local has no rootdir content: the task fails as alloc_disk does,
		// and leaves nothing behind.
		st := k.task(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"102"}, "storage": {"local"}})
		if st.ExitStatus != "clone failed: content type 'rootdir' is not available or configured on storage 'local'" {
			t.Errorf("clone to local: %q", st.ExitStatus)
		}
		if r := k.do(root, http.MethodGet, "/nodes/pve/lxc/102/config", nil); r.status != 500 || k.config("101", false)["lock"] != nil {
			t.Errorf("a failed clone left CT 102 (%d) or the source's lock", r.status)
		}
		st = k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"102"}, "hostname": {"copy"}, "pool": {"web"}, "storage": {"local-lvm"}})
		if st.Type != "vzclone" || st.ID != "101" || !st.has("creating a clone of container 101 with ID 102") ||
			!st.has("create full clone of mountpoint rootfs (local-lvm:vm-101-disk-0)") {
			t.Errorf("vzclone task %s %s:\n%s", st.Type, st.ID, strings.Join(st.log, "\n"))
		}
		src, clone := k.config("101", false), k.config("102", false)
		if src["lock"] != nil || clone["lock"] != nil || clone["hostname"] != "copy" || clone["parent"] != nil {
			t.Errorf("after the clone: source lock %v, clone %v", src["lock"], clone)
		}
		if clone["rootfs"] != "local-lvm:vm-102-disk-0,size=1G" || clone["net0"] == src["net0"] {
			t.Errorf("clone's rootfs %v, net0 %v (source %v: the MAC must change)", clone["rootfs"], clone["net0"], src["net0"])
		}
		vol := strings.Split(clone["rootfs"].(string), ",")[0]
		cdir, err := k.srv.cluster.VolumePath("pve", vol)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(cdir, "marker")); err != nil || string(b) != "from 101" {
			t.Errorf("the clone's data: %q %v", b, err)
		}
		if got := k.poolMembers(v, "web", ""); len(got) != 1 || got[0] != "lxc/102" {
			t.Errorf("pool web after clone with pool=web: %v", got)
		}

		want(t, "newid taken", k.do(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"102"}}), 500, "CT 102 already exists on node 'pve'\n", nil)
		want(t, "linked from a plain CT", k.do(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"103"}, "full": {"0"}}),
			500, "Linked clone feature for 'local-lvm:vm-101-disk-0' is not available\n", nil)
		want(t, "storage on a linked clone", k.do(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"103"}, "full": {"0"}, "storage": {"local"}}),
			500, "parameter 'storage' not allowed for linked clones\n", nil)
		want(t, "missing snapshot", k.do(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"103"}, "snapname": {"nope"}}),
			500, "snapshot 'nope' does not exist\n", nil)
		if r := k.do(root, http.MethodGet, "/nodes/pve/lxc/103/config", nil); r.status != 500 {
			t.Errorf("a refused clone left CT 103: %d %s", r.status, r.data)
		}
		_, cloner := k.newUserToken("cloner@pve", "tok", false)
		k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/101"}, "roles": {"PVETemplateUser"}, "users": {"cloner@pve"}}, nil)
		want(t, "no VM.Allocate on newid", k.do(cloner, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"103"}}),
			403, "Permission check failed\n", nil)

		// A running CT: full clones only from a snapshot.
		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/status/start", nil)
		want(t, "running", k.do(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"103"}}),
			500, "Full clone of a running container is only possible from a snapshot\n", nil)
		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"103"}, "snapname": {"s1"}})
		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/status/stop", nil)

		// A template's clone is linked by default.
		k.mustOK(root, http.MethodDelete, "/nodes/pve/lxc/101/snapshot/s1", nil)
		k.waitTemplate("101")
		st = k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"104"}})
		if !st.has("create linked clone of mount point rootfs (local-lvm:base-101-disk-0)") || !st.has(`  Logical volume "vm-104-disk-0" created.`) {
			t.Errorf("linked clone task:\n%s", strings.Join(st.log, "\n"))
		}
		if c := k.config("104", false); c["rootfs"] != "local-lvm:vm-104-disk-0,size=1G" || c["template"] != nil {
			t.Errorf("linked clone's config: %v", c)
		}
		if r := k.do(root, http.MethodPost, "/nodes/pve/lxc/104/status/start", nil); r.status != 200 {
			t.Errorf("start the linked clone: %d %q", r.status, r.msg)
		}
	})
}
