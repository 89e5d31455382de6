package model

import (
	"fmt"
	"strings"
)

// Reassigning a VM disk to another VM (move_disk with target-vmid): the
// volume is renamed vm-<target>-disk-K in place (rename_volume), leaves
// the source's config and joins the target's under target-disk. Both
// VMs must be on the node and not templates; the source must be stopped
// unless the disk is unusedN; a disk a snapshot names cannot go.

// reassignLocked is move_vm_disk's target-vmid branch before the task.
func (q *vmDisks) reassignLocked(m vmMove) (string, error) {
	a := q.state().Access
	if !m.auth.IsRoot() {
		if err := a.Check(m.auth, fmt.Sprintf("/vms/%d", m.target), []string{"VM.Config.Disk"}, false); err != nil {
			return "", err
		}
	}
	if m.target == m.vmid {
		return "", ParamError(map[string]string{"target-vmid": "must be different than source VMID to reassign disk"})
	}
	_, _, drive, err := q.reassignCheckLocked(m)
	if err != nil {
		return "", err
	}
	sid, _, _ := ParseVolID(drive["file"])
	if err := a.Check(m.auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false); err != nil {
		return "", err
	}
	id := fmt.Sprintf("%d-%s>%d-%s", m.vmid, m.disk, m.target, m.targetDisk)
	return q.tasks.spawn(m.auth, m.node, "qmmove", id, func(w *Worker) error {
		release, err := q.vmLocks.acquire(w.ctx, m.vmid, configLockTimeout)
		if err != nil {
			return err
		}
		defer release()
		releaseTarget, err := q.vmLocks.acquire(w.ctx, m.target, configLockTimeout)
		if err != nil {
			return err
		}
		defer releaseTarget()
		return w.Do(func(st *State) error { return q.reassignDoLocked(w, m) })
	}), nil
}

// reassignCheckLocked is load_and_check_reassign_configs.
func (q *vmDisks) reassignCheckLocked(m vmMove) (src, dst *VM, drive PropString, err error) {
	st := q.state()
	if src = st.VMs[m.vmid]; src == nil {
		return nil, nil, nil, Failf("could not find VM %d\n", m.vmid)
	}
	if dst = st.VMs[m.target]; dst == nil {
		return nil, nil, nil, Failf("could not find target VM %d\n", m.target)
	}
	if src.Node != dst.Node {
		return nil, nil, nil, Failf("Both VMs need to be on the same node (%s != %s)\n", src.Node, dst.Node)
	}
	if src.Node != m.node {
		return nil, nil, nil, Failf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist\n", m.node, m.vmid)
	}
	for _, vm := range []*VM{src, dst} {
		if err := vmCheckLock(vm); err != nil {
			return nil, nil, nil, err
		}
	}
	if isTrue(src.Config["template"]) || isTrue(dst.Config["template"]) {
		return nil, nil, nil, Failf("Can't move disks from or to template VMs\n")
	}
	if m.digest != "" && m.digest != vmDigest(src) {
		return nil, nil, nil, Failf("VM %d: detected modified configuration - file changed by other user? Try again.\n", m.vmid)
	}
	if m.targetDigest != "" && m.targetDigest != vmDigest(dst) {
		return nil, nil, nil, Failf("VM %d: detected modified configuration - file changed by other user? Try again.\n", m.target)
	}
	if src.Config[m.disk] == "" {
		return nil, nil, nil, Failf("Disk '%s' for VM '%d' does not exist\n", m.disk, m.vmid)
	}
	if dst.Config[m.targetDisk] != "" {
		return nil, nil, nil, Failf("Target disk key '%s' is already in use for VM '%d'\n", m.targetDisk, m.target)
	}
	drive, err = ParseProp(src.Config[m.disk], "file")
	if err != nil || drive["file"] == "" {
		return nil, nil, nil, Failf("disk '%s' has no associated volume\n", m.disk)
	}
	return src, dst, drive, q.reassignVolumeCheckLocked(m, src, drive)
}

// reassignVolumeCheckLocked is the checks on the volume itself.
func (q *vmDisks) reassignVolumeCheckLocked(m vmMove, src *VM, drive PropString) error {
	volid := drive["file"]
	if vmDriveIsCdrom(drive) && !strings.Contains(volid, "-cloudinit") {
		return Failf("CD drive contents can't be moved to another VM\n")
	}
	if _, _, ok := ParseVolID(volid); !ok || strings.HasPrefix(volid, "/") {
		return Failf("Volume '%s' not managed by PVE\n", volid)
	}
	if q.volumeInUseLocked(src, m.disk, volid) {
		return Failf("Can't move disk used by a snapshot to another VM\n")
	}
	if !q.renames.canRenameLocked(m.node, volid) {
		return Failf("Storage does not support moving of this disk to another VM\n")
	}
	if src.Running && !ctKeyIs(m.disk, "unused") {
		return Failf("Cannot move disk to another VM while the source VM is running - detach first\n")
	}
	return nil
}

// reassignDoLocked is disk_reassignfn under both flocks: rename, drop
// the disk from the source (and its boot order), add it to the target.
func (q *vmDisks) reassignDoLocked(w *Worker, m vmMove) error {
	src, dst, drive, err := q.reassignCheckLocked(m)
	if err != nil {
		return err
	}
	w.logLocked("reassign disk '%s' from VM '%d' as '%s' to VM '%d'", m.disk, m.vmid, m.targetDisk, m.target)
	newVolid, lines, err := q.renames.renameVolumeLocked(m.node, drive["file"], m.target)
	for _, l := range lines {
		w.logLocked("%s", l)
	}
	if err != nil {
		return err
	}
	if order, ok := vmBootWithout(src.Config["boot"], m.disk); ok {
		w.logLocked("removing disk '%s' from boot order config", m.disk)
		src.Config["boot"] = order
	}
	delete(src.Config, m.disk)
	w.logLocked("removing disk '%s' from VM '%d' config", m.disk, m.vmid)
	value := newVolid
	if !ctKeyIs(m.targetDisk, "unused") {
		drive["file"] = newVolid
		value = drive.Print("file")
	}
	if ctKeyIs(m.targetDisk, "unused") || !dst.Running {
		dst.Config[m.targetDisk] = value
	} else {
		vmSetKeyLocked(dst, m.targetDisk, value)
	}
	q.journal.markCore()
	return nil
}

// vmBootWithout is boot's "order=a;b;c" without disk, and whether disk
// was in it.
func vmBootWithout(boot, disk string) (string, bool) {
	order, ok := strings.CutPrefix(boot, "order=")
	if !ok {
		return boot, false
	}
	var kept []string
	found := false
	for _, d := range strings.Split(order, ";") {
		if d == disk {
			found = true
			continue
		}
		kept = append(kept, d)
	}
	if len(kept) == 0 {
		return "", found // print_bootorder of no devices
	}
	return "order=" + strings.Join(kept, ";"), found
}
