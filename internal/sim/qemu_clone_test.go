package sim

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// TestQemu_templateClone: template makes the disks base volumes and the
// VM unstartable; a clone of it is linked by default (vm-<newid>-disk-N
// beside the base on LVM-thin), a full clone copies the data onto the
// storage asked for, with a new MAC and SMBIOS UUID and the cloud-init
// drive copied; qemu-server's refusals answer with its messages.
func TestQemu_templateClone(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	p := vmParams("200")
	p.Set("description", "the golden image")
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p)
	k.writeDisk("pve", "local-lvm:vm-200-disk-0", []byte("golden"))
	src := k.vmConfig("200")
	tpl := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/template", nil)
	if tpl.Type != "qmtemplate" || !tpl.has(`  Renamed "vm-200-disk-0" to "base-200-disk-0" in volume group "pve"`) {
		t.Fatalf("template task %s:\n%v", tpl.Type, tpl.log)
	}
	conf := k.vmConfig("200")
	if conf["template"] != float64(1) || conf["scsi0"] != "local-lvm:base-200-disk-0,size=2G" || conf["ide2"] != src["ide2"] {
		t.Fatalf("the template's config %v", conf)
	}
	if st := k.task(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil); st.ExitStatus != "you can't start a vm if it's a template" {
		t.Fatalf("starting a template: %q", st.ExitStatus)
	}
	linked := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/clone", url.Values{"newid": {"201"}, "name": {"linked"}})
	if linked.Type != "qmclone" || !linked.has("creating a clone of VM 200 with ID 201") || !linked.has("create linked clone of drive scsi0 (local-lvm:base-200-disk-0)") ||
		!linked.has("create full clone of drive ide2 (local-lvm:vm-200-cloudinit)") {
		t.Fatalf("linked clone task %s:\n%v", linked.Type, linked.log)
	}
	c := k.vmConfig("201")
	if c["scsi0"] != "local-lvm:vm-201-disk-0,size=2G" || c["name"] != "linked" || c["template"] != nil ||
		c["ide2"] != "local-lvm:vm-201-cloudinit,media=cdrom" || c["smbios1"] == src["smbios1"] || c["net0"] == src["net0"] || !strings.HasPrefix(c["net0"].(string), "virtio=") {
		t.Fatalf("the linked clone's config %v (source %v)", c, src)
	}
	if got := k.readDisk("pve", "local-lvm:vm-201-disk-0", 6); !bytes.Equal(got, []byte("golden")) {
		t.Fatalf("the linked clone's disk holds %q", got)
	}
	full := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/clone", url.Values{"newid": {"202"}, "full": {"1"}, "storage": {"nfs"}, "format": {"qcow2"}})
	if !full.has("create full clone of drive scsi0 (local-lvm:base-200-disk-0)") || !full.has("transferred 2G of 2G (100.00%)") {
		t.Fatalf("full clone task:\n%v", full.log)
	}
	c = k.vmConfig("202")
	if c["scsi0"] != "nfs:202/vm-202-disk-0.qcow2,size=2G" || c["name"] != "Copy-of-VM-vm200" || c["description"] != "the golden image" {
		t.Fatalf("the full clone's config %v", c)
	}
	if got := k.readDisk("pve", "nfs:202/vm-202-disk-0.qcow2", 6); !bytes.Equal(got, []byte("golden")) {
		t.Fatalf("the full clone's disk holds %q", got)
	}
	for _, tc := range []struct {
		name, path string
		params     url.Values
		msg        string
	}{
		{"exists", "/nodes/pve/qemu/200/clone", url.Values{"newid": {"201"}}, "unable to create VM 201: config file already exists\n"},
		{"storage linked", "/nodes/pve/qemu/200/clone", url.Values{"newid": {"203"}, "storage": {"nfs"}}, "parameter 'storage' not allowed for linked clones\n"},
		{"linked of a VM", "/nodes/pve/qemu/201/clone", url.Values{"newid": {"203"}, "full": {"0"}}, "Linked clone feature is not supported for 'local-lvm:vm-201-disk-0' (scsi0)\n"},
		{"template twice", "/nodes/pve/qemu/200/template", nil, "you can't convert a template to a template\n"},
		{"missing snapshot", "/nodes/pve/qemu/201/clone", url.Values{"newid": {"203"}, "snapname": {"nope"}}, "snapshot 'nope' does not exist\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := k.do(root, http.MethodPost, tc.path, tc.params); r.status != 500 || r.msg != tc.msg {
				t.Fatalf("%d %q %v, want 500 %q", r.status, r.msg, r.errs, tc.msg)
			}
		})
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/201/snapshot", url.Values{"snapname": {"s1"}})
	if r := k.do(root, http.MethodPost, "/nodes/pve/qemu/201/template", nil); r.status != 500 || r.msg != "unable to create template, because VM contains snapshots\n" {
		t.Fatalf("template of a VM with snapshots: %d %q", r.status, r.msg)
	}
	_, who := k.newUserToken("cloner@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/200"}, "roles": {"PVEAuditor"}, "users": {"cloner@pve"}}, nil)
	if r := k.do(who, http.MethodPost, "/nodes/pve/qemu/200/clone", url.Values{"newid": {"204"}}); r.status != 403 {
		t.Fatalf("clone without VM.Clone: %d %q", r.status, r.msg)
	}
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/200"}, "roles": {"PVETemplateUser"}, "users": {"cloner@pve"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/204"}, "roles": {"PVEVMAdmin"}, "users": {"cloner@pve"}}, nil)
	if r := k.do(who, http.MethodPost, "/nodes/pve/qemu/200/clone", url.Values{"newid": {"204"}}); r.status != 403 || r.msg != "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)\n" {
		t.Fatalf("clone without Datastore.AllocateSpace: %d %q", r.status, r.msg)
	}
}

// TestQemu_linkedCloneDir: a linked clone of a template on NFS is named
// after its base as pve-storage names it (<base>/<vmid>/<own>.qcow2),
// holds the base's data, and keeps the template from being destroyed
// ("base volume ... is still in use by linked cloned") until it goes.
func TestQemu_linkedCloneDir(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"210"}, "scsi0": {"nfs:1,format=qcow2"}})
	k.writeDisk("pve", "nfs:210/vm-210-disk-0.qcow2", []byte("based!"))
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/210/template", nil)
	if conf := k.vmConfig("210"); conf["scsi0"] != "nfs:210/base-210-disk-0.qcow2,size=1G" {
		t.Fatalf("the template's disk %v", conf["scsi0"])
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/210/clone", url.Values{"newid": {"211"}})
	const linked = "nfs:210/base-210-disk-0.qcow2/211/vm-211-disk-0.qcow2"
	if conf := k.vmConfig("211"); conf["scsi0"] != linked+",size=1G" {
		t.Fatalf("the linked clone's disk %v", conf["scsi0"])
	}
	if got := k.readDisk("pve", linked, 6); !bytes.Equal(got, []byte("based!")) {
		t.Fatalf("the linked clone's disk holds %q", got)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/210/clone", url.Values{"newid": {"212"}})
	if conf := k.vmConfig("212"); conf["scsi0"] != "nfs:210/base-210-disk-0.qcow2/212/vm-212-disk-0.qcow2,size=1G" {
		t.Fatalf("the second linked clone's disk %v", conf["scsi0"])
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/211/config", url.Values{"scsi1": {"nfs:1,format=qcow2"}})
	if conf := k.vmConfig("211"); conf["scsi1"] != "nfs:211/vm-211-disk-1.qcow2,size=1G" {
		t.Fatalf("a new disk beside a linked one is %v", conf["scsi1"])
	}
	if d := k.task(root, http.MethodDelete, "/nodes/pve/qemu/210", nil); d.ExitStatus != "base volume 'nfs:210/base-210-disk-0.qcow2' is still in use by linked cloned" {
		t.Fatalf("destroying the template with linked clones: %q", d.ExitStatus)
	}
	if conf := k.vmConfig("210"); conf["scsi0"] != "nfs:210/base-210-disk-0.qcow2,size=1G" {
		t.Fatalf("a refused destroy changed the template: %v", conf)
	}
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/211", nil)
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/212", nil)
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/210", nil)
}

// TestQemu_linkedCloneRBD: on RBD a linked clone of a template is
// <base>/<own> (clone_image), one of a snapshot its own name.
func TestQemu_linkedCloneRBD(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), NodeMemory: 32 << 30, SharedStorage: []string{model.SharedRBD}})
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"223"}, "scsi0": {"rbd:1"}})
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/223/snapshot", url.Values{"snapname": {"s1"}})
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/223/clone", url.Values{"newid": {"222"}, "snapname": {"s1"}, "full": {"0"}})
	if conf := k.vmConfig("222"); conf["scsi0"] != "rbd:vm-222-disk-0,size=1G" {
		t.Fatalf("a linked clone of a snapshot: %v", conf["scsi0"])
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"220"}, "scsi0": {"rbd:1"}})
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/220/template", nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/220/clone", url.Values{"newid": {"221"}})
	if conf := k.vmConfig("221"); conf["scsi0"] != "rbd:base-220-disk-0/vm-221-disk-0,size=1G" {
		t.Fatalf("a linked clone of a template: %v", conf["scsi0"])
	}
	if d := k.task(root, http.MethodDelete, "/nodes/pve/qemu/220", nil); d.ExitStatus != "base volume 'rbd:base-220-disk-0' is still in use by linked cloned" {
		t.Fatalf("destroying the template: %q", d.ExitStatus)
	}
}
