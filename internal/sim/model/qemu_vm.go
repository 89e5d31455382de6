package model

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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
}

// Lock is the VM's config lock ("" when none).
func (vm *VM) Lock() string { return vm.Config["lock"] }

// qemuVMs serves the qemu API (qemu_*.go): create, config, power,
// destroy, the guest agent. It holds no *Cluster: the State's lock and
// the State, and one narrow field per part it calls. Cluster embeds it.
// VMs are journalled with the core state (markCore): there are few, and
// the CT journal's per-guest records stay the CTs' own.
type qemuVMs struct {
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	ctx     context.Context // the cluster's life: flock waits end with it
	version string
	nodes   interface{ checkNodeLocked(node string) error }
	storage qemuStorage
	// volumes (ctConfig) is check_volume_access (a restore's archive)
	// and check_bridge_access (a restored NIC's bridge).
	volumes interface {
		ctCheckVolumeAccessLocked(auth Auth, vmid int, volid, typ string) error
		ctCheckBridgeAccessLocked(auth Auth, value string) error
	}
	tasks interface {
		spawn(auth Auth, node, typ, id string, fn func(w *Worker) error) string
		duration(typ string) time.Duration
	}
	journal interface {
		markCore()
		markVolume(node, volid string)
		saveLocked() error
	}
	// admit is memory admission (admission.go), the Cluster's own: it
	// counts the running CTs and VMs of the node.
	admit func(w *Worker, node, kind string, vmid int, need int64) error
	// vmLocks are qemu-server's config flocks (lock-<vmid>.conf).
	vmLocks *configLocks

	// bases is vdisk_create_base (the CTs' template conversion does the
	// same to a volume), renames rename_volume (as a CT's reassign).
	bases interface {
		createBaseLocked(node, volid string) (string, []string, error)
	}
	renames interface {
		canRenameLocked(node, volid string) bool
		renameVolumeLocked(node, volid string, target int) (string, []string, error)
	}

	rtMu    sync.Mutex
	runtime VMRuntime // SetVMRuntime; nil: stateOnlyVMRuntime
}

// qemuStorage is what qemuVMs needs of storageLayer.
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

// wireQemu wires qemuVMs: the node check, the storage layer, tasks, the
// journal and the Cluster's memory admission.
func wireQemu(c *Cluster) {
	c.qemuVMs = qemuVMs{
		stateMu: &c.mu,
		state:   func() *State { return c.st },
		clock:   c.now,
		ctx:     c.ctx,
		version: c.opts.Version,
		nodes:   &c.guests,
		storage: &c.storage,
		volumes: &c.ctConfig,
		tasks:   &c.taskRunner,
		journal: &c.persistence,
		admit:   c.admitBytesLocked,
		bases:   &c.ctCreator,
		renames: &c.ctDisks,
		vmLocks: &configLocks{m: map[int]chan struct{}{}, file: "/var/lock/qemu-server/lock-%d.conf"},
	}
}

// vmLocked returns VM vmid on node, or qemu-server's load_config error.
func (q *qemuVMs) vmLocked(node string, vmid int) (*VM, error) {
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
func (q *qemuVMs) changedLocked() error {
	q.journal.markCore()
	return q.journal.saveLocked()
}

// vmConfigText is the config file as qemu-server's write_vm_config
// writes it: the description as '#' lines, the keys sorted, then the
// [PENDING] section with its delete line. The digest is its SHA-1.
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
