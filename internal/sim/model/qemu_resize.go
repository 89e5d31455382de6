package model

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/pvesize"
)

// Growing a VM disk: PUT /nodes/{node}/qemu/{vmid}/resize (qemu-server
// API2/Qemu.pm resize_vm). In PVE 9 the call answers a "resize" task's
// UPID and every check but the schema's runs inside the task, under the
// config flock: a refused resize is a failed task, not an HTTP error.

// vmDisks grows, moves and reassigns a VM's disks (qemu_resize.go,
// qemu_movedisk.go, qemu_reassign.go).
type vmDisks struct {
	vmParts
	// templates (vmCloner) makes a template's moved disk a base.
	templates interface {
		templateCreateLocked(w *Worker, node string, vmid int, disk string) error
	}
	// renames is rename_volume (as a CT's reassign).
	renames interface {
		canRenameLocked(node, volid string) bool
		renameVolumeLocked(node, volid string, target int) (string, []string, error)
	}
}

// ResizeVM is resize_vm.
func (q *vmDisks) ResizeVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	if isTrue(params["skiplock"]) && !auth.IsRoot() {
		return "", ParamError(map[string]string{"skiplock": "Only root may use this option."})
	}
	if _, err := q.vmLocked(node, vmid); err != nil {
		return "", err
	}
	return q.tasks.spawn(auth, node, "resize", strconv.Itoa(vmid), func(w *Worker) error {
		release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
		if err != nil {
			return err
		}
		defer release()
		return w.Do(func(st *State) error {
			return q.resizeLocked(w, auth, node, vmid, params)
		})
	}), nil
}

// resizeLocked is resize_vm's updatefn: the digest, the lock, the
// drive, Datastore.AllocateSpace on its storage, then grow-only.
func (q *vmDisks) resizeLocked(w *Worker, auth Auth, node string, vmid int, params map[string]string) error {
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	if d := params["digest"]; d != "" && d != vmDigest(vm) {
		return Failf("checksum mismatch (file change by other user?)\n")
	}
	if !isTrue(params["skiplock"]) {
		if err := vmCheckLock(vm); err != nil {
			return err
		}
	}
	disk := params["disk"]
	if vm.Config[disk] == "" {
		return Failf("disk '%s' does not exist\n", disk)
	}
	drive, err := ParseProp(vm.Config[disk], "file")
	if err != nil || drive["file"] == "" {
		return Failf("disk '%s' has no associated volume\n", disk)
	}
	if vmDriveIsCdrom(drive) {
		return Failf("you can't resize a cdrom\n")
	}
	sid, _, _ := ParseVolID(drive["file"])
	if err := q.state().Access.Check(auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false); err != nil {
		return err
	}
	st := q.state()
	v := st.Volumes[st.volKey(node, drive["file"])]
	if v == nil {
		return Failf("Could not determine current size of volume '%s'\n", drive["file"])
	}
	newSize, err := vmResizeTarget(params["size"], v.Size)
	if err != nil {
		return err
	}
	if newSize < v.Size {
		return Failf("shrinking disks is not supported\n")
	}
	if newSize == v.Size {
		return nil
	}
	return q.growVolumeLocked(w, vm, disk, drive, v, newSize)
}

// vmDriveIsCdrom is drive_is_cdrom: media=cdrom (the cloud-init drive
// too), or a drive of no volume.
func vmDriveIsCdrom(drive PropString) bool {
	return drive["media"] == "cdrom" || drive["file"] == "cdrom" || drive["file"] == "none"
}

// vmResizeTarget is resize_vm's size arithmetic: "+N[KMGT]" grows by N,
// "N[KMGT]" is the new size; a fraction is truncated as Perl's int().
func vmResizeTarget(size string, current int64) (int64, error) {
	n, err := pvesize.Parse(strings.TrimPrefix(size, "+"))
	if err != nil {
		return 0, Failf("internal error at /usr/share/perl5/PVE/API2/Qemu.pm line %d.\n", vmResizeDieLine)
	}
	if strings.HasPrefix(size, "+") {
		n += current
	}
	return n, nil
}

// vmResizeDieLine is the line of resize_vm's "internal error" die (the
// schema's disk-size pattern lets nothing through that reaches it).
const vmResizeDieLine = 6032

// growVolumeLocked grows v's data file and writes the new size into the
// drive, logging what lvresize or qemu-img prints.
func (q *vmDisks) growVolumeLocked(w *Worker, vm *VM, disk string, drive PropString, v *Volume, newSize int64) error {
	st := q.state()
	s := st.storage(v.Storage)
	old := v.Size
	v.Size = newSize
	switch {
	case s != nil && s.Type == "lvmthin":
		v.Size = roundUp(newSize, 4*mib)
		lv := s.VGName + "/" + v.Name
		w.logLocked("  Size of logical volume %s changed from %s (%d extents) to %s (%d extents).", lv, lvmSize(old), old/(4*mib), lvmSize(v.Size), v.Size/(4*mib))
		w.logLocked("  Logical volume %s successfully resized.", lv)
	case s != nil && s.DirLike():
		w.logLocked("Image resized.")
	}
	path := q.storage.volumePath(vm.Node, v.Storage, v.Name)
	if err := os.Truncate(path, v.Size); err != nil {
		v.Size = old
		return fmt.Errorf("resize %s: %w", v.VolID(), err)
	}
	q.journal.markVolume(vm.Node, v.VolID())
	drive["size"] = pvesize.Format(newSize)
	vm.Config[disk] = drive.Print("file")
	q.journal.markCore()
	return nil
}
