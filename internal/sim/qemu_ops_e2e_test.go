package sim

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// TestQemu_opsEndToEnd drives one VM through the disk and lifecycle
// operations over HTTPS with the state-only runtime: create, snapshot,
// resize, an emulator restart (the snapshot and the grown disk persist),
// rollback, template, a linked clone, an offline migrate of the clone,
// destroy; checking the configs and the storage's volumes at each step.
func TestQemu_opsEndToEnd(t *testing.T) {
	t.Parallel()
	opts := Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Nodes: 2, NodeMemory: 32 << 30, SharedStorage: []string{model.SharedNFS}}
	k := openE2E(t, opts)
	root := k.root()
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu", vmParams("300"))
	k.writeDisk("pve1", "local-lvm:vm-300-disk-0", []byte("v1data"))
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/300/snapshot", url.Values{"snapname": {"clean"}})
	k.writeDisk("pve1", "local-lvm:vm-300-disk-0", []byte("v2data"))
	k.runOn("pve1", root, http.MethodPut, "/nodes/pve1/qemu/300/resize", url.Values{"disk": {"scsi0"}, "size": {"4G"}})
	var before map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve1/qemu/300/config", nil, &before)
	if before["scsi0"] != "local-lvm:vm-300-disk-0,size=4G" || before["parent"] != "clean" {
		t.Fatalf("before the restart %v", before)
	}
	if err := k.srv.Close(); err != nil {
		t.Fatal(err)
	}
	k = openE2E(t, opts)
	root = k.root()
	var after map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve1/qemu/300/config", nil, &after)
	if after["digest"] != before["digest"] {
		t.Fatalf("after the restart the config is %v, was %v", after, before)
	}
	rb := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/300/snapshot/clean/rollback", nil)
	if rb.ExitStatus != "OK" {
		t.Fatalf("rollback after a restart: %q\n%v", rb.ExitStatus, rb.log)
	}
	if conf := k.vmConfigOn("pve1", "300"); conf["scsi0"] != "local-lvm:vm-300-disk-0,size=2G" {
		t.Fatalf("after the rollback scsi0 is %v", conf["scsi0"])
	}
	if got := k.readDisk("pve1", "local-lvm:vm-300-disk-0", 6); !bytes.Equal(got, []byte("v1data")) {
		t.Fatalf("after the rollback the disk holds %q", got)
	}
	k.runOn("pve1", root, http.MethodDelete, "/nodes/pve1/qemu/300/snapshot/clean", nil)
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/300/template", nil)
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/300/clone", url.Values{"newid": {"301"}, "name": {"web"}})
	if conf := k.vmConfigOn("pve1", "301"); conf["scsi0"] != "local-lvm:vm-301-disk-0,size=2G" || conf["name"] != "web" {
		t.Fatalf("the clone %v", conf)
	}
	far := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/300/clone", url.Values{"newid": {"302"}, "full": {"1"}, "storage": {"nfs"}, "target": {"pve2"}})
	if far.ExitStatus != "OK" {
		t.Fatalf("full clone to pve2: %q\n%v", far.ExitStatus, far.log)
	}
	if conf := k.vmConfigOn("pve2", "302"); conf["scsi0"] != "nfs:302/vm-302-disk-0.raw,size=2G" {
		t.Fatalf("the clone on pve2 %v", conf)
	}
	k.runOn("pve2", root, http.MethodDelete, "/nodes/pve2/qemu/302", nil)
	mig := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/301/migrate", url.Values{"target": {"pve2"}, "targetstorage": {"nfs"}})
	if mig.ExitStatus != "OK" {
		t.Fatalf("migrate %q\n%v", mig.ExitStatus, mig.log)
	}
	conf := k.vmConfigOn("pve2", "301")
	if conf["scsi0"] != "nfs:301/vm-301-disk-0.raw,size=2G" {
		t.Fatalf("the migrated clone %v", conf)
	}
	if got := k.readDisk("pve2", "nfs:301/vm-301-disk-0.raw", 6); !bytes.Equal(got, []byte("v1data")) {
		t.Fatalf("the migrated clone's disk holds %q", got)
	}
	k.runOn("pve2", root, http.MethodDelete, "/nodes/pve2/qemu/301", nil)
	k.runOn("pve1", root, http.MethodDelete, "/nodes/pve1/qemu/300", nil)
	for _, c := range []struct{ node, storage string }{{"pve1", "local-lvm"}, {"pve2", "local-lvm"}, {"pve1", "nfs"}} {
		var content []map[string]any
		k.ok(root, http.MethodGet, "/nodes/"+c.node+"/storage/"+c.storage+"/content", nil, &content)
		for _, v := range content {
			if v["vmid"] == float64(300) || v["vmid"] == float64(301) || v["vmid"] == float64(302) {
				t.Fatalf("after the destroys %s on %s holds %v", c.storage, c.node, v)
			}
		}
	}
}

// vmConfigOn reads a VM's current config on node.
func (k *e2e) vmConfigOn(node, vmid string) map[string]any {
	k.t.Helper()
	conf := map[string]any{}
	k.ok(k.root(), http.MethodGet, "/nodes/"+node+"/qemu/"+vmid+"/config", url.Values{"current": {"1"}}, &conf)
	return conf
}
