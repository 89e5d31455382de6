package sim

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// TestQemu_migrateOffline: GET migrate lists the VM's local disks and
// the nodes it may go to; POST migrate copies the local disks to the
// target (the data with them), moves the config and frees the source's
// volumes; a running VM, the local node and a non-root force are refused.
func TestQemu_migrateOffline(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Nodes: 2, NodeMemory: 32 << 30, SharedStorage: []string{model.SharedNFS}})
	root := k.root()
	p := vmParams("200")
	p.Set("scsi1", "nfs:1")
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu", p)
	k.writeDisk("pve1", "local-lvm:vm-200-disk-0", []byte("moving"))
	var pre map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve1/qemu/200/migrate", url.Values{"target": {"pve2"}}, &pre)
	disks, _ := pre["local_disks"].([]any)
	if pre["running"] != float64(0) || len(disks) != 2 || disks[0].(map[string]any)["volid"] != "local-lvm:vm-200-cloudinit" ||
		len(pre["allowed_nodes"].([]any)) != 1 || pre["allowed_nodes"].([]any)[0] != "pve2" {
		t.Fatalf("migrate precondition %v", pre)
	}
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/200/status/start", nil)
	for _, tc := range []struct {
		name   string
		params url.Values
		status int
		msg    string
		param  string
	}{
		{"running", url.Values{"target": {"pve2"}}, 500, "can't migrate running VM without --online\n", ""},
		{"online", url.Values{"target": {"pve2"}, "online": {"1"}}, 500, "online migration of a running VM is not served by the emulator: shut the VM down and migrate it offline\n", ""},
		{"local node", url.Values{"target": {"pve1"}}, 400, "", "target"},
		{"no node", url.Values{"target": {"pve9"}}, 500, "no such cluster node 'pve9'\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.do(root, http.MethodPost, "/nodes/pve1/qemu/200/migrate", tc.params)
			if r.status != tc.status || tc.msg != "" && r.msg != tc.msg || tc.param != "" && r.errs[tc.param] == "" {
				t.Fatalf("%d %q %v, want %d %q %s", r.status, r.msg, r.errs, tc.status, tc.msg, tc.param)
			}
		})
	}
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/200/status/stop", nil)
	mig := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/200/migrate", url.Values{"target": {"pve2"}})
	if mig.ExitStatus != "OK" || mig.Type != "qmigrate" {
		t.Fatalf("migrate %s %q:\n%v", mig.Type, mig.ExitStatus, mig.log)
	}
	for _, want := range []string{"starting migration of VM 200 to node 'pve2' (127.0.0.2)", "found local disk 'local-lvm:vm-200-disk-0' (attached)",
		"found generated disk 'local-lvm:vm-200-cloudinit' (in current VM config)", "copying local disk images",
		"volume 'local-lvm:vm-200-disk-0' is 'local-lvm:vm-200-disk-0' on the target", `  Logical volume "vm-200-disk-0" successfully removed.`} {
		if !hasSuffixLine(mig.log, want) {
			t.Fatalf("migrate log lacks %q:\n%v", want, mig.log)
		}
	}
	if r := k.do(root, http.MethodGet, "/nodes/pve1/qemu/200/config", nil); r.status != 500 {
		t.Fatalf("the config is still on pve1: %d", r.status)
	}
	conf := map[string]any{}
	k.ok(root, http.MethodGet, "/nodes/pve2/qemu/200/config", nil, &conf)
	if conf["scsi0"] != "local-lvm:vm-200-disk-0,size=2G" || conf["scsi1"] != "nfs:200/vm-200-disk-0.raw,size=1G" || conf["lock"] != nil {
		t.Fatalf("the config on pve2 %v", conf)
	}
	if got := k.readDisk("pve2", "local-lvm:vm-200-disk-0", 6); !bytes.Equal(got, []byte("moving")) {
		t.Fatalf("the disk on pve2 holds %q", got)
	}
	if _, err := k.srv.cluster.VolumePath("pve1", "local-lvm:vm-200-disk-0"); err == nil {
		t.Fatal("the source's disk is still on pve1")
	}
	checkMigrateRefusesSnapshots(t, k)
	_, who := k.newUserToken("mover@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/200"}, "roles": {"PVEVMAdmin"}, "users": {"mover@pve"}}, nil)
	if r := k.do(who, http.MethodPost, "/nodes/pve2/qemu/200/migrate", url.Values{"target": {"pve1"}, "force": {"1"}}); r.status != 400 || r.errs["force"] != "Only root may use this option." {
		t.Fatalf("force by a user: %d %v", r.status, r.errs)
	}
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/200"}, "roles": {"PVEVMUser"}, "users": {"mover@pve"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/200"}, "roles": {"PVEVMAdmin"}, "users": {"mover@pve"}, "delete": {"1"}}, nil)
	if r := k.do(who, http.MethodPost, "/nodes/pve2/qemu/200/migrate", url.Values{"target": {"pve1"}}); r.status != 403 || r.msg != "Permission check failed (/vms/200, VM.Migrate)\n" {
		t.Fatalf("migrate without VM.Migrate: %d %q", r.status, r.msg)
	}
}

// hasSuffixLine reports whether a log line ends with want (migration
// lines start with a timestamp).
func hasSuffixLine(log []string, want string) bool {
	for _, l := range log {
		if len(l) >= len(want) && l[len(l)-len(want):] == want {
			return true
		}
	}
	return false
}

// checkMigrateRefusesSnapshots: VM 200 on pve2 with an LVM-thin snapshot
// cannot migrate (non-migratable snapshot), and the failure unlocks it.
func checkMigrateRefusesSnapshots(t *testing.T, k *e2e) {
	root := k.root()
	k.ok(root, http.MethodPut, "/nodes/pve2/qemu/200/config", url.Values{"delete": {"scsi1"}}, nil) // a raw file on NFS cannot snapshot
	if snap := k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/qemu/200/snapshot", url.Values{"snapname": {"s1"}}); snap.ExitStatus != "OK" {
		t.Fatalf("snapshot on pve2: %q", snap.ExitStatus)
	}
	back := k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/qemu/200/migrate", url.Values{"target": {"pve1"}})
	if back.ExitStatus != "migration aborted" || !hasSuffixLine(back.log, "ERROR: can't migrate local disk 'local-lvm:vm-200-disk-0': non-migratable snapshot exists") {
		t.Fatalf("migrating a VM with an LVM-thin snapshot: %q\n%v", back.ExitStatus, back.log)
	}
	conf := map[string]any{}
	k.ok(root, http.MethodGet, "/nodes/pve2/qemu/200/config", nil, &conf)
	if conf["lock"] != nil {
		t.Fatalf("a failed migration left the lock %v", conf["lock"])
	}
}

// TestQemu_migrateTakesTime: at time scale 1 an offline VM migration
// runs as long as a stopped CT's (vzmigrate's duration), with the VM's
// config locked "migrate" on the source node meanwhile, as QemuMigrate
// holds it while it copies the disks; then the config is on the target,
// unlocked.
func TestQemu_migrateTakesTime(t *testing.T) {
	t.Parallel()
	one := 1.0
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: &one, Nodes: 2, NodeMemory: 32 << 30})
	root := k.root()
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu", vmParams("200"))
	start := time.Now()
	var upid string
	k.ok(root, http.MethodPost, "/nodes/pve1/qemu/200/migrate", url.Values{"target": {"pve2"}}, &upid)
	testenv.WaitFor(t, "vm 200 locked migrate on pve1", func() bool {
		conf := map[string]any{}
		k.ok(root, http.MethodGet, "/nodes/pve1/qemu/200/config", nil, &conf)
		return conf["lock"] == "migrate"
	})
	if mig := k.waitOn("pve1", upid); mig.ExitStatus != "OK" {
		t.Fatalf("migrate: %q\n%v", mig.ExitStatus, mig.log)
	}
	if took, want := time.Since(start), model.DefaultDuration("vzmigrate"); took < want {
		t.Fatalf("the migration took %s, want at least %s", took, want)
	}
	conf := map[string]any{}
	k.ok(root, http.MethodGet, "/nodes/pve2/qemu/200/config", nil, &conf)
	if conf["lock"] != nil || conf["scsi0"] == nil {
		t.Fatalf("the config on pve2 %v", conf)
	}
}
