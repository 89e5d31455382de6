package sim

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vmParams are a basic VM's create parameters: a 2 GiB disk on
// local-lvm, a cloud-init drive, a virtio NIC without a MAC, the agent.
func vmParams(vmid string) url.Values {
	return url.Values{"vmid": {vmid}, "name": {"vm" + vmid}, "cores": {"2"}, "memory": {"1024"},
		"scsihw": {"virtio-scsi-single"}, "scsi0": {"local-lvm:2"}, "ide2": {"local-lvm:cloudinit"},
		"net0": {"virtio,bridge=vmbr0"}, "agent": {"1"}, "ostype": {"l26"}, "serial0": {"socket"}, "vga": {"serial0"}}
}

// TestQemu_createBadParams: the schema and create_vm's own checks answer
// 400 naming the parameter, or 500 with qemu-server's message.
func TestQemu_createBadParams(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	for _, tc := range []struct {
		name   string
		set    url.Values
		status int
		param  string // the 400's parameter, or
		msg    string // the 500's message
	}{
		{"cores not an integer", url.Values{"cores": {"two"}}, 400, "cores", ""},
		{"memory not an integer", url.Values{"memory": {"lots"}}, 400, "memory", ""},
		{"unknown key", url.Values{"bogus": {"1"}}, 400, "bogus", ""},
		{"storage without images", url.Values{"scsi0": {"local:2"}}, 400, "storage", ""},
		{"import from nothing", url.Values{"scsi0": {"local-lvm:0,import-from=local:import/none.qcow2"}}, 500, "", "volume 'local:import/none.qcow2' does not exist\n"},
		{"restore with drives", url.Values{"archive": {"local:backup/vzdump-qemu-100.vma.zst"}}, 400, "ide2", ""}, // the first drive in sorted order, as create_vm checks
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := vmParams("300")
			for key, v := range tc.set {
				p[key] = v
			}
			r := k.do(root, http.MethodPost, "/nodes/pve/qemu", p)
			if r.status != tc.status {
				t.Fatalf("status %d %q %v, want %d", r.status, r.msg, r.errs, tc.status)
			}
			if tc.param != "" && r.errs[tc.param] == "" {
				t.Fatalf("errors %v name no %s", r.errs, tc.param)
			}
			if tc.msg != "" && r.msg != tc.msg {
				t.Fatalf("message %q, want %q", r.msg, tc.msg)
			}
			var list []map[string]any
			k.ok(root, http.MethodGet, "/nodes/pve/qemu", nil, &list)
			if len(list) != 0 {
				t.Fatalf("a refused create left %v", list)
			}
		})
	}
}

// TestQemu_permissions: each key needs its class's privilege, a new
// disk Datastore.AllocateSpace, power VM.PowerMgmt, the agent
// VM.GuestAgent.*; a missing one is PVE's 403.
func TestQemu_permissions(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	_, who := k.newUserToken("vmer@pve", "tok", false)
	k.ok(root, http.MethodPost, "/access/roles", url.Values{"roleid": {"VMAlloc"}, "privs": {"VM.Allocate,VM.Config.Disk,VM.Config.Options,VM.Audit"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/300"}, "roles": {"VMAlloc"}, "users": {"vmer@pve"}}, nil)
	for _, tc := range []struct {
		name, method, path string
		params             url.Values
		msg                string
	}{
		{"cores", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "cores": {"2"}}, "Permission check failed (/vms/300, VM.Config.CPU)\n"},
		{"memory", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "memory": {"512"}}, "Permission check failed (/vms/300, VM.Config.Memory)\n"},
		{"net", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "net0": {"virtio,bridge=vmbr0"}}, "Permission check failed (/vms/300, VM.Config.Network)\n"},
		{"cloud-init", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "ciuser": {"debian"}}, "Permission check failed (/vms/300, VM.Config.Cloudinit|VM.Config.Network)\n"},
		{"disk space", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "scsi0": {"local-lvm:1"}}, "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)\n"},
		{"efi disk space", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "efidisk0": {"local-lvm:1,efitype=4m"}}, "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)\n"},
		{"tpm disk space", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "tpmstate0": {"local-lvm:1"}}, "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)\n"},
		{"allocate", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"301"}}, "Permission check failed\n"},
		{"args", http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "args": {"-no-reboot"}}, "only root can set 'args' config\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.do(who, tc.method, tc.path, tc.params)
			if r.msg != tc.msg {
				t.Fatalf("%d %q, want %q", r.status, r.msg, tc.msg)
			}
		})
	}
	k.mustOK(who, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"300"}, "agent": {"1"}})
	if r := k.do(who, http.MethodPost, "/nodes/pve/qemu/300/status/start", nil); r.status != 403 || r.msg != "Permission check failed (/vms/300, VM.PowerMgmt)\n" {
		t.Fatalf("start without VM.PowerMgmt: %d %q", r.status, r.msg)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/300/status/start", nil)
	if r := k.do(who, http.MethodPost, "/nodes/pve/qemu/300/agent/ping", nil); r.status != 403 || r.msg != "Permission check failed (/vms/300, VM.GuestAgent.Audit|VM.GuestAgent.Unrestricted)\n" {
		t.Fatalf("agent ping without VM.GuestAgent.Audit: %d %q", r.status, r.msg)
	}
	if r := k.do(who, http.MethodPost, "/nodes/pve/qemu/300/agent/exec", url.Values{"command": {"true"}}); r.status != 403 || r.msg != "Permission check failed (/vms/300, VM.GuestAgent.Unrestricted)\n" {
		t.Fatalf("agent exec without VM.GuestAgent.Unrestricted: %d %q", r.status, r.msg)
	}
}

// TestQemu_vmidSpace: VMs and CTs share one VMID space: nextid skips
// both, a create of either kind refuses the other's VMID.
func TestQemu_vmidSpace(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.create(root, "100", nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"101"}})
	var next any
	k.ok(root, http.MethodGet, "/cluster/nextid", nil, &next)
	if next != "102" && next != float64(102) {
		t.Fatalf("nextid = %v, want 102", next)
	}
	if r := k.do(root, http.MethodGet, "/cluster/nextid", url.Values{"vmid": {"101"}}); r.status != 400 || r.errs["vmid"] != "VM 101 already exists" {
		t.Fatalf("nextid vmid=101: %d %v", r.status, r.errs)
	}
	if r := k.do(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"100"}}); r.msg != "unable to create VM 100 - CT 100 already exists on node 'pve'\n" {
		t.Fatalf("VM over a CT: %d %q", r.status, r.msg)
	}
	if r := k.do(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"101"}}); r.msg != "unable to create VM 101 - VM 101 already exists on node 'pve'\n" {
		t.Fatalf("VM over a VM: %d %q", r.status, r.msg)
	}
	p := url.Values{"vmid": {"101"}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}, "rootfs": {"local-lvm:1"}}
	if r := k.do(root, http.MethodPost, "/nodes/pve/lxc", p); r.msg != "VM 101 already exists on node 'pve'\n" {
		t.Fatalf("CT over a VM: %d %q", r.status, r.msg)
	}
	var res []map[string]any
	k.ok(root, http.MethodGet, "/cluster/resources", url.Values{"type": {"vm"}}, &res)
	if len(res) != 2 || res[0]["id"] != "lxc/100" || res[1]["id"] != "qemu/101" || res[1]["type"] != "qemu" || res[1]["status"] != "stopped" {
		t.Fatalf("resources = %v, want lxc/100 then qemu/101", res)
	}
}

// TestQemu_lifecycle: with the state-only runtime, create allocates
// the disks, start/status/stop follow PVE, a change to a running VM is
// pending until it stops, the digest guards PUT, destroy of a running
// VM is refused, and destroy frees the disk volumes.
func TestQemu_lifecycle(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	k.srv.Cluster().SetVMRuntime(nil) // state only, even where CTs run in the view (whose VMs have guests)
	root := k.root()
	create := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	if create.Type != "qmcreate" || !create.has(`  Logical volume "vm-200-disk-0" created.`) {
		t.Fatalf("create task %s:\n%s", create.Type, strings.Join(create.log, "\n"))
	}
	conf := map[string]any{}
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/config", nil, &conf)
	if conf["scsi0"] != "local-lvm:vm-200-disk-0,size=2G" || conf["ide2"] != "local-lvm:vm-200-cloudinit,media=cdrom" ||
		!strings.HasPrefix(conf["net0"].(string), "virtio=BC:24:11:") || conf["boot"] != "order=scsi0;net0" || conf["cores"] != float64(2) {
		t.Fatalf("config = %v", conf)
	}
	disk := filepath.Join(k.dir, "data", "pve", "local-lvm", "vm-200-disk-0")
	if fi, err := os.Stat(disk); err != nil || fi.Size() != 2<<30 {
		t.Fatalf("disk file: %v %v", fi, err)
	}
	if r := k.do(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"memory": {"2048"}, "digest": {"0123456789abcdef0123456789abcdef01234567"}}); r.msg != "detected modified configuration - file changed by other user? Try again.\n" {
		t.Fatalf("stale digest: %d %q", r.status, r.msg)
	}
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"description": {"one"}, "digest": {conf["digest"].(string)}}, nil)

	start := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	if start.Type != "qmstart" {
		t.Fatalf("start task type %s", start.Type)
	}
	var cur map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/status/current", nil, &cur)
	if cur["status"] != "running" || cur["qmpstatus"] != "running" || cur["agent"] != float64(1) || cur["maxmem"] != float64(1<<30) {
		t.Fatalf("status = %v", cur)
	}
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"memory": {"2048"}, "name": {"renamed"}, "cipassword": {"s3cret-pw"}}, nil)
	var pend []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/pending", nil, &pend)
	if !hasPending(pend, "memory", "1024", "2048") || !hasPending(pend, "name", "renamed", nil) || !hasPending(pend, "cipassword", "**********", nil) { // a cloud-init option: fast-plug
		t.Fatalf("pending = %v", pend)
	}
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/config", nil, &conf)
	if conf["cipassword"] != "**********" {
		t.Fatalf("GET config shows cipassword %q, want it hidden", conf["cipassword"])
	}
	if r := k.do(root, http.MethodGet, "/nodes/pve/qemu/200/agent/network-get-interfaces", nil); r.status != 500 || r.msg != "QEMU guest agent is not running\n" {
		t.Fatalf("agent without a guest: %d %q", r.status, r.msg)
	}
	if r := k.do(root, http.MethodDelete, "/nodes/pve/qemu/200", nil); r.status != 500 || r.msg != "VM 200 is running - destroy failed\n" {
		t.Fatalf("destroy running: %d %q", r.status, r.msg)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/stop", nil)
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/config", url.Values{"current": {"1"}}, &conf)
	if conf["memory"] != "2048" && conf["memory"] != float64(2048) {
		t.Fatalf("memory after stop = %v, want the pending 2048", conf["memory"])
	}
	if r := k.do(root, http.MethodPost, "/nodes/pve/qemu/200/status/shutdown", nil); r.msg != "VM 200 not running\n" {
		t.Fatalf("shutdown stopped: %d %q", r.status, r.msg)
	}
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/200", url.Values{"purge": {"1"}})
	var content []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/storage/local-lvm/content", url.Values{"vmid": {"200"}}, &content)
	if len(content) != 0 {
		t.Fatalf("destroy left volumes %v", content)
	}
	if _, err := os.Stat(disk); !os.IsNotExist(err) {
		t.Fatalf("destroy left the disk file: %v", err)
	}
}

// hasPending reports whether pend has key with value and pending.
func hasPending(pend []map[string]any, key string, value, pending any) bool {
	for _, e := range pend {
		if e["key"] == key {
			return e["value"] == value && e["pending"] == pending
		}
	}
	return false
}

// TestQemu_persists: a VM, its pending change and its volumes survive
// the emulator's restart (they are journalled with the core state).
func TestQemu_persists(t *testing.T) {
	t.Parallel()
	opts := Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), NodeMemory: 32 << 30}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	k := &e2e{t: t, srv: a, dir: opts.Dir, hc: a.HTTPClient()}
	k.mustOK(k.root(), http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	k.mustOK(k.root(), http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	k.ok(k.root(), http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"cores": {"4"}}, nil)
	var before map[string]any
	k.ok(k.root(), http.MethodGet, "/nodes/pve/qemu/200/config", nil, &before)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	k = openE2E(t, opts)
	var after map[string]any
	k.ok(k.root(), http.MethodGet, "/nodes/pve/qemu/200/config", nil, &after)
	if after["digest"] != before["digest"] || after["cores"] != float64(4) {
		t.Fatalf("after a restart the config is %v, was %v", after, before)
	}
	var content []map[string]any
	k.ok(k.root(), http.MethodGet, "/nodes/pve/storage/local-lvm/content", url.Values{"vmid": {"200"}}, &content)
	if len(content) != 2 {
		t.Fatalf("after a restart VM 200's volumes are %v, want its disk and cloud-init drive", content)
	}
}

// TestQemu_disks: POST config adds a disk in a qmconfig task; deleting
// it leaves the volume as unused0, deleting unused0 frees it.
func TestQemu_disks(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	add := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/config", url.Values{"scsi1": {"local-lvm:1"}})
	if add.Type != "qmconfig" || !add.has(`  Logical volume "vm-200-disk-1" created.`) {
		t.Fatalf("add disk task %s:\n%s", add.Type, strings.Join(add.log, "\n"))
	}
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"delete": {"scsi1"}}, nil)
	conf := map[string]any{}
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/config", nil, &conf)
	if conf["unused0"] != "local-lvm:vm-200-disk-1" || conf["scsi1"] != nil {
		t.Fatalf("after delete scsi1: %v", conf)
	}
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"delete": {"unused0"}}, nil)
	var content []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/storage/local-lvm/content", url.Values{"vmid": {"200"}}, &content)
	for _, c := range content {
		if c["volid"] == "local-lvm:vm-200-disk-1" {
			t.Fatalf("delete unused0 left the volume: %v", content)
		}
	}
}

// TestQemu_importFrom: an 'import' volume (as the real runtime offers
// the cached image) is copied into the new disk, whose size is the
// source's; a source of another content type is refused by name.
func TestQemu_importFrom(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	src := filepath.Join(t.TempDir(), "img.qcow2")
	data := []byte("QFI\xfb not really an image, but its bytes must arrive")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := k.srv.cluster.OfferImportVolume("local", "img.qcow2", src); err != nil {
		t.Fatal(err)
	}
	p := url.Values{"vmid": {"210"}, "scsi0": {"local-lvm:0,import-from=local:import/img.qcow2"}}
	create := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p)
	if !create.has("importing disk 'local:import/img.qcow2' to VM 210 ...") {
		t.Fatalf("create log:\n%s", strings.Join(create.log, "\n"))
	}
	got, err := os.ReadFile(filepath.Join(k.dir, "data", "pve", "local-lvm", "vm-210-disk-0"))
	if err != nil || string(got) != string(data) {
		t.Fatalf("imported disk = %q, %v; want the source's bytes", got, err)
	}
	if fmt := diskFormat(filepath.Join(k.dir, "data", "pve", "local-lvm", "vm-210-disk-0")); fmt != "qcow2" {
		t.Fatalf("the runtime reads the imported disk as %s, want qcow2", fmt)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"211"}, "scsi0": {"local-lvm:0.125"}})
	p = url.Values{"vmid": {"212"}, "scsi0": {"local-lvm:0,import-from=local-lvm:vm-211-disk-0"}}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p) // an 'images' volume of another VM, as root
	conf := map[string]any{}
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/212/config", nil, &conf)
	if conf["scsi0"] != "local-lvm:vm-212-disk-0,size=128M" {
		t.Fatalf("a disk imported from a 128 MiB image: %v", conf["scsi0"])
	}
	if fi, err := os.Stat(filepath.Join(k.dir, "data", "pve", "local-lvm", "vm-212-disk-0")); err != nil || fi.Size() != 128<<20 {
		t.Fatalf("imported disk file: %v %v", fi, err)
	}
	if r := k.do(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"213"}, "scsi0": {"local-lvm:0,import-from=local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}}); r.status != 400 ||
		r.errs["scsi0"] != "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst has wrong type 'vztmpl' - needs to be 'images' or 'import'" {
		t.Fatalf("import of a template: %d %q %v", r.status, r.msg, r.errs)
	}
}

// TestQemu_memoryAdmission: a VM's whole memory counts at start beside
// the running CTs; a start past the node's memory fails as qemu-server's
// does when QEMU cannot allocate it, its log saying why.
func TestQemu_memoryAdmission(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), NodeMemory: 1 << 30})
	root := k.root()
	k.create(root, "100", url.Values{"memory": {"512"}})
	k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/100/status/start", nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"200"}, "memory": {"768"}})
	full := k.task(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	why := "not enough memory on node 'pve' to start VM 200: it needs 768 MiB, and the 1 guest(s) running there hold 512 of the node's 1024 MiB; " +
		"stop a guest, lower this VM's memory, or run the emulator with more (corral sim serve --node-memory SIZE)"
	if full.ExitStatus != "start failed: QEMU exited with code 1" || !full.has(why) {
		t.Fatalf("start on a full node ended %q:\n%s", full.ExitStatus, strings.Join(full.log, "\n"))
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/100/status/stop", nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	if r := k.task(root, http.MethodPost, "/nodes/pve/lxc/100/status/start", nil); r.ExitStatus != "startup for container '100' failed" {
		t.Fatalf("a CT start beside the running VM ended %q", r.ExitStatus)
	}
}

// TestQemu_pool: a VM created into a pool is its member: the pool is
// not empty, and a purge takes the VM out of it.
func TestQemu_pool(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"apps"}}, nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"200"}, "pool": {"apps"}})
	var pool struct {
		Members []map[string]any `json:"members"`
	}
	k.ok(root, http.MethodGet, "/pools/apps", nil, &pool)
	if len(pool.Members) != 1 || pool.Members[0]["id"] != "qemu/200" {
		t.Fatalf("pool members = %v, want qemu/200", pool.Members)
	}
	if r := k.do(root, http.MethodDelete, "/pools/apps", nil); r.status != 500 || !strings.Contains(r.msg, "pool 'apps' is not empty (contains VM 200)") {
		t.Fatalf("delete a pool holding a VM: %d %q", r.status, r.msg)
	}
	// Destroy drops the pool membership with or without purge, as
	// qemu-server's remove_vm_access does.
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/200", nil)
	k.ok(root, http.MethodDelete, "/pools/apps", nil, nil)
}
