package model

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// VM is one QEMU guest: /etc/pve/qemu-server/<vmid>.conf with its
// pending section, and whether it runs. VMs share the VMID space with
// the CTs (State.Guests): a VMID names one guest of either kind, as
// pmxcfs's vmlist does.
type VM struct {
	VMID          int               `json:"vmid"`
	Node          string            `json:"node"`
	Config        map[string]string `json:"config"`
	Pending       map[string]string `json:"pending,omitempty"`
	PendingDelete map[string]bool   `json:"pending_delete,omitempty"`
	Running       bool              `json:"running"`
	StartedAt     int64             `json:"started_at,omitempty"`
	PID           int               `json:"pid,omitempty"`
	// Snapshots are the [snapname] sections (qemu_snapshot.go).
	Snapshots map[string]*Snapshot `json:"snapshots,omitempty"`
	// CloudInit is the [special:cloudinit] section, nil when there is
	// none (qemu_cloudinit_record.go).
	CloudInit *VMCloudInitRecord `json:"cloudinit,omitempty"`
}

// Lock is the VM's config lock ("" when none).
func (vm *VM) Lock() string { return vm.Config["lock"] }

// vmParts is what every VM part holds (qemu_*.go): the State's lock and
// the State, the clock, the node check, the storage layer, tasks, the
// journal, qemu-server's config flocks and the runtime, with the lookups
// they all make (vmLocked, the volume drives). Each part embeds it by
// value, as the firewall's parts embed fwParts; it holds no *Cluster.
// VMs are journalled with the core state (markCore): there are few, and
// the CT journal's per-guest records stay the CTs' own.
type vmParts struct {
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	ctx     context.Context // the cluster's life: flock waits end with it
	nodes   interface{ checkNodeLocked(node string) error }
	storage qemuStorage
	tasks   interface {
		spawn(auth Auth, node, typ, id string, fn func(w *Worker) error) string
		duration(typ string) time.Duration
	}
	journal interface {
		markCore()
		markVolume(node, volid string)
		saveLocked() error
	}
	// vmLocks are qemu-server's config flocks (lock-<vmid>.conf).
	vmLocks *configLocks
	// vmRuntimeHook is the runtime the Cluster's SetVMRuntime installs,
	// shared by every part.
	*vmRuntimeHook
}

// vmStarter is what a VM part that starts a VM within its own task
// (create's, restore's and rollback's start=1) needs of vmPower.
type vmStarter interface {
	startTask(w *Worker, node string, vmid int) error
}

// qemuStorage is what the VM parts need of storageLayer.
type qemuStorage interface {
	storageCheckEnabledLocked(sid, node string) (*Storage, error)
	allocImageLocked(node string, s *Storage, vmid int, name, format string, size int64) (*Volume, []string, error)
	volumePath(node, storage, name string) string
	freeVolumeLocked(node, volid string) error
	freeDiskNumberLocked(node, sid string, vmid int) int
	addVolumeLocked(node string, v *Volume)
	hostPath(s *Storage, name string) string
	snapshotPath(node string, v *Volume, snap string) string
	renameVolumeLocked(node, volid, newName string, owner int) string
}

// vmLocked returns VM vmid on node, or qemu-server's load_config error.
func (q *vmParts) vmLocked(node string, vmid int) (*VM, error) {
	vm := q.state().VMs[vmid]
	if vm == nil || vm.Node != node {
		return nil, Failf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist\n", node, vmid)
	}
	return vm, nil
}

// vmCheckLock is QemuConfig check_lock.
func vmCheckLock(vm *VM) error {
	if l := vm.Lock(); l != "" {
		return Failf("VM is locked (%s)\n", l)
	}
	return nil
}

// changedLocked marks the VMs changed and saves (stateMu held).
func (q *vmParts) changedLocked() error {
	q.journal.markCore()
	return q.journal.saveLocked()
}

// vmConfigText is the config file as qemu-server's write_vm_config
// writes it: the description as '#' lines, the keys sorted, then the
// [PENDING] section with its delete line, the [special:cloudinit]
// section if the VM has a cloud-init drive, and the snapshots. The
// digest is its SHA-1.
func vmConfigText(vm *VM) string {
	var b strings.Builder
	writeSection := func(conf map[string]string) {
		if d := conf["description"]; d != "" {
			for line := range strings.SplitSeq(d, "\n") {
				b.WriteString("#" + line + "\n")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(conf)) {
			if k != "description" {
				fmt.Fprintf(&b, "%s: %s\n", k, conf[k])
			}
		}
	}
	writeSection(vm.Config)
	if len(vm.Pending) > 0 || len(vm.PendingDelete) > 0 {
		b.WriteString("\n[PENDING]\n")
		if len(vm.PendingDelete) > 0 {
			var del []string
			for _, k := range slices.Sorted(maps.Keys(vm.PendingDelete)) {
				if vm.PendingDelete[k] {
					k = "!" + k
				}
				del = append(del, k)
			}
			fmt.Fprintf(&b, "delete: %s\n", strings.Join(del, ","))
		}
		writeSection(vm.Pending)
	}
	if vm.CloudInit != nil && vmHasCloudInit(vm.Config) {
		b.WriteString("\n[special:cloudinit]\n")
		writeSection(vm.CloudInit.Values)
	}
	for _, name := range slices.Sorted(maps.Keys(vm.Snapshots)) {
		b.WriteString("\n[" + name + "]\n")
		writeSection(vm.Snapshots[name].Config)
	}
	return b.String()
}

// vmDigest is the config digest GET config answers and PUT checks.
func vmDigest(vm *VM) string {
	sum := sha1.Sum([]byte(vmConfigText(vm)))
	return hex.EncodeToString(sum[:])
}

// vmVolDrive is one drive of a config that names a volume of the node.
type vmVolDrive struct {
	key   string
	drive PropString
	vol   *Volume
}

// vmVolumeDrivesLocked lists conf's drives that are not cdroms (the
// cloud-init drive is one) and whose volume exists, by key, as
// foreach_volume visits them for a snapshot.
func (q *vmParts) vmVolumeDrivesLocked(node string, conf map[string]string) []vmVolDrive {
	st := q.state()
	var out []vmVolDrive
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		if !vmDriveRE.MatchString(k) {
			continue
		}
		d, err := ParseProp(conf[k], "file")
		if err != nil || vmDriveIsCdrom(d) {
			continue
		}
		if v := st.Volumes[st.volKey(node, d["file"])]; v != nil {
			out = append(out, vmVolDrive{key: k, drive: d, vol: v})
		}
	}
	return out
}

// vmSnapPath is where the emulator keeps snapshot snap of v: a sparse
// copy of the data file where the storage layer keeps an LV
// snap_<vol>_<snap> (for a qcow2 file, its internal snapshot), so that
// freeing the volume frees it.
func (q *vmParts) vmSnapPath(node string, v *Volume, snap string) string {
	return q.storage.snapshotPath(node, v, snap)
}

// vmVolumeDrivesOrCloudInitLocked is vmVolumeDrivesLocked with the
// cloud-init drive, which a clone copies (drive_is_cdrom($drive, 1)).
func (q *vmParts) vmVolumeDrivesOrCloudInitLocked(node string, conf map[string]string) []vmVolDrive {
	st := q.state()
	out := q.vmVolumeDrivesLocked(node, conf)
	for _, k := range sortedConfigKeys(conf) {
		if !vmDriveRE.MatchString(k) {
			continue
		}
		d, err := ParseProp(conf[k], "file")
		if err != nil || !strings.Contains(d["file"], "-cloudinit") {
			continue
		}
		if v := st.Volumes[st.volKey(node, d["file"])]; v != nil {
			out = append(out, vmVolDrive{key: k, drive: d, vol: v})
		}
	}
	return out
}
