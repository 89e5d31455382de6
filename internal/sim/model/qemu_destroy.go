package model

import (
	"fmt"
	"strconv"
	"strings"
)

// vmDestroyer destroys a VM and frees its volumes (qemu_destroy.go).
type vmDestroyer struct {
	vmParts
	// bases (vmCloner) refuses to free a base volume a linked clone
	// still uses.
	bases interface{ baseInUseLocked(vm *VM) error }
	// ha refuses to destroy an HA resource without purge and drops it
	// with purge (service_is_configured, delete_service_from_config).
	ha interface {
		haConfiguredLocked(vmid int) bool
		purgeHAResourceLocked(vmid int) bool
	}
}

// DestroyVM is DELETE /nodes/{node}/qemu/{vmid} (destroy_vm): refused
// for a running VM; task qmdestroy frees every volume the config names
// (disks, unusedN, the cloud-init drive, pending ones) and, with
// destroy-unreferenced-disks (default 1), every other image the VM owns
// on the node's storages; the VM leaves its ACLs and pool either way.
func (q *vmDestroyer) DestroyVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	if err := q.state().Access.Check(auth, fmt.Sprintf("/vms/%d", vmid), []string{"VM.Allocate"}, false); err != nil {
		return "", err
	}
	if isTrue(params["skiplock"]) && !auth.IsRoot() {
		return "", ParamError(map[string]string{"skiplock": "Only root may use this option."})
	}
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return "", err
	}
	if !isTrue(params["skiplock"]) {
		if err := vmCheckLock(vm); err != nil {
			return "", err
		}
	}
	if isTrue(vm.Config["protection"]) {
		return "", Failf("can't remove VM %d - protection mode enabled\n", vmid)
	}
	if !isTrue(params["purge"]) && q.ha.haConfiguredLocked(vmid) {
		return "", Failf("unable to remove VM %d - used in HA resources and purge parameter not set.\n", vmid)
	}
	if vm.Running {
		return "", Failf("VM %d is running - destroy failed\n", vmid)
	}
	unreferenced := params["destroy-unreferenced-disks"] != "0"
	purge := isTrue(params["purge"])
	return q.tasks.spawn(auth, node, "qmdestroy", strconv.Itoa(vmid), func(w *Worker) error {
		release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
		if err != nil {
			return err
		}
		defer release()
		return w.Do(func(st *State) error {
			return q.destroyLocked(w, node, vmid, unreferenced, purge)
		})
	}), nil
}

// destroyLocked frees the VM's volumes and drops its config.
func (q *vmDestroyer) destroyLocked(w *Worker, node string, vmid int, unreferenced, purge bool) error {
	st := q.state()
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	if vm.Running {
		return Failf("VM %d is running - destroy failed\n", vmid)
	}
	if err := q.bases.baseInUseLocked(vm); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, conf := range []map[string]string{vm.Config, vm.Pending} {
		for k, v := range conf {
			if !vmDriveRE.MatchString(k) && !strings.HasPrefix(k, "unused") {
				continue
			}
			if p, err := ParseProp(v, "file"); err == nil && st.Volumes[st.volKey(node, p["file"])] != nil {
				seen[p["file"]] = true
			}
		}
	}
	if unreferenced {
		for _, v := range st.Volumes {
			if v.Owner == vmid && v.Content == "images" && st.volOn(v, node) {
				seen[v.VolID()] = true
			}
		}
	}
	for volid := range seen {
		v := st.Volumes[st.volKey(node, volid)]
		if v == nil || v.Owner != vmid {
			continue // another guest's volume, an ISO: never freed
		}
		if err := q.storage.freeVolumeLocked(node, volid); err != nil {
			return err
		}
		if s := st.storage(v.Storage); s != nil && s.Type == "lvmthin" {
			w.logLocked("  Logical volume \"%s\" successfully removed.", v.Name)
		}
	}
	// qemu-server's destroy drops the VM's ACLs, pool membership and
	// firewall config whether or not purge is set; purge also cleans
	// the configurations that name it (HA, replication, backup jobs),
	// before the config goes (its kind names the HA resource).
	st.Access.RemoveVMAccess(vmid)
	delete(st.Firewall, vmid)
	if purge {
		w.logLocked("purging VM %d from related configurations..", vmid)
		if q.ha.purgeHAResourceLocked(vmid) {
			w.logLocked("NOTE: removed VM %d from HA resource configuration.", vmid)
		}
	}
	delete(st.VMs, vmid)
	q.journal.markCore()
	return nil
}
