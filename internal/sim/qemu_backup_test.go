package sim

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// vmDiskPattern is the known content the VM backup tests put on a
// disk: a block at its start and one 1 GiB in, the rest a hole.
var vmDiskPattern = map[int64][]byte{0: []byte("boot sector of vm\n"), 1 << 30: bytes.Repeat([]byte("data"), 40000)}

// writeVMDisk puts vmDiskPattern into the disk file of volume name on
// local-lvm.
func writeVMDisk(t *testing.T, k *e2e, name string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(k.dir, "data", "pve", "local-lvm", name), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off, b := range vmDiskPattern {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
}

// checkVMDisk checks a disk file of local-lvm: size bytes long, with
// vmDiskPattern and zeros between (read around the pattern only).
func checkVMDisk(t *testing.T, k *e2e, name string, size int64) {
	t.Helper()
	f, err := os.Open(filepath.Join(k.dir, "data", "pve", "local-lvm", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != size {
		t.Fatalf("%s: %v, want %d bytes (%v)", name, fi.Size(), size, err)
	}
	for off, want := range vmDiskPattern {
		got := make([]byte, len(want)+4096)
		if _, err := f.ReadAt(got, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:len(want)], want) || !bytes.Equal(got[len(want):], make([]byte, 4096)) {
			t.Fatalf("%s differs at %d", name, off)
		}
	}
	zero := make([]byte, 1<<20)
	if _, err := f.ReadAt(zero, 1<<20); err != nil || !bytes.Equal(zero, make([]byte, 1<<20)) {
		t.Fatalf("%s has data where the original had none (%v)", name, err)
	}
}

// inOrder reports whether log holds lines in that order (others between).
func inOrder(log []string, lines ...string) bool {
	i := 0
	for _, l := range log {
		if i < len(lines) && l == lines[i] {
			i++
		}
	}
	return i == len(lines)
}

// TestQemuBackup_snapshotFreezes: a snapshot-mode backup of a running VM
// with the agent freezes its filesystems through the agent around the
// copy, with qga_fs_freeze's lines; the archive is listed as a qemu
// backup and its config names the disk.
func TestQemuBackup_snapshotFreezes(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	rt := model.NewAgentVMRuntime()
	k.srv.Cluster().SetVMRuntime(rt)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	writeVMDisk(t, k, "vm-200-disk-0")
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)

	task := k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"200"}, "mode": {"snapshot"}, "storage": {"local"}, "compress": {"zstd"}})
	if task.Type != "vzdump" || task.ID != "200" {
		t.Fatalf("task %s:%s", task.Type, task.ID)
	}
	if !inOrder(task.log, "INFO: Starting Backup of VM 200 (qemu)", "INFO: status = running", "INFO: VM Name: vm200",
		"INFO: include disk 'scsi0' 'local-lvm:vm-200-disk-0' 2G", "INFO: backup mode: snapshot",
		"INFO: issuing guest-agent 'fs-freeze' command", "INFO: starting backup via QMP command",
		"INFO: issuing guest-agent 'fs-thaw' command", "INFO: resuming VM again", "INFO: Backup job finished successfully") {
		t.Fatalf("log:\n%s", strings.Join(task.log, "\n"))
	}
	calls := rt.Calls(200)
	if i := slices.Index(calls, "fsfreeze-freeze"); i < 0 || !slices.Contains(calls[i:], "fsfreeze-thaw") {
		t.Fatalf("runtime calls %v: want a freeze then a thaw", calls)
	}
	var content []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/storage/local/content", url.Values{"content": {"backup"}}, &content)
	if len(content) != 1 || content[0]["subtype"] != "qemu" || content[0]["format"] != "vma.zst" || content[0]["vmid"] != float64(200) ||
		!strings.HasPrefix(content[0]["volid"].(string), "local:backup/vzdump-qemu-200-") {
		t.Fatalf("content %v", content)
	}
	// Sparse: 2 GiB of disk with ~160 KB of data makes a small archive.
	if size := content[0]["size"].(float64); size <= 0 || size > 1<<20 {
		t.Fatalf("archive size %v", size)
	}
	var conf string
	k.ok(root, http.MethodGet, "/nodes/pve/vzdump/extractconfig", url.Values{"volume": {content[0]["volid"].(string)}}, &conf)
	if !strings.Contains(conf, "#qmdump#map:scsi0:drive-scsi0:local-lvm:raw:\n") || !strings.Contains(conf, "name: vm200\n") || strings.Contains(conf, "lock:") {
		t.Fatalf("extracted config:\n%s", conf)
	}
	var status map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/status/current", nil, &status)
	if status["status"] != "running" || status["lock"] != nil {
		t.Fatalf("after the backup: %v", status)
	}
}

// TestQemuBackup_agentSilent: a VM whose agent does not answer is
// backed up without a freeze, with PVE's line saying why.
func TestQemuBackup_agentSilent(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	rt := model.NewAgentVMRuntime()
	k.srv.Cluster().SetVMRuntime(rt)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	rt.Mute(200, true)
	task := k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"200"}, "mode": {"snapshot"}, "storage": {"local"}})
	if !task.has("INFO: skipping guest filesystem freeze - agent configured but not running?") || task.has("INFO: issuing guest-agent 'fs-freeze' command") {
		t.Fatalf("log:\n%s", strings.Join(task.log, "\n"))
	}
	if slices.Contains(rt.Calls(200), "fsfreeze-freeze") {
		t.Fatalf("froze a silent agent: %v", rt.Calls(200))
	}
}

// TestQemuBackup_stopMode: stop mode shuts a running VM down for the
// copy and starts it again; a stopped VM is backed up in stop mode
// without a start.
func TestQemuBackup_stopMode(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	rt := model.NewAgentVMRuntime()
	k.srv.Cluster().SetVMRuntime(rt)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	task := k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"200"}, "mode": {"stop"}, "storage": {"local"}})
	if !inOrder(task.log, "INFO: backup mode: stop", "INFO: stopping virtual guest", "INFO: starting kvm to execute backup task",
		"INFO: starting backup via QMP command") || task.has("INFO: issuing guest-agent 'fs-freeze' command") {
		t.Fatalf("log:\n%s", strings.Join(task.log, "\n"))
	}
	if calls := rt.Calls(200); !inOrder(calls, "start", "shutdown", "start") {
		t.Fatalf("runtime calls %v", calls)
	}
	var status map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/status/current", nil, &status)
	if status["status"] != "running" {
		t.Fatalf("after a stop-mode backup: %v", status)
	}
	task = k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"200"}, "mode": {"suspend"}, "storage": {"local"}})
	resumed := slices.ContainsFunc(task.log, func(l string) bool { return strings.HasPrefix(l, "INFO: resuming VM again after ") })
	if !resumed || !inOrder(task.log, "INFO: backup mode: suspend", "INFO: suspending guest", "INFO: starting backup via QMP command", "INFO: resume vm") {
		t.Fatalf("suspend mode log:\n%s", strings.Join(task.log, "\n"))
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/stop", nil)
	task = k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"200"}, "mode": {"snapshot"}, "storage": {"local"}})
	if !inOrder(task.log, "INFO: status = stopped", "INFO: backup mode: stop", "INFO: starting kvm to execute backup task", "INFO: stopping kvm after backup task") {
		t.Fatalf("log:\n%s", strings.Join(task.log, "\n"))
	}
}

// vmBackupOf backs VM vmid up to local (zstd) and returns the volid.
func vmBackupOf(t *testing.T, k *e2e, vmid string) string {
	t.Helper()
	task := k.mustOK(k.root(), http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {vmid}, "mode": {"snapshot"}, "storage": {"local"}, "compress": {"zstd"}})
	for _, l := range task.log {
		if _, name, ok := strings.Cut(l, "creating vzdump archive '/var/lib/vz/dump/"); ok {
			return "local:backup/" + strings.TrimSuffix(name, "'")
		}
	}
	t.Fatalf("no archive in the log:\n%s", strings.Join(task.log, "\n"))
	return ""
}

// vmConfigOf is GET config of VM vmid, without its digest.
func vmConfigOf(t *testing.T, k *e2e, vmid string) map[string]any {
	t.Helper()
	var conf map[string]any
	k.ok(k.root(), http.MethodGet, "/nodes/pve/qemu/"+vmid+"/config", nil, &conf)
	delete(conf, "digest")
	return conf
}

// TestQemuRestore_roundTrip: a VM backed up with the agent's freeze,
// destroyed and restored into a new VMID has the same config (its
// volumes renamed, a new vmgenid) and the same disk content; unique=1
// gives new MACs; an existing VMID is refused without force.
func TestQemuRestore_roundTrip(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	k.srv.Cluster().SetVMRuntime(model.NewAgentVMRuntime())
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	writeVMDisk(t, k, "vm-200-disk-0")
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	volid := vmBackupOf(t, k, "200")
	orig := vmConfigOf(t, k, "200")
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/stop", nil)
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/200", nil)

	task := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"201"}, "archive": {volid}})
	if task.Type != "qmrestore" || task.ID != "201" || !task.has("new volume ID is 'local-lvm:vm-201-disk-0'") ||
		!task.has("map 'drive-scsi0' to '/dev/pve/vm-201-disk-0' (write zeros = 0)") {
		t.Fatalf("restore task %s:%s\n%s", task.Type, task.ID, strings.Join(task.log, "\n"))
	}
	got := vmConfigOf(t, k, "201")
	for key, want := range orig {
		switch key {
		case "scsi0", "ide2":
			want = strings.ReplaceAll(want.(string), "vm-200-", "vm-201-")
		case "vmgenid":
			if got[key] == want {
				t.Errorf("vmgenid kept: %v", want)
			}
			continue
		}
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	if len(got) != len(orig) {
		t.Errorf("restored config %v\noriginal %v", got, orig)
	}
	checkVMDisk(t, k, "vm-201-disk-0", 2<<30)

	if r := k.do(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"201"}, "archive": {volid}}); r.status != 500 || r.msg != "unable to restore VM 201 - VM 201 already exists on node 'pve'\n" {
		t.Fatalf("restore over an existing VM: %d %q", r.status, r.msg)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"201"}, "archive": {volid}, "force": {"1"}})
	if c := vmConfigOf(t, k, "201"); c["scsi0"] != got["scsi0"] || c["unused0"] != nil {
		t.Fatalf("forced restore: %v", c)
	}
	checkVMDisk(t, k, "vm-201-disk-0", 2<<30)

	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"202"}, "archive": {volid}, "unique": {"1"}, "start": {"1"}, "memory": {"2048"}})
	u := vmConfigOf(t, k, "202")
	var status map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/202/status/current", nil, &status)
	if status["status"] != "running" || u["memory"] != float64(2048) && u["memory"] != "2048" {
		t.Fatalf("restore with start and memory: %v, memory %v", status["status"], u["memory"])
	}
	if u["net0"] == orig["net0"] || !strings.HasPrefix(u["net0"].(string), "virtio=BC:24:11:") || u["smbios1"] == orig["smbios1"] {
		t.Fatalf("unique restore: net0 %v (was %v), smbios1 %v (was %v)", u["net0"], orig["net0"], u["smbios1"], orig["smbios1"])
	}
}

// TestQemuBackup_permissionsAndSelection: VM.Backup on the VM and
// Datastore.AllocateSpace on the storage as for CTs; a job of a CT and a
// VM backs both up with their own archive kinds; pool and all select
// VMs too.
func TestQemuBackup_permissionsAndSelection(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	k.srv.Cluster().SetVMRuntime(model.NewAgentVMRuntime())
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"vms"}}, nil)
	p := vmParams("201")
	p.Set("pool", "vms")
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p)

	audit := limitedUser(k, "audit@pve", "VM.Audit,Datastore.AllocateSpace", "/")
	if task := k.task(audit, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"200"}}); task.ExitStatus != "403 Permission check failed (/vms/200, VM.Backup)" {
		t.Errorf("backup without VM.Backup: %q", task.ExitStatus)
	}
	nospace := limitedUser(k, "nospace@pve", "VM.Backup", "/vms/200")
	if r := k.do(nospace, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"200"}, "storage": {"local"}}); r.status != 403 || r.msg != "Permission check failed (/storage/local, Datastore.AllocateSpace)\n" {
		t.Errorf("backup without Datastore.AllocateSpace: %d %q", r.status, r.msg)
	}

	task := k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"pool": {"vms"}, "storage": {"local"}})
	if task.ID != "201" || !task.has("INFO: Starting Backup of VM 201 (qemu)") || task.has("INFO: Starting Backup of VM 200 (qemu)") {
		t.Fatalf("pool job %s:\n%s", task.ID, strings.Join(task.log, "\n"))
	}
	if r := k.do(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"pool": {"nope"}}); r.status != 500 || r.msg != "pool 'nope' does not exist\n" {
		t.Errorf("unknown pool: %d %q", r.status, r.msg)
	}
	task = k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"all": {"1"}, "exclude": {"201"}, "storage": {"local"}})
	if !task.has("INFO: Starting Backup of VM 200 (qemu)") || task.has("INFO: Starting Backup of VM 201 (qemu)") {
		t.Fatalf("all without 201:\n%s", strings.Join(task.log, "\n"))
	}

	k.create(root, "100", nil)
	task = k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"100,200"}, "storage": {"local"}, "compress": {"zstd"}})
	if task.ID != "" || !inOrder(task.log, "INFO: Starting Backup of VM 100 (lxc)", "INFO: Starting Backup of VM 200 (qemu)") {
		t.Fatalf("mixed job %q:\n%s", task.ID, strings.Join(task.log, "\n"))
	}
	var content []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/storage/local/content", url.Values{"content": {"backup"}}, &content)
	kinds := map[string]int{}
	for _, c := range content {
		kinds[c["subtype"].(string)+" "+c["format"].(string)]++
	}
	if kinds["lxc tar.zst"] != 1 || kinds["qemu vma.zst"] != 1 || kinds["qemu vma"] != 2 {
		t.Fatalf("backups %v", kinds)
	}
}
