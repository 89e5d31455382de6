package model

import "fmt"

// RegenerateVMCloudInit is PUT .../cloudinit (qemu-server's
// cloudinit_update): with VM.Config.Cloudinit, under the config flock,
// a VM that exists and is not locked has its cloud-init drive
// regenerated from the config, which drops a [special:cloudinit]
// section with changes (GET .../cloudinit then shows nothing pending).
// bpg calls it after changing a VM's initialization block.
//
// The drive's data is written from the config at every start
// (qemu_power.go, startSpecLocked), so after this call a stopped VM's
// next boot sees what PVE's would. A running real guest keeps the drive
// it booted with until its next start, where PVE changes the medium at
// once (docs/emulator.md).
func (q *vmConfig) RegenerateVMCloudInit(auth Auth, node string, vmid int) error {
	q.stateMu.RLock()
	err := q.nodes.checkNodeLocked(node)
	if err == nil {
		err = q.state().Access.Check(auth, fmt.Sprintf("/vms/%d", vmid), []string{"VM.Config.Cloudinit"}, false)
	}
	q.stateMu.RUnlock()
	if err != nil {
		return err
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
	if err := vmCheckLock(vm); err != nil || !vmHasCloudInit(vm.Config) || vm.CloudInit == nil || len(vm.CloudInit.Values) == 0 {
		return err // vmconfig_update_cloudinit_drive returns without a drive
	}
	vmCloudInitRegenerated(vm)
	return q.changedLocked()
}
