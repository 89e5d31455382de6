package sim

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestQemu_stateDisks: efidisk0 and tpmstate0 are allocated as
// qemu-server's create_disks allocates them (the vars template's size,
// 4 MiB for the TPM, an LV rounded to its 4 MiB extent), after the
// buses' disks, never in the boot order; the start warns as vm_start
// does; they wait in pending on a running VM and a replaced one stays
// as unusedN; destroy frees them.
func TestQemu_stateDisks(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	p := vmParams("200")
	p.Set("bios", "ovmf")
	p.Set("efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=1")
	p.Set("tpmstate0", "local-lvm:1,version=v2.0")
	create := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p)
	if !create.has("  Rounding up size to full physical extent 4.00 MiB") || !create.has(`  Logical volume "vm-200-disk-2" created.`) {
		t.Fatalf("create task:\n%s", strings.Join(create.log, "\n"))
	}
	conf := k.vmConfig("200")
	for key, want := range map[string]string{
		"scsi0":     "local-lvm:vm-200-disk-0,size=2G",
		"efidisk0":  "local-lvm:vm-200-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M",
		"tpmstate0": "local-lvm:vm-200-disk-2,size=4M,version=v2.0",
		"boot":      "order=scsi0;net0",
	} {
		if conf[key] != want {
			t.Errorf("%s = %v, want %s", key, conf[key], want)
		}
	}
	start := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	if start.ExitStatus != "OK" {
		t.Fatalf("start of a VM with 2023 keys: %s\n%s", start.ExitStatus, strings.Join(start.log, "\n"))
	}
	// A running VM takes neither at once (vmconfig_hotplug_pending skips them).
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"delete": {"efidisk0"}}, nil)
	if r := k.do(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"tpmstate0": {"local-lvm:vm-200-disk-2,version=v1.2"}}); r.status != 500 || r.msg != "cannot change TPM state version after creation\n" {
		t.Fatalf("a TPM version change: %d %q", r.status, r.msg)
	}
	var pend []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/200/pending", nil, &pend)
	if !hasDelete(pend, "efidisk0") {
		t.Fatalf("pending after delete efidisk0 on a running VM: %v", pend)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/stop", nil)
	start = k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	if start.ExitStatus != "WARNINGS: 1" || !start.has("WARN: no efidisk configured! Using temporary efivars disk.") {
		t.Fatalf("start of OVMF without efidisk0: %s\n%s", start.ExitStatus, strings.Join(start.log, "\n"))
	}
	if conf := k.vmConfig("200"); conf["efidisk0"] != nil || conf["unused0"] != "local-lvm:vm-200-disk-1" {
		t.Fatalf("after the pending delete: efidisk0 %v, unused0 %v", conf["efidisk0"], conf["unused0"])
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/stop", nil)
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/200", nil)
	var content []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/storage/local-lvm/content", url.Values{"vmid": {"200"}}, &content)
	if len(content) != 0 {
		t.Fatalf("destroy left %v", content)
	}
}

// hasDelete reports whether pend marks key deleted.
func hasDelete(pend []map[string]any, key string) bool {
	for _, e := range pend {
		if e["key"] == key {
			return e["delete"] == float64(1)
		}
	}
	return false
}

// TestQemu_stateDiskSizes: the size each storage gives a new EFI vars
// or TPM state volume, and create_vm's checks of them.
func TestQemu_stateDiskSizes(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	for i, tc := range []struct {
		key, value string
		want       string // the drive in the config, or
		param      string // the 400's message for key
	}{
		{"efidisk0", "nfs:1", "nfs:%d/vm-%d-disk-0.raw,size=128K", ""},
		{"efidisk0", "nfs:1,efitype=4m,format=qcow2", "nfs:%d/vm-%d-disk-0.qcow2,efitype=4m,size=528K", ""},
		{"efidisk0", "local-lvm:1,efitype=2m", "local-lvm:vm-%d-disk-0,efitype=2m,size=4M", ""},
		{"tpmstate0", "nfs:4", "nfs:%d/vm-%d-disk-0.raw,size=4M", ""},
		{"efidisk0", "local-lvm:0,import-from=local-lvm:vm-999-disk-0", "", "need to specify 'efitype' when using 'import-from'"},
		{"tpmstate0", "local-lvm:0,import-from=local-lvm:vm-999-disk-0", "", "need to specify 'version' when using 'import-from'"},
	} {
		vmid := 300 + i
		id := strconv.Itoa(vmid)
		params := url.Values{"vmid": {id}, tc.key: {tc.value}}
		if tc.param != "" {
			if r := k.do(root, http.MethodPost, "/nodes/pve/qemu", params); r.status != 400 || r.errs[tc.key] != tc.param {
				t.Errorf("%s=%s: %d %q %v, want 400 %q", tc.key, tc.value, r.status, r.msg, r.errs, tc.param)
			}
			continue
		}
		k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", params)
		want := strings.ReplaceAll(tc.want, "%d", id)
		if conf := k.vmConfig(id); conf[tc.key] != want {
			t.Errorf("%s=%s: %v, want %s", tc.key, tc.value, conf[tc.key], want)
		}
	}
}

// TestQemu_stateDisksOps: the generic disk operations carry efidisk0
// and tpmstate0 with their data: a snapshot, a backup and its restore,
// a full clone and a move to a file storage (which allocate the vars'
// size anew, as clone_disk does).
func TestQemu_stateDisksOps(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"200"}, "bios": {"ovmf"}, "scsi0": {"local-lvm:1"},
		"efidisk0": {"local-lvm:1,efitype=4m"}, "tpmstate0": {"local-lvm:1,version=v2.0"}})
	vars := []byte("efi vars!")
	k.writeDisk("pve", "local-lvm:vm-200-disk-1", vars)
	snap := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"s1"}})
	if !snap.has("snapshotting 'drive-efidisk0' (local-lvm:vm-200-disk-1)") || !snap.has("snapshotting 'drive-tpmstate0' (local-lvm:vm-200-disk-2)") {
		t.Fatalf("snapshot task:\n%s", strings.Join(snap.log, "\n"))
	}
	backup := k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"200"}, "storage": {"local"}, "compress": {"zstd"}})
	if !backup.has("INFO: include disk 'efidisk0' 'local-lvm:vm-200-disk-1' 4M") || !backup.has("INFO: include disk 'tpmstate0' 'local-lvm:vm-200-disk-2' 4M") {
		t.Fatalf("backup task:\n%s", strings.Join(backup.log, "\n"))
	}
	volid := ""
	for _, l := range backup.log {
		if _, name, ok := strings.Cut(l, "creating vzdump archive '/var/lib/vz/dump/"); ok {
			volid = "local:backup/" + strings.TrimSuffix(name, "'")
		}
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", url.Values{"vmid": {"201"}, "archive": {volid}})
	restored := k.vmConfig("201")
	// restore_allocate_devices allocates in sorted order: efidisk0 first.
	if restored["efidisk0"] != "local-lvm:vm-201-disk-0,efitype=4m,size=4M" || restored["tpmstate0"] != "local-lvm:vm-201-disk-2,size=4M,version=v2.0" {
		t.Fatalf("restored efidisk0 %v, tpmstate0 %v", restored["efidisk0"], restored["tpmstate0"])
	}
	if got := k.readDisk("pve", "local-lvm:vm-201-disk-0", len(vars)); string(got) != string(vars) {
		t.Fatalf("restored vars %q", got)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/clone", url.Values{"newid": {"202"}, "full": {"1"}, "storage": {"nfs"}, "format": {"raw"}})
	clone := k.vmConfig("202")
	efi, _ := clone["efidisk0"].(string)
	file, _, _ := strings.Cut(efi, ",")
	if !strings.HasPrefix(efi, "nfs:202/vm-202-disk-") || !strings.HasSuffix(efi, ".raw,efitype=4m,size=528K") {
		t.Fatalf("the clone's efidisk0 %v", efi)
	}
	if got := k.readDisk("pve", file, len(vars)); string(got) != string(vars) {
		t.Fatalf("the clone's vars %q", got)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/move_disk", url.Values{"disk": {"efidisk0"}, "storage": {"nfs"}, "format": {"qcow2"}})
	moved := k.vmConfig("200")
	if moved["efidisk0"] != "nfs:200/vm-200-disk-0.qcow2,efitype=4m,size=528K" || moved["unused0"] != "local-lvm:vm-200-disk-1" {
		t.Fatalf("after move_disk: efidisk0 %v, unused0 %v", moved["efidisk0"], moved["unused0"])
	}
}
