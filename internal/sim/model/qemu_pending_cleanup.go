package model

// vmCleanupPending is AbstractConfig's cleanup_pending, which
// update_vm_api runs after writing an update: a pending value equal to
// the current one is dropped, and so is a pending delete of a key the
// config does not have. Without it a client that re-sends its whole
// config (bpg does) leaves every unchanged key pending on a running VM.
func vmCleanupPending(vm *VM) {
	for k, v := range vm.Pending {
		if cur, ok := vm.Config[k]; ok && cur == v {
			delete(vm.Pending, k)
		}
	}
	for k := range vm.PendingDelete {
		if _, ok := vm.Config[k]; !ok {
			delete(vm.PendingDelete, k)
		}
	}
}
