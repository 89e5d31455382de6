package model

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
)

// VM snapshots: /nodes/{node}/qemu/{vmid}/snapshot (qemu-server
// API2/Qemu.pm snapshot, snapshot_list, rollback, delsnapshot; QemuConfig
// and pve-guest-common AbstractConfig snapshot_create, snapshot_delete,
// snapshot_rollback). A snapshot is a [snapname] section of the config
// (parent, snaptime, description) plus one storage snapshot per disk;
// "lock: snapshot" holds the VM while the task takes them, and a running
// VM's agent freezes its filesystems meanwhile. The VM state (vmstate=1
// on a running VM) is not served: the emulator refuses it.

// vmSnapshots takes, lists, changes, deletes and rolls back a VM's
// snapshots and their storage snapshots (qemu_snapshot.go,
// qemu_snapdisk.go, qemu_rollback.go).
type vmSnapshots struct {
	vmParts
	// power (vmPower) starts the VM after a rollback with start=1.
	power vmStarter
}

// SnapshotVM is POST snapshot: task qmsnapshot.
func (q *vmSnapshots) SnapshotVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	name := params["snapname"]
	if name == "current" {
		return "", Failf("unable to use snapshot name 'current' (reserved name)\n")
	}
	if strings.ToLower(name) == "pending" {
		return "", Failf("unable to use snapshot name 'pending' (reserved name)\n")
	}
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return "", err
	}
	if isTrue(params["vmstate"]) && vm.Running {
		return "", Failf("saving the VM state (vmstate) is not served by the emulator: take the snapshot without vmstate\n")
	}
	return q.tasks.spawn(auth, node, "qmsnapshot", strconv.Itoa(vmid), func(w *Worker) error {
		release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
		if err != nil {
			return err
		}
		defer release()
		freeze := false
		if err := w.Do(func(st *State) error {
			var err error
			freeze, err = q.vmSnapshotPrepareLocked(node, vmid, name, params["description"])
			return err
		}); err != nil {
			return err
		}
		thaw := q.vmSnapshotFreeze(w, vmid, freeze)
		err = q.vmSnapshotDisks(w, node, vmid, name)
		thaw()
		if err == nil {
			err = w.Do(func(st *State) error { return q.vmSnapshotCommitLocked(node, vmid, name) })
		}
		if err != nil {
			w.cleanup(func(st *State) { q.vmSnapshotAbortLocked(node, vmid, name) })
		}
		return err
	}), nil
}

// vmSnapshotFreeze is __snapshot_freeze around the disks' snapshots of
// a running VM with the agent: when the agent answers its ping, its
// filesystems are frozen until the returned thaw. A failure only warns,
// as in PVE; the state-only runtime has no agent, so nothing freezes.
func (q *vmSnapshots) vmSnapshotFreeze(w *Worker, vmid int, freeze bool) (thaw func()) {
	rt := q.vmRuntime()
	if !freeze {
		return func() {}
	}
	if _, err := rt.Agent(vmid, "ping"); err != nil {
		return func() {}
	}
	if _, err := rt.Agent(vmid, "fsfreeze-freeze"); err != nil {
		w.Warn("guest-fsfreeze-freeze problems - %s", strings.TrimSuffix(errText(err), "\n"))
	}
	return func() {
		if _, err := rt.Agent(vmid, "fsfreeze-thaw"); err != nil {
			w.Warn("guest-fsfreeze-thaw problems - %s", strings.TrimSuffix(errText(err), "\n"))
		}
	}
}

// vmSnapshotPrepareLocked is __snapshot_prepare: the checks, then the
// section with snapstate "prepare" and the VM locked "snapshot". It
// reports whether the VM runs with the agent (whose filesystems the
// snapshot freezes).
func (q *vmSnapshots) vmSnapshotPrepareLocked(node string, vmid int, name, description string) (bool, error) {
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return false, err
	}
	if err := vmCheckLock(vm); err != nil {
		return false, err
	}
	if vm.Snapshots[name] != nil {
		return false, Failf("snapshot name '%s' already used\n", name)
	}
	if isTrue(vm.Config["template"]) {
		return false, Failf("you can't take a snapshot if it's a template\n")
	}
	if !q.vmSnapshotFeatureLocked(node, vm.Config) {
		return false, Failf("snapshot feature is not available\n")
	}
	conf := snapshotCopyConfig(vm.Config)
	conf["snapstate"] = "prepare"
	conf["snaptime"] = strconv.FormatInt(q.clock().Unix(), 10)
	if description != "" {
		conf["description"] = description
	}
	if vm.Snapshots == nil {
		vm.Snapshots = map[string]*Snapshot{}
	}
	vm.Snapshots[name] = &Snapshot{Name: name, Config: conf, SnapTime: q.clock().Unix(), Description: description, Parent: conf["parent"]}
	vm.Config["lock"] = "snapshot"
	q.journal.markCore()
	return vm.Running && vmAgentEnabled(vm.Config), nil
}

// vmSnapshotDisks snapshots each disk the section names, one at a time:
// its record and log line under the State's lock, the copy outside it.
func (q *vmSnapshots) vmSnapshotDisks(w *Worker, node string, vmid int, name string) error {
	var keys []string
	err := w.Do(func(st *State) error {
		vm, err := q.vmLocked(node, vmid)
		if err != nil {
			return err
		}
		for _, d := range q.vmVolumeDrivesLocked(node, vm.Snapshots[name].Config) {
			keys = append(keys, d.key)
		}
		return nil
	})
	for _, key := range keys {
		var job vmCopyJob
		lvLine := ""
		if err == nil {
			err = w.Do(func(st *State) error {
				vm, err := q.vmLocked(node, vmid)
				if err != nil {
					return err
				}
				d := q.vmVolumeDriveLocked(node, vm.Snapshots[name].Config, key)
				if d.vol == nil {
					return Failf("no volume for '%s'\n", key)
				}
				w.logLocked("snapshotting 'drive-%s' (%s)", key, d.drive["file"])
				job = q.takeVolSnapshotLocked(node, d.vol, name)
				if s := st.storage(d.vol.Storage); s != nil && s.Type == "lvmthin" {
					lvLine = fmt.Sprintf("  Logical volume \"snap_%s_%s\" created.", d.vol.Name, name)
				}
				return nil
			})
		}
		if err == nil {
			err = job.run()
		}
		if err == nil && lvLine != "" {
			w.Log("%s", lvLine)
		}
	}
	return err
}

// vmVolumeDriveLocked is conf's drive key with its volume.
func (q *vmSnapshots) vmVolumeDriveLocked(node string, conf map[string]string, key string) vmVolDrive {
	for _, d := range q.vmVolumeDrivesLocked(node, conf) {
		if d.key == key {
			return d
		}
	}
	return vmVolDrive{key: key}
}

// vmSnapshotCommitLocked is __snapshot_commit: snapstate and the lock
// go, the config's parent is the new snapshot.
func (q *vmSnapshots) vmSnapshotCommitLocked(node string, vmid int, name string) error {
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	delete(vm.Snapshots[name].Config, "snapstate")
	delete(vm.Config, "lock")
	vm.Config["parent"] = name
	q.journal.markCore()
	return nil
}

// vmSnapshotAbortLocked undoes a failed snapshot: its disks' copies,
// its section and the lock.
func (q *vmSnapshots) vmSnapshotAbortLocked(node string, vmid int, name string) {
	vm, err := q.vmLocked(node, vmid)
	if err != nil || vm.Snapshots[name] == nil {
		return
	}
	for _, d := range q.vmVolumeDrivesLocked(node, vm.Snapshots[name].Config) {
		q.dropVolSnapshotLocked(node, d.vol, name)
	}
	delete(vm.Snapshots, name)
	if vm.Config["lock"] == "snapshot" {
		delete(vm.Config, "lock")
	}
	q.journal.markCore()
}

// VMSnapshotInfo is one row of GET snapshot.
type VMSnapshotInfo struct {
	SnapshotInfo
	VMState bool
}

// VMSnapshots is snapshot_list: the snapshots by time, then "current".
func (q *vmSnapshots) VMSnapshots(auth Auth, node string, vmid int) ([]VMSnapshotInfo, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return nil, err
	}
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return nil, err
	}
	var out []VMSnapshotInfo
	for name, s := range vm.Snapshots {
		t, _ := strconv.ParseInt(s.Config["snaptime"], 10, 64)
		out = append(out, VMSnapshotInfo{SnapshotInfo: SnapshotInfo{Name: name, Description: s.Config["description"], SnapTime: t,
			Parent: s.Config["parent"], SnapState: s.Config["snapstate"]}, VMState: s.Config["vmstate"] != ""})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SnapTime != out[j].SnapTime {
			return out[i].SnapTime < out[j].SnapTime
		}
		return out[i].Name < out[j].Name
	})
	out = append(out, VMSnapshotInfo{SnapshotInfo: SnapshotInfo{Name: "current", Description: "You are here!",
		Parent: vm.Config["parent"], Current: true, Digest: vmDigest(vm), Running: vm.Running}})
	return out, nil
}

// VMSnapshotConfig is GET snapshot/{snapname}/config: the section.
func (q *vmSnapshots) VMSnapshotConfig(auth Auth, node string, vmid int, name string) (map[string]string, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return nil, err
	}
	s := vm.Snapshots[name]
	if s == nil {
		return nil, Failf("snapshot '%s' does not exist\n", name)
	}
	return maps.Clone(s.Config), nil
}

// UpdateVMSnapshotConfig is PUT snapshot/{snapname}/config: the
// description, under the config flock; without one it does nothing.
func (q *vmSnapshots) UpdateVMSnapshotConfig(auth Auth, node string, vmid int, name string, params map[string]string) error {
	desc, ok := params["description"]
	if !ok {
		return nil
	}
	release, err := q.vmLocks.acquire(q.ctx, vmid, configLockTimeout)
	if err != nil {
		return err
	}
	defer release()
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	if err := vmCheckLock(vm); err != nil {
		return err
	}
	s := vm.Snapshots[name]
	if s == nil {
		return Failf("snapshot '%s' does not exist\n", name)
	}
	if desc == "" {
		delete(s.Config, "description")
	} else {
		s.Config["description"] = desc
	}
	s.Description = desc
	return q.changedLocked()
}

// DeleteVMSnapshot is DELETE snapshot/{snapname}: task qmdelsnapshot.
// With force a lock is no obstacle and a missing disk snapshot is skipped.
func (q *vmSnapshots) DeleteVMSnapshot(auth Auth, node string, vmid int, name string, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	if _, err := q.vmLocked(node, vmid); err != nil {
		return "", err
	}
	force := isTrue(params["force"])
	return q.tasks.spawn(auth, node, "qmdelsnapshot", strconv.Itoa(vmid), func(w *Worker) error {
		release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
		if err != nil {
			return err
		}
		defer release()
		return w.Do(func(st *State) error { return q.vmSnapshotDeleteLocked(w, node, vmid, name, force) })
	}), nil
}

// vmSnapshotDeleteLocked is snapshot_delete: the disks' snapshots, then
// the section; its children and the config take its parent.
func (q *vmSnapshots) vmSnapshotDeleteLocked(w *Worker, node string, vmid int, name string, force bool) error {
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	snap := vm.Snapshots[name]
	if snap == nil {
		return Failf("snapshot '%s' does not exist\n", name)
	}
	if !force {
		if err := vmCheckLock(vm); err != nil {
			return err
		}
	}
	for _, d := range q.vmVolumeDrivesLocked(node, snap.Config) {
		q.dropVolSnapshotLocked(node, d.vol, name)
		if s := q.state().storage(d.vol.Storage); s != nil && s.Type == "lvmthin" {
			w.logLocked("  Logical volume \"snap_%s_%s\" successfully removed.", d.vol.Name, name)
		}
	}
	parent := snap.Config["parent"]
	for _, s := range vm.Snapshots {
		if s.Config["parent"] == name {
			vmSetParent(s.Config, parent)
			s.Parent = parent
		}
	}
	if vm.Config["parent"] == name {
		vmSetParent(vm.Config, parent)
	}
	delete(vm.Snapshots, name)
	q.journal.markCore()
	return nil
}

// vmSetParent sets conf's parent, or drops it for none.
func vmSetParent(conf map[string]string, parent string) {
	if parent == "" {
		delete(conf, "parent")
		return
	}
	conf["parent"] = parent
}
