package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// corral snapshot, snapshots and rollback of a kind: vm app (issue 34).
// A VM snapshot holds every drive of the VM's config but CD-ROMs
// (qemu-server's __snapshot_foreach_volume), so the retained disks the
// VM holds (reassigned from the keeper VM, owned by it while attached)
// are in it, and the config. corral takes none with the RAM (vmstate):
// a rollback boots the VM afresh from its disks, as after a power cut,
// which costs no RAM-sized state volume and no pause of the guest; the
// guest agent freezes the filesystems meanwhile. While a snapshot names
// a disk, qemu-server refuses to move it to another VM ("Can't move disk
// used by a snapshot to another VM"), so the disk cannot go back to the
// keeper VM: a replace or destroy of the app, or a volume dropped from
// the manifest, is refused (guardSnapshotDisks, before the VM stops)
// until the snapshot is removed.

// vmApp is the app name in vm's tags ("" for none).
func vmApp(vm *plan.VM) string { return appOf(plan.ParseTags(vm.Config["tags"])) }

// TakeVM takes snapshot name of vm (running or not, no RAM state) and
// waits for it.
func (sn *Snapshots) TakeVM(ctx context.Context, vm *plan.VM, name string) error {
	app := vmApp(vm)
	return takeVMSnapshot(ctx, sn.r, app, vm.Node, vm.VMID, name, "corral snapshot of app "+app)
}

// RollbackVM rolls vm back to snapshot name: its config and every disk
// the snapshot holds. PVE stops a running VM for it; with start it is
// started again.
func (sn *Snapshots) RollbackVM(ctx context.Context, vm *plan.VM, name string, start bool) error {
	return rollbackVM(ctx, sn.r, vmApp(vm), vm.Node, vm.VMID, name, start)
}

// DeleteVM removes snapshot name of vm.
func (sn *Snapshots) DeleteVM(ctx context.Context, vm *plan.VM, name string) error {
	return deleteVMSnapshot(ctx, sn.r, vmApp(vm), vm.Node, vm.VMID, name, false)
}

// ListVMSnapshots lists vm's snapshots, oldest first.
func ListVMSnapshots(ctx context.Context, c *pve.Client, vm *plan.VM) ([]SnapshotInfo, error) {
	snaps, err := c.VMSnapshots(ctx, vm.Node, vm.VMID)
	if err != nil {
		return nil, err
	}
	return snapshotInfos(snaps, true), nil
}

// VMSnapshotCovers is what a snapshot of vm taken now holds, in the
// words corral snapshot prints: each disk by its key and volid, a
// retained one by its volume's name (volumes maps serials to names).
func VMSnapshotCovers(vm *plan.VM, volumes map[string]string) []string {
	var out []string
	for _, key := range vmDiskKeys(vm.Config) {
		d := plan.ParseVMDisk(vm.Config[key])
		serial := driveSerial(vm.Config[key])
		if name, ok := volumes[serial]; ok {
			out = append(out, fmt.Sprintf("volume %s (%s, %s)", name, key, d.Volume))
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s)", key, d.Volume))
	}
	return append(out, "the config")
}

// vmDiskKeys are conf's drive keys that hold a disk (not a CD-ROM, nor
// the cloud-init drive, which is one), sorted.
func vmDiskKeys(conf map[string]string) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(conf)) {
		if !vmDiskKey(key) {
			continue
		}
		v := conf[key]
		if v == "" || strings.HasPrefix(v, "none") || strings.Contains(","+v+",", ",media=cdrom,") {
			continue
		}
		out = append(out, key)
	}
	return out
}

// vmDiskKey reports whether key names a VM drive: ide, sata, scsi or
// virtio and a number, efidisk0 or tpmstate0.
func vmDiskKey(key string) bool {
	if key == "efidisk0" || key == "tpmstate0" {
		return true
	}
	for _, p := range []string{"scsi", "virtio", "sata", "ide"} {
		if n, ok := strings.CutPrefix(key, p); ok && n != "" {
			return strings.Trim(n, "0123456789") == ""
		}
	}
	return false
}

// driveSerial is a drive value's serial= option ("" for none).
func driveSerial(v string) string {
	for _, item := range strings.Split(v, ",")[1:] {
		if s, ok := strings.CutPrefix(item, "serial="); ok {
			return s
		}
	}
	return ""
}

// CheckVMRollback refuses, before anything changes, a rollback of vm to
// snapshot name that would lose track of a disk or cannot bring one
// back: a disk the snapshot holds no longer exists on its storage (the
// rollback would stop the VM and fail on it), or a retained disk the VM
// holds now was attached after the snapshot. qemu-server's rollback
// keeps a disk the snapshot does not name only as unusedN
// (__snapshot_rollback_get_unused), without its serial, by which alone
// corral knows whose volume it is: the volume would be lost to the app,
// and the VM's next destroy would free it.
func (sn *Snapshots) CheckVMRollback(ctx context.Context, vm *plan.VM, name string) error {
	sc, err := sn.r.client.VMSnapshotConfig(ctx, vm.Node, vm.VMID, name)
	if err != nil {
		return err
	}
	held := map[string]bool{}
	contents := map[string]map[string]bool{} // storage → volids on it
	var problems []string
	for _, key := range vmDiskKeys(sc.Values) {
		volid := plan.ParseVMDisk(sc.Values[key]).Volume
		held[volid] = true
		sid, _, _ := strings.Cut(volid, ":")
		if contents[sid] == nil {
			if contents[sid], err = storageVolids(ctx, sn.r.client, vm.Node, sid); err != nil {
				return err
			}
		}
		if !contents[sid][volid] {
			problems = append(problems, fmt.Sprintf("%s (%s) no longer exists on node %s", key, volid, vm.Node))
		}
	}
	for _, d := range sortedVMVolumeDisks(vm.Config) {
		if !held[d.Volume] {
			problems = append(problems, fmt.Sprintf("%s (%s, a retained volume) was attached after the snapshot: the rollback would leave it an unused disk without its serial, "+
				"which corral no longer knows as the app's and the VM's destroy would free", d.Key, d.Volume))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	fix := fmt.Sprintf("`qm delsnapshot %d %s` on node %s", vm.VMID, name, vm.Node)
	if app := vmApp(vm); app != "" {
		fix = fmt.Sprintf("`corral snapshot %s %s --delete` (or %s)", app, name, fix)
	}
	return fmt.Errorf("rollback of VM %d on node %s to snapshot %s refused; nothing was changed: %s. "+
		"Roll back to a snapshot taken since, or remove this one with %s", vm.VMID, vm.Node, name, strings.Join(problems, "; "), fix)
}

// sortedVMVolumeDisks are conf's retained disks, by key.
func sortedVMVolumeDisks(conf map[string]string) []plan.VMVolumeDisk {
	disks := slices.Collect(maps.Values(plan.VMVolumeDisks(conf)))
	sort.Slice(disks, func(i, j int) bool { return disks[i].Key < disks[j].Key })
	return disks
}

// guardSnapshotDisks refuses, before anything changes, a change of VM
// app c that would move one of disks (retained disks of VM vmid, by
// serial) back to the keeper VM while a snapshot of the VM holds it:
// qemu-server refuses that move ("Can't move disk used by a snapshot to
// another VM"), and would do so only after corral stopped the VM for
// it. The error names each snapshot and disk and how to remove it.
func (v vmOps) guardSnapshotDisks(ctx context.Context, c plan.Change, vmid int, disks []plan.VMVolumeDisk) error {
	if len(disks) == 0 {
		return nil
	}
	snaps, err := v.r.client.VMSnapshots(ctx, c.Node, vmid)
	if err != nil {
		return err
	}
	var held []string
	for _, s := range snaps {
		if s.Name == "current" {
			continue
		}
		sc, err := v.r.client.VMSnapshotConfig(ctx, c.Node, vmid, s.Name)
		if pve.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		named := map[string]bool{}
		for _, key := range vmDiskKeys(sc.Values) {
			named[plan.ParseVMDisk(sc.Values[key]).Volume] = true
		}
		for _, d := range disks {
			if named[d.Volume] {
				held = append(held, fmt.Sprintf("snapshot %s holds %s (%s)", s.Name, d.Key, d.Volume))
			}
		}
	}
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("%s: vm %d's retained disks must go back to the keeper VM, and PVE will not move a disk a snapshot holds to another VM: %s; nothing was changed. "+
		"Remove those snapshots with `corral snapshot %s NAME --delete` (`corral snapshots %s` lists them), then apply again",
		c.App, vmid, strings.Join(held, "; "), c.App, c.App)
}

// detachedDisks are the retained disks of conf that c gives back to the
// keeper VM: every one for a destroy (all), else those it detaches.
func detachedDisks(c plan.Change, conf map[string]string, all bool) []plan.VMVolumeDisk {
	disks := sortedVMVolumeDisks(conf)
	if all {
		return disks
	}
	detach := map[string]bool{}
	for _, vol := range c.Volumes {
		if vol.Action == plan.VolDetach {
			detach[vol.Serial] = true
		}
	}
	return slices.DeleteFunc(disks, func(d plan.VMVolumeDisk) bool { return !detach[d.Serial] })
}
