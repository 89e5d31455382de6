package model

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/pvesize"
)

// Moving a VM disk: POST /nodes/{node}/qemu/{vmid}/move_disk (qemu-server
// API2/Qemu.pm move_vm_disk). With storage the disk is copied to a new
// volume there and the old one stays as unusedN (or goes, with delete);
// with target-vmid the volume is renamed vm-<target>-disk-K and moves to
// the other VM's config on the same node, as a keeper of VM disks needs.
// Both are task qmmove. Moving a running VM's disk to another storage
// (drive-mirror) is not served: the emulator refuses it by name.

// vmMove is a move_disk call's parameters.
type vmMove struct {
	auth                 Auth
	node                 string
	vmid, target         int
	disk, targetDisk     string
	storage, format      string
	digest, targetDigest string
	delete               bool
}

// MoveVMDisk is move_vm_disk's checks and its task.
func (q *vmDisks) MoveVMDisk(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	m := vmMove{auth: auth, node: node, vmid: vmid, disk: params["disk"], targetDisk: params["target-disk"],
		storage: params["storage"], format: params["format"], digest: params["digest"], targetDigest: params["target-digest"],
		delete: isTrue(params["delete"])}
	if m.targetDisk == "" {
		m.targetDisk = m.disk
	}
	m.target, _ = strconv.Atoi(params["target-vmid"])
	switch {
	case m.target != 0 && m.storage != "":
		msg := "either set 'storage' or 'target-vmid', but not both"
		return "", ParamError(map[string]string{"target-vmid": msg, "storage": msg})
	case m.target != 0:
		return q.reassignLocked(m)
	case m.storage != "":
		if err := q.state().Access.Check(auth, "/storage/"+m.storage, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return "", err
		}
		if _, _, err := q.moveCheckLocked(m); err != nil {
			return "", err
		}
		return q.tasks.spawn(auth, node, "qmmove", strconv.Itoa(vmid), func(w *Worker) error {
			release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
			if err != nil {
				return err
			}
			defer release()
			return q.moveToStorage(w, m)
		}), nil
	}
	msg := "both 'storage' and 'target-vmid' missing, either needs to be set"
	return "", ParamError(map[string]string{"target-vmid": msg, "storage": msg})
}

// moveCheckLocked is load_and_check_move.
func (q *vmDisks) moveCheckLocked(m vmMove) (*VM, PropString, error) {
	vm, err := q.vmLocked(m.node, m.vmid)
	if err != nil {
		return nil, nil, err
	}
	if err := vmCheckLock(vm); err != nil {
		return nil, nil, err
	}
	if m.digest != "" && m.digest != vmDigest(vm) {
		return nil, nil, Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	if vm.Config[m.disk] == "" {
		return nil, nil, Failf("disk '%s' does not exist\n", m.disk)
	}
	drive, err := ParseProp(vm.Config[m.disk], "file")
	if err != nil || drive["file"] == "" {
		return nil, nil, Failf("disk '%s' has no associated volume\n", m.disk)
	}
	if vmDriveIsCdrom(drive) && !strings.Contains(drive["file"], "-cloudinit") {
		return nil, nil, Failf("you can't move a cdrom\n")
	}
	st := q.state()
	v := st.Volumes[st.volKey(m.node, drive["file"])]
	if v == nil {
		return nil, nil, Failf("volume '%s' does not exist\n", drive["file"])
	}
	if v.Storage == m.storage && (m.format == "" || v.Format == m.format) {
		return nil, nil, Failf("you can't move to the same storage with same format\n")
	}
	s, err := q.storage.storageCheckEnabledLocked(m.storage, m.node)
	if err != nil {
		return nil, nil, err
	}
	if !s.HasContent("images") {
		return nil, nil, ParamError(map[string]string{"storage": fmt.Sprintf("storage '%s' does not support vm images", m.storage)})
	}
	if q.volumeInUseLocked(vm, m.disk, drive["file"]) && m.delete {
		return nil, nil, Failf("you can't move a disk with snapshots and delete the source\n")
	}
	if vm.Running {
		return nil, nil, Failf("moving a disk of a running VM (drive-mirror) is not served by the emulator: stop the VM first\n")
	}
	return vm, drive, nil
}

// volumeInUseLocked is is_volume_in_use: another drive of the config,
// or any drive of a snapshot, names volid.
func (q *vmDisks) volumeInUseLocked(vm *VM, skip, volid string) bool {
	for _, d := range q.vmVolumeDrivesLocked(vm.Node, vm.Config) {
		if d.key != skip && d.drive["file"] == volid {
			return true
		}
	}
	for _, s := range vm.Snapshots {
		for _, d := range q.vmVolumeDrivesLocked(vm.Node, s.Config) {
			if d.drive["file"] == volid {
				return true
			}
		}
	}
	return false
}

// moveToStorage is move_updatefn: copy the disk to a new volume on the
// storage (made under the State's lock, filled outside it), then point
// the drive at it, keep the old one as unusedN or free it; a template's
// moved disk becomes a base volume again.
func (q *vmDisks) moveToStorage(w *Worker, m vmMove) error {
	var job vmCopyJob
	var newVolid string
	err := w.Do(func(st *State) error {
		var err error
		newVolid, job, err = q.moveAllocLocked(w, m)
		return err
	})
	if err != nil {
		return err
	}
	if err := job.run(); err != nil {
		w.cleanup(func(st *State) { q.storage.freeVolumeLocked(m.node, newVolid) })
		return fmt.Errorf("storage migration failed: %w", err)
	}
	w.Log("transferred %s of %s (100.00%%)", pvesize.Format(job.size), pvesize.Format(job.size))
	return w.Do(func(st *State) error { return q.moveFinishLocked(w, m, newVolid) })
}

// moveAllocLocked checks the move again, logs it and makes the new
// volume; it returns the volume and the copy of the data.
func (q *vmDisks) moveAllocLocked(w *Worker, m vmMove) (string, vmCopyJob, error) {
	_, drive, err := q.moveCheckLocked(m)
	if err != nil {
		return "", vmCopyJob{}, err
	}
	st := q.state()
	old := st.Volumes[st.volKey(m.node, drive["file"])]
	w.logLocked("copying volume '%s' from current storage '%s' to target storage '%s'", drive["file"], old.Storage, m.storage)
	s := st.storage(m.storage)
	format := old.Format
	if m.format != "" {
		format = m.format
	}
	name, cloudinit := "", strings.Contains(old.Name, "-cloudinit")
	switch {
	case s.LVMLike() && cloudinit:
		name, format = fmt.Sprintf("vm-%d-cloudinit", m.vmid), "raw"
	case s.LVMLike():
		format = "raw"
	case cloudinit:
		name = fmt.Sprintf("vm-%d-cloudinit.%s", m.vmid, format)
	default:
		name = fmt.Sprintf("vm-%d-disk-%d.%s", m.vmid, q.storage.freeDiskNumberLocked(m.node, s.ID, m.vmid), format)
	}
	size := old.Size
	if vmStateDisk(m.disk) {
		size = vmStateDiskSize(s, m.disk, drive) // move_disk's efisize, TPMSTATE_DISK_SIZE
	}
	v, lines, err := q.storage.allocImageLocked(m.node, s, m.vmid, name, format, size)
	if err != nil {
		return "", vmCopyJob{}, fmt.Errorf("storage migration failed: %w", err)
	}
	for _, l := range lines {
		w.logLocked("%s", l)
	}
	return v.VolID(), vmCopyJob{what: "move " + drive["file"], dst: q.storage.volumePath(m.node, s.ID, v.Name),
		src: q.storage.volumePath(m.node, old.Storage, old.Name), size: size}, nil
}

// moveFinishLocked points the drive at the new volume and keeps or
// frees the old one.
func (q *vmDisks) moveFinishLocked(w *Worker, m vmMove, newVolid string) error {
	vm, err := q.vmLocked(m.node, m.vmid)
	if err != nil {
		return err
	}
	drive, err := ParseProp(vm.Config[m.disk], "file")
	if err != nil {
		return err
	}
	oldVolid := drive["file"]
	drive["file"] = newVolid
	if nv := q.state().Volumes[q.state().volKey(m.node, newVolid)]; nv != nil && vmStateDisk(m.disk) {
		drive["size"] = pvesize.Format(nv.Size)
	}
	vm.Config[m.disk] = drive.Print("file")
	if !m.delete {
		w.logLocked("adding source volume '%s' as '%s' to config", oldVolid, vmAddUnusedLocked(vm, oldVolid))
	}
	if isTrue(vm.Config["template"]) {
		if err := q.templates.templateCreateLocked(w, m.node, m.vmid, m.disk); err != nil {
			return err
		}
	}
	if m.delete {
		w.logLocked("removing source volume '%s' after successful copy", oldVolid)
		if err := q.storage.freeVolumeLocked(m.node, oldVolid); err != nil {
			w.logLocked("%s", strings.TrimSuffix(errText(err), "\n"))
		}
	}
	q.journal.markCore()
	return nil
}
