package model

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// VM config: GET/PUT/POST .../qemu/{vmid}/config and GET .../pending
// (API2/Qemu.pm vmconfig, update_vm, update_vm_async, vm_pending). A
// running VM takes the options qemu-server changes live at once (the
// fast-plug ones, and netN and disks, hot-plugged by PVE's default
// hotplug=network,disk,usb); every other change waits in the pending
// section until the VM stops or starts.

// vmFastPlug are the options qemu-server writes at once on a running VM.
var vmFastPlug = vmKeySet("description", "hookscript", "name", "onboot", "protection", "tags", "vmstatestorage")

// vmDeleteSplitRE splits delete's list (pve-configid-list).
var vmDeleteSplitRE = regexp.MustCompile(`[,;\s]+`)

// VMConfig is GET config: with current the config alone, else with the
// pending changes applied; and the digest of the whole file.
func (q *qemuVMs) VMConfig(auth Auth, node string, vmid int, current bool) (map[string]string, string, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	vm, err := q.vmAuditLocked(auth, node, vmid)
	if err != nil {
		return nil, "", err
	}
	conf := maps.Clone(vm.Config)
	if !current {
		for k := range vm.PendingDelete {
			delete(conf, k)
		}
		maps.Copy(conf, vm.Pending)
	}
	if _, ok := conf["cipassword"]; ok {
		conf["cipassword"] = vmHiddenPassword
	}
	return conf, vmDigest(vm), nil
}

// vmHiddenPassword is what qemu-server answers for cipassword in GET
// config and pending: the password never leaves the node.
const vmHiddenPassword = "**********"

// VMPending is GET pending: every key of the config and of the pending
// section, by key.
func (q *qemuVMs) VMPending(auth Auth, node string, vmid int) ([]PendingEntry, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	vm, err := q.vmAuditLocked(auth, node, vmid)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for _, m := range []map[string]string{vm.Config, vm.Pending} {
		for k := range m {
			keys[k] = true
		}
	}
	for k := range vm.PendingDelete {
		keys[k] = true
	}
	var out []PendingEntry
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		e := PendingEntry{Key: k}
		if v, ok := vm.Config[k]; ok {
			e.Value = &v
		}
		if v, ok := vm.Pending[k]; ok {
			e.Pending = &v
		}
		if k == "cipassword" {
			hidden := vmHiddenPassword
			if e.Value != nil {
				e.Value = &hidden
			}
			if e.Pending != nil {
				e.Pending = &hidden
			}
		}
		if force, ok := vm.PendingDelete[k]; ok {
			e.Delete = 1
			if force {
				e.Delete = 2
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// UpdateVM is PUT config (sync) and POST config (async: a qmconfig
// task, whose UPID it returns).
func (q *qemuVMs) UpdateVM(auth Auth, node string, vmid int, params map[string]string, async bool) (string, error) {
	if !async {
		_, err := q.updateVM(auth, node, vmid, params)
		return "", err
	}
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if _, err := q.vmAuditLocked(auth, node, vmid); err != nil {
		return "", err
	}
	return q.tasks.spawn(auth, node, "qmconfig", strconv.Itoa(vmid), func(w *Worker) error {
		lines, err := q.updateVM(auth, node, vmid, params)
		for _, l := range lines {
			w.Log("%s", l)
		}
		return err
	}), nil
}

// updateVM is update_vm_api under the config flock; it returns the
// lines a task logs (what allocating a disk prints), collected under
// the State's lock and logged after it.
func (q *qemuVMs) updateVM(auth Auth, node string, vmid int, params map[string]string) (lines []string, err error) {
	release, err := q.vmLocks.acquire(q.ctx, vmid, configLockTimeout)
	if err != nil {
		return nil, err
	}
	defer release()
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	logf := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return nil, err
	}
	set, del, revert := vmSplitUpdate(params)
	if err := q.checkUpdateLocked(auth, vm, params, set, del); err != nil {
		return nil, err
	}
	drives, err := q.parseDrivesLocked(auth, node, set)
	if err != nil {
		return nil, err
	}
	for _, k := range revert {
		delete(vm.Pending, k)
		delete(vm.PendingDelete, k)
	}
	for _, k := range del {
		q.deleteKeyLocked(vm, k, isTrue(params["force"]))
	}
	for _, d := range drives {
		if d.sid == "" && d.importFrom == "" {
			continue
		}
		// A sync update fills the volume under the lock: an update's
		// import is rare, and PUT answers only when it is done.
		volid, fill, err := q.makeDriveLocked(logf, node, vmid, d)
		if err == nil {
			err = fill(logf)
		}
		if err != nil {
			if volid != "" {
				q.storage.freeVolumeLocked(node, volid)
			}
			return lines, errors.Join(err, q.changedLocked()) // what was deleted stays deleted
		}
		set[d.key] = d.props.Print("file")
	}
	for k, v := range set {
		if vmNetKeyRE.MatchString(k) {
			v = vmNetWithMAC(v)
		}
		q.setKeyLocked(vm, k, v)
	}
	return lines, q.changedLocked()
}

// vmSplitUpdate splits an update's parameters into the keys it sets,
// the keys it deletes and the keys it reverts.
func vmSplitUpdate(params map[string]string) (set map[string]string, del, revert []string) {
	set = maps.Clone(params)
	for _, k := range []string{"node", "vmid", "digest", "delete", "revert", "skiplock", "force", "background_delay"} {
		delete(set, k)
	}
	split := func(s string) []string {
		var out []string
		for _, k := range vmDeleteSplitRE.Split(s, -1) {
			if k != "" {
				out = append(out, k)
			}
		}
		return out
	}
	return set, split(params["delete"]), split(params["revert"])
}

// checkUpdateLocked is update_vm_api's checks: a key both set and
// deleted, skiplock, the lock, the digest, and each key's privilege.
func (q *qemuVMs) checkUpdateLocked(auth Auth, vm *VM, params, set map[string]string, del []string) error {
	for _, k := range del {
		if _, ok := set[k]; ok {
			return ParamError(map[string]string{"delete": fmt.Sprintf("conflicting values for '%s'", k)})
		}
	}
	if isTrue(params["skiplock"]) && !auth.IsRoot() {
		return ParamError(map[string]string{"skiplock": "Only root may use this option."})
	}
	if !isTrue(params["skiplock"]) {
		if err := vmCheckLock(vm); err != nil {
			return err
		}
	}
	if d := params["digest"]; d != "" && d != vmDigest(vm) {
		return Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	keys := append(slices.Collect(maps.Keys(set)), del...)
	a := q.state().Access
	for _, k := range keys {
		if vmDriveRE.MatchString(k) || strings.HasPrefix(k, "unused") {
			if err := a.Check(auth, fmt.Sprintf("/vms/%d", vm.VMID), []string{"VM.Config.Disk"}, false); err != nil {
				return err
			}
		}
	}
	return vmCheckModifyPermLocked(a, auth, vm.VMID, keys)
}

// vmLiveKey reports whether a running VM takes key at once.
func vmLiveKey(k string) bool {
	return vmFastPlug[k] || vmNetKeyRE.MatchString(k) || vmDriveRE.MatchString(k) || strings.HasPrefix(k, "unused")
}

// setKeyLocked sets k: at once on a stopped VM or a live key, else
// pending.
func (q *qemuVMs) setKeyLocked(vm *VM, k, v string) {
	if !vm.Running || vmLiveKey(k) {
		vm.Config[k] = v
		delete(vm.Pending, k)
		delete(vm.PendingDelete, k)
		return
	}
	if vm.Pending == nil {
		vm.Pending = map[string]string{}
	}
	vm.Pending[k] = v
	delete(vm.PendingDelete, k)
}

// deleteKeyLocked deletes k: a disk's volume becomes unusedN (a
// cloud-init drive's is freed), as vmconfig_delete_or_detach_drive does.
func (q *qemuVMs) deleteKeyLocked(vm *VM, k string, force bool) {
	if vm.Running && !vmLiveKey(k) {
		if vm.PendingDelete == nil {
			vm.PendingDelete = map[string]bool{}
		}
		vm.PendingDelete[k] = force
		delete(vm.Pending, k)
		return
	}
	v, ok := vm.Config[k]
	delete(vm.Config, k)
	delete(vm.Pending, k)
	if ok && strings.HasPrefix(k, "unused") {
		q.storage.freeVolumeLocked(vm.Node, v) // deleting unusedN destroys the disk
		return
	}
	if !ok || !vmDriveRE.MatchString(k) {
		return
	}
	p, err := ParseProp(v, "file")
	st := q.state()
	if err != nil || st.Volumes[st.volKey(vm.Node, p["file"])] == nil {
		return
	}
	if strings.Contains(p["file"], fmt.Sprintf("vm-%d-cloudinit", vm.VMID)) || force {
		q.storage.freeVolumeLocked(vm.Node, p["file"])
		return
	}
	for n := 0; ; n++ {
		if _, used := vm.Config["unused"+strconv.Itoa(n)]; !used {
			vm.Config["unused"+strconv.Itoa(n)] = p["file"]
			return
		}
	}
}
