package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/ui/human"
)

// A VM app moves between nodes (node: changed, corral move, corral drain)
// without a carrier. A container's retained volumes are its keeper's and
// only referenced by the app's container, which PVE refuses to migrate
// ("owned by other guest"); a VM's retained disk is reassigned to the
// app's VM (move_disk with target-vmid renames it vm-<app vmid>-disk-K),
// so while attached it is the app VM's own disk, and qemu-server's
// offline migration copies every local disk a stopped VM owns, its
// system disk and cloud-init drive included, and frees the source's
// copies only once the config is on the target (QemuMigrate.pm,
// sync_offline_local_volumes; with-local-disks is for live migration
// only). The serial goes with the drive. So the move is: stop the VM,
// attach on the source node the disks its keeper VM holds for the app,
// give back there the disks the manifest dropped, migrate the VM, then
// update it on the target (new disks from the target's keeper VM,
// growth, config edits) and start it. At every moment each disk is in
// exactly one VM's config; a kill leaves the VM stopped on one node or
// the other with its disks, and the next run plans from there.

// moveVM plans moving VM app a, whose VM vm is on another node than the
// manifest's to.
func (m *planner) moveVM(a *App, vm *VM, to string) {
	c, probs := vmMoveChange(a, vm, to, m.obs)
	if prob, warn := bridgeProblem(a, to, m.obs, m.warnedBridges); prob != "" {
		probs = append(probs, prob)
	} else {
		m.warn(warn)
	}
	m.refuse(probs...)
	if len(probs) == 0 {
		m.p.Changes = append(m.p.Changes, c)
	}
}

// vmMoveChange is the Move of VM app a's VM vm to node to, and the
// reasons it cannot be done: what PVE would refuse (snapshots on the
// VM, a storage the target lacks, an offline node) and a replace in the
// same apply.
func vmMoveChange(a *App, vm *VM, to string, obs *Observed) (Change, []string) {
	from := vm.Node
	// Plan as if the VM stayed: its other changes, and its disks as the
	// source node's keeper VM and the VM hold them.
	c, probs := vmChange(a, vm)
	if c.Action == Replace {
		probs = append(probs, fmt.Sprintf("app %s: moving its VM from %s to %s and replacing it (%s) in one apply is not done: apply the node change first, then the other", a.Name, from, to, strings.Join(c.Reasons, "; ")))
	}
	probs = append(probs, vmVolumesBeside(&c, a, vm, false, obs, to)...)
	probs = append(probs, vmMoveTargetProblems(a, vm, to, obs)...)
	c.Action, c.Node, c.From = Move, to, from
	c.OldVMID, c.Start, c.Restart = vm.VMID, true, false
	var moving, gathered, created, dropped []string
	for i, v := range c.Volumes {
		switch v.Action {
		case VolKeep, VolGrow, VolAttach:
			c.Volumes[i].Action = VolMove
			moving = append(moving, v.Name)
			if v.Action == VolAttach {
				gathered = append(gathered, v.Name)
			}
		case VolCreate:
			if d, ok := vmKeeperDisk(obs, to, v.Serial); ok {
				// Left in the target's keeper VM earlier: attached there.
				c.Volumes[i].Action, c.Volumes[i].VolID, c.Volumes[i].OldSize = VolAttach, d.Volume, d.Size
				if d.Size > v.Size {
					probs = append(probs, fmt.Sprintf("app %s: volume %s (%s) is %s on node %s, the manifest asks less: a disk cannot shrink; raise its size", a.Name, v.Name, d.Volume, human.Size(d.Size), to))
				}
			}
			created = append(created, v.Name)
		case VolDetach:
			dropped = append(dropped, v.Name)
		}
	}
	c.Reasons = append(vmMoveReasons(vm, from, to, [4][]string{moving, gathered, created, dropped}, len(obs.VMKeepers[to]) == 0), vmMoveKept(c.Reasons)...)
	if snap := vm.Config["parent"]; snap != "" && a.DeleteSnapshots {
		c.Reasons = append(c.Reasons, fmt.Sprintf("its snapshots (the latest is %s) are deleted first (--delete-snapshots): PVE migrates no VM whose local disks have snapshots (non-migratable snapshot exists)", snap))
	}
	return c, probs
}

// vmMoveKept are the reasons of the staying plan that still hold after a
// move: the config edits and growth, not its start or restart (the moved
// VM is started on the target anyway).
func vmMoveKept(reasons []string) []string {
	var out []string
	for _, r := range reasons {
		if strings.Contains(r, "it is started") || strings.Contains(r, "restarts") || strings.Contains(r, "stops for its disks") ||
			strings.HasPrefix(r, "volume ") && strings.Contains(r, "attached to the app's VM from the keeper VM") {
			continue
		}
		out = append(out, r)
	}
	return out
}

// vmMoveReasons say what the move does, disk by disk: vols are the
// names of the disks that move, of those among them the source's keeper
// VM holds, of those attached on the target, of those given back.
func vmMoveReasons(vm *VM, from, to string, vols [4][]string, newKeeper bool) []string {
	moving, gathered, created, dropped := vols[0], vols[1], vols[2], vols[3]
	why := fmt.Sprintf("node changes %s → %s: VM %d stops and migrates offline (same VMID and config); its own disk %s goes with it", from, to, vm.VMID, VMDisk)
	if len(moving) > 0 {
		why += fmt.Sprintf(", and so do its retained disks (%s), attached to it: PVE copies them with the VM as its own disks, serials included", strings.Join(moving, ", "))
	}
	out := []string{why + "; it starts on " + to}
	if len(gathered) > 0 {
		out = append(out, fmt.Sprintf("retained disks the keeper VM on %s holds (%s) are attached to the VM there first: PVE reassigns a disk between the VMs of one node only", from, strings.Join(gathered, ", ")))
	}
	if len(dropped) > 0 {
		out = append(out, fmt.Sprintf("retained disks the manifest no longer lists (%s) are given back to the keeper VM on %s before the migration and stay there", strings.Join(dropped, ", "), from))
	}
	if len(created) > 0 {
		s := fmt.Sprintf("retained disks the VM does not hold yet (%s) are attached on %s after the migration, from the keeper VM there (created there when it holds none)", strings.Join(created, ", "), to)
		if newKeeper {
			s += "; a keeper VM is created on " + to
		}
		out = append(out, s)
	}
	return out
}

// vmMoveTargetProblems are what PVE would refuse about moving vm to
// node to, or what would leave it unable to run there.
func vmMoveTargetProblems(a *App, vm *VM, to string, obs *Observed) []string {
	var probs []string
	if slices.Contains(obs.Offline, vm.Node) {
		probs = append(probs, fmt.Sprintf("app %s: its VM %d is on node %s, which is offline: PVE migrates a VM only through its node; wait for the node", a.Name, vm.VMID, vm.Node))
	}
	if slices.Contains(obs.Offline, to) {
		probs = append(probs, fmt.Sprintf("app %s: node %s is offline; nothing can move there", a.Name, to))
	}
	if sts := obs.Storages[to]; sts != nil {
		var missing []string
		for _, key := range slices.Sorted(maps.Keys(vm.Config)) {
			if !isVMDriveKey(key) {
				continue
			}
			d := ParseVMDisk(vm.Config[key])
			if _, ok := sts[d.Storage]; d.Storage != "" && !ok && !slices.Contains(missing, d.Storage) {
				missing = append(missing, d.Storage)
			}
		}
		for _, v := range a.Volumes {
			if _, ok := sts[v.Storage]; !ok && !slices.Contains(missing, v.Storage) {
				missing = append(missing, v.Storage)
			}
		}
		if len(missing) > 0 {
			probs = append(probs, fmt.Sprintf("app %s: VM %d uses storage %s, which node %s does not have (or the token cannot use there): PVE migrates a disk only to the same storage (storage '…' is not available on node '%s'); choose another node",
				a.Name, vm.VMID, strings.Join(missing, ", "), to, to))
		}
	}
	if snap := vm.Config["parent"]; snap != "" && !a.DeleteSnapshots {
		probs = append(probs, fmt.Sprintf("app %s: VM %d has snapshots (the latest is %s); PVE migrates no VM whose local disks have snapshots (non-migratable snapshot exists): delete them (qm delsnapshot %d NAME; qm listsnapshot %d lists them) and run this again (corral move and drain also take --delete-snapshots; apply, for a change of node:, does not)",
			a.Name, vm.VMID, snap, vm.VMID, vm.VMID))
	}
	return probs
}

// vmKeeperDisk is the disk of serial that the keeper VM of node holds.
func vmKeeperDisk(obs *Observed, node, serial string) (VMVolumeDisk, bool) {
	for _, k := range obs.VMKeepers[node] {
		if d, ok := k.Disks()[serial]; ok {
			return d, true
		}
	}
	return VMVolumeDisk{}, false
}
