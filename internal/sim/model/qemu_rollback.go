package model

import (
	"fmt"
	"maps"
	"strconv"
)

// RollbackVM is POST snapshot/{snapname}/rollback (qemu-server rollback,
// AbstractConfig snapshot_rollback): task qmrollback stops a running VM,
// brings each disk back to the snapshot, makes the snapshot's section
// the config (parent the snapshot) and, with start, starts the VM.
func (q *vmSnapshots) RollbackVM(auth Auth, node string, vmid int, name string, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	start := isTrue(params["start"])
	// vm_start runs inside the worker, so its own check would not fire.
	if start {
		if err := q.state().Access.Check(auth, fmt.Sprintf("/vms/%d", vmid), []string{"VM.PowerMgmt"}, false); err != nil {
			return "", err
		}
	}
	if _, err := q.vmLocked(node, vmid); err != nil {
		return "", err
	}
	return q.tasks.spawn(auth, node, "qmrollback", strconv.Itoa(vmid), func(w *Worker) error {
		if err := q.rollbackTask(w, node, vmid, name); err != nil {
			return err
		}
		if start {
			return q.power.startTask(w, node, vmid)
		}
		return nil
	}), nil
}

// rollbackTask is snapshot_rollback under the config flock: prepare
// (checks, lock "rollback"), stop the VM if it runs, then the disks and
// the config.
func (q *vmSnapshots) rollbackTask(w *Worker, node string, vmid int, name string) error {
	release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
	if err != nil {
		return err
	}
	defer release()
	running := false
	err = w.Do(func(st *State) error {
		vm, err := q.vmLocked(node, vmid)
		if err != nil {
			return err
		}
		snap := vm.Snapshots[name]
		if snap == nil {
			return Failf("snapshot '%s' does not exist\n", name)
		}
		if s := snap.Config["snapstate"]; s != "" {
			return Failf("unable to rollback to incomplete snapshot (snapstate = %s)\n", s)
		}
		if vm.Lock() != "rollback" {
			if err := vmCheckLock(vm); err != nil {
				return err
			}
		}
		vm.Config["lock"] = "rollback"
		running = vm.Running
		q.journal.markCore()
		return nil
	})
	if err != nil {
		return err
	}
	if running {
		if err := q.vmRuntime().Stop(vmid); err != nil {
			return err
		}
	}
	var jobs []vmCopyJob
	err = w.Do(func(st *State) error {
		var err error
		jobs, err = q.rollbackDisksLocked(w, node, vmid, name)
		return err
	})
	for _, job := range jobs {
		if err == nil {
			err = job.run() // outside the State's lock; the VM is locked "rollback"
		}
	}
	if err != nil {
		return err
	}
	return w.Do(func(st *State) error { return q.rollbackLocked(node, vmid, name) })
}

// rollbackDisksLocked marks the VM stopped and returns the copies that
// bring each disk of the snapshot back, logging what lvremove and
// lvcreate print.
func (q *vmSnapshots) rollbackDisksLocked(w *Worker, node string, vmid int, name string) ([]vmCopyJob, error) {
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return nil, err
	}
	vm.Running, vm.PID, vm.StartedAt = false, 0, 0
	q.journal.markCore()
	var jobs []vmCopyJob
	for _, d := range q.vmVolumeDrivesLocked(node, vm.Snapshots[name].Config) {
		job, err := q.rollbackVolLocked(node, d.vol, name)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, job)
		if s := q.state().storage(d.vol.Storage); s != nil && s.Type == "lvmthin" {
			w.logLocked("  Logical volume \"%s\" successfully removed.", d.vol.Name)
			w.logLocked("  Logical volume \"%s\" created.", d.vol.Name)
		}
	}
	return jobs, nil
}

// rollbackLocked applies the snapshot's config (__snapshot_apply_config):
// the current config's description (the Notes) and unused volumes stay,
// and a disk the snapshot does not name becomes unused.
func (q *vmSnapshots) rollbackLocked(node string, vmid int, name string) error {
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	snap := vm.Snapshots[name]
	conf := snapshotCopyConfig(snap.Config)
	delete(conf, "snapstate")
	kept := map[string]bool{}
	for _, d := range q.vmVolumeDrivesLocked(node, conf) {
		kept[d.drive["file"]] = true
	}
	old := vm.Config
	vm.Config = conf
	for k, v := range old {
		if k == "description" {
			vm.Config[k] = v
		}
		if ctKeyIs(k, "unused") {
			vmAddUnusedLocked(vm, v)
		}
	}
	for _, d := range q.vmVolumeDrivesLocked(node, old) {
		if !kept[d.drive["file"]] {
			vmAddUnusedLocked(vm, d.drive["file"])
		}
	}
	vm.Config["parent"] = name
	vm.Pending, vm.PendingDelete = nil, nil
	q.journal.markCore()
	return nil
}

// vmAddUnusedLocked is add_unused_volume: volid as the first free unusedN
// unless the config names it already; it returns the key.
func vmAddUnusedLocked(vm *VM, volid string) string {
	for k, v := range maps.All(vm.Config) {
		if ctKeyIs(k, "unused") && v == volid {
			return k
		}
	}
	for n := 0; ; n++ {
		k := "unused" + strconv.Itoa(n)
		if _, used := vm.Config[k]; !used {
			vm.Config[k] = volid
			return k
		}
	}
}
