package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/ui/human"
)

// vmVolumes plans the retained disks of VM app a for change c on c.Node
// (vmkeeper.go): each volume is kept where it is attached, attached from
// the keeper VM, or created there and attached; a disk of the app's VM
// that the manifest no longer lists goes back to the keeper VM. vm is
// the VM observed (nil for a create); replaced says c destroys it, so
// its disks go to the keeper VM first and are attached to the new one.
// It returns the refusals: an ambiguous keeper VM, a disk found twice
// or on another node, or a shrink.
func vmVolumes(c *Change, a *App, vm *VM, replaced bool, obs *Observed) []string {
	return vmVolumesBeside(c, a, vm, replaced, obs, "")
}

// vmVolumesBeside is vmVolumes where a disk held by the keeper VM of
// node beside is not refused either (a move's target: vmmove.go); such a
// disk is planned as a VolCreate, which the move turns into an attach
// there.
func vmVolumesBeside(c *Change, a *App, vm *VM, replaced bool, obs *Observed, beside string) []string {
	keepers := obs.VMKeepers[c.Node]
	if len(keepers) > 1 && (len(a.Volumes) > 0 || vm != nil && len(VMVolumeDisks(vm.Config)) > 0) {
		return []string{ambiguousVMKeepers(a.Name, c.Node, keepers)}
	}
	var kd, vd map[string]VMVolumeDisk
	var names map[string]VolumeKey
	if len(keepers) == 1 {
		kd, names = keepers[0].Disks(), ParseVMKeeperNotes(keepers[0].Config["description"])
	}
	if vm != nil {
		vd = VMVolumeDisks(vm.Config)
	}
	var probs []string
	wanted := map[string]bool{}
	for _, v := range a.Volumes {
		serial := VMVolumeSerial(a.Name, v.Name)
		wanted[serial] = true
		vc, prob := vmVolume(a, v, vd[serial], kd[serial], replaced)
		vc.Serial = serial
		if prob == "" {
			prob = vmVolumeElsewhere(a.Name, v.Name, serial, c.Node, beside, obs)
		}
		if prob != "" {
			probs = append(probs, prob)
			continue
		}
		c.Volumes = append(c.Volumes, vc)
	}
	for _, serial := range slices.Sorted(maps.Keys(vd)) {
		if !wanted[serial] {
			d := vd[serial]
			name := cmp.Or(names[serial].Name, serial)
			c.Volumes = append(c.Volumes, VolumeChange{Volume: Volume{Name: name, Reclaim: Retain}, Action: VolDetach, VolID: d.Volume, Key: d.Key, OldSize: d.Size, Serial: serial})
		}
	}
	return probs
}

// vmVolume is what happens to volume v of app a: on the VM (inVM), in
// the keeper VM (inKeeper), or neither.
func vmVolume(a *App, v Volume, inVM, inKeeper VMVolumeDisk, replaced bool) (VolumeChange, string) {
	vc := VolumeChange{Volume: v}
	have := inVM
	switch {
	case inVM.Key != "" && inKeeper.Key != "":
		return vc, fmt.Sprintf("app %s: volume %s has two disks with its serial %s, %s on the app's VM and %s on the keeper VM (copied outside corral?); corral does not guess which holds the data: remove the serial from the one that is not the volume's",
			a.Name, v.Name, inVM.Serial, inVM.Volume, inKeeper.Volume)
	case inVM.Key != "" && replaced:
		vc.Action = VolAttach // detached before the destroy, attached to the new VM
	case inVM.Key != "":
		vc.Action, vc.Key = VolKeep, inVM.Key
	case inKeeper.Key != "":
		vc.Action, have = VolAttach, inKeeper
	default:
		vc.Action = VolCreate
		return vc, ""
	}
	vc.VolID, vc.OldSize = have.Volume, have.Size
	switch {
	case have.Size > v.Size:
		return vc, fmt.Sprintf("app %s: volume %s (%s) is %s, the manifest asks %s: a disk cannot shrink; set its size to %s or more",
			a.Name, v.Name, have.Volume, human.Size(have.Size), human.Size(v.Size), human.Size(have.Size))
	case have.Size < v.Size && vc.Action == VolKeep:
		vc.Action = VolGrow
	}
	return vc, ""
}

// vmVolumeElsewhere refuses a volume whose disk a keeper VM of another
// node than node (or beside) holds: PVE reassigns a disk between the VMs
// of one node only.
func vmVolumeElsewhere(app, name, serial, node, beside string, obs *Observed) string {
	for _, n := range slices.Sorted(maps.Keys(obs.VMKeepers)) {
		if n == node || n == beside {
			continue
		}
		for _, k := range obs.VMKeepers[n] {
			if d, ok := k.Disks()[serial]; ok {
				return fmt.Sprintf("app %s: volume %s (%s) is held by keeper VM %d on node %s, not %s; a VM app takes a disk from the keeper VM of its own node only (PVE reassigns a disk between VMs of one node): set node: %s (corral moves the VM there and attaches it)",
					app, name, d.Volume, k.VMID, n, node, n)
			}
		}
	}
	return ""
}

// ambiguousVMKeepers refuses an app whose node has several keeper VMs.
func ambiguousVMKeepers(app, node string, keepers []*VMKeeper) string {
	var ids []string
	for _, k := range keepers {
		ids = append(ids, fmt.Sprint(k.VMID))
	}
	return fmt.Sprintf("app %s: node %s has %d keeper VMs (%s): corral does not guess which owns the app's disks; take corral's tags (corral-managed, corral-keeper) off all but one, after moving their disks to it",
		app, node, len(keepers), strings.Join(ids, ", "))
}

// vmVolumeReasons says in c's reasons what its volumes need: a keeper VM
// created, protection set again, a running VM stopped for its disks to be
// reassigned. It makes an unchanged app's change an Update when they need
// work.
func vmVolumeReasons(c *Change, vm *VM, obs *Observed) {
	moves, creates, repair := false, false, false
	for _, v := range c.Volumes {
		creates = creates || v.Action == VolCreate
		moves = moves || v.Action == VolCreate || v.Action == VolAttach || v.Action == VolDetach
		if why := vmVolumeWhy(v, c.Node); why != "" {
			c.Reasons = append(c.Reasons, why)
		}
	}
	keepers := obs.VMKeepers[c.Node]
	switch {
	case len(keepers) == 0 && (creates || moves):
		c.Reasons = append(c.Reasons, "a keeper VM is created on node "+c.Node+" (never started, protected, no memory reserved) to own the app's retained disks")
	case len(keepers) == 1 && !keepers[0].Protected() && len(c.Volumes) > 0:
		c.Reasons = append(c.Reasons, fmt.Sprintf("keeper VM %d on %s has protection off: it is set again", keepers[0].VMID, c.Node))
		repair = true // a config write: the app's VM need not stop for it
	}
	if c.Action != NoOp && c.Action != Update {
		return
	}
	if moves && vm != nil && vm.Status == "running" && !c.Restart {
		c.Restart = true
		c.Reasons = append(c.Reasons, fmt.Sprintf("VM %d stops for its disks to be reassigned (PVE moves only a stopped VM's disks) and starts again", vm.VMID))
	}
	if c.Action == NoOp && (moves || repair || slices.ContainsFunc(c.Volumes, func(v VolumeChange) bool { return v.Action == VolGrow })) {
		c.Action = Update
	}
}

// vmVolumeWhy is one volume's line in the reasons, "" when it stays.
func vmVolumeWhy(v VolumeChange, node string) string {
	switch v.Action {
	case VolCreate:
		return fmt.Sprintf("volume %s: new %s disk on %s, owned by the keeper VM on %s and attached to the app's VM", v.Name, human.Size(v.Size), v.Storage, node)
	case VolAttach:
		s := fmt.Sprintf("volume %s (%s): attached to the app's VM from the keeper VM", v.Name, v.VolID)
		if v.OldSize < v.Size {
			s += fmt.Sprintf(", then grown %s → %s", human.Size(v.OldSize), human.Size(v.Size))
		}
		return s
	case VolGrow:
		return fmt.Sprintf("volume %s (%s) grows %s → %s in place", v.Name, v.VolID, human.Size(v.OldSize), human.Size(v.Size))
	case VolDetach:
		return fmt.Sprintf("volume %s (%s): detached and kept by the keeper VM", v.Name, v.VolID)
	case VolFree:
		return fmt.Sprintf("free volume %s (%s): reclaim: delete and --delete-volumes", v.Name, v.VolID)
	}
	return ""
}

// vmDeleteVolumes adds to the destroy c of app a's VM vm (nil when the
// VM is gone) its retained disks: detached to the keeper VM, or, with
// deleteVolumes and reclaim: delete, freed there too. a is nil for an
// app removed from the manifest: its disks are only detached.
func vmDeleteVolumes(c *Change, a *App, vm *VM, obs *Observed, deleteVolumes bool) {
	byserial := map[string]Volume{}
	if a != nil {
		for _, v := range a.Volumes {
			byserial[VMVolumeSerial(a.Name, v.Name)] = v
		}
	}
	if vm != nil {
		var names map[string]VolumeKey
		if ks := obs.VMKeepers[vm.Node]; len(ks) == 1 {
			names = ParseVMKeeperNotes(ks[0].Config["description"])
		}
		vd := VMVolumeDisks(vm.Config)
		for _, serial := range slices.Sorted(maps.Keys(vd)) {
			d := vd[serial]
			v, ok := byserial[serial]
			if !ok {
				v = Volume{Name: cmp.Or(names[serial].Name, serial), Reclaim: Retain}
			}
			vc := VolumeChange{Volume: v, Action: VolDetach, VolID: d.Volume, Key: d.Key, OldSize: d.Size, Serial: serial}
			if deleteVolumes && v.Reclaim == DeleteOnDrop {
				vc.Action = VolFree
			}
			c.Volumes = append(c.Volumes, vc)
			delete(byserial, serial)
		}
	}
	if !deleteVolumes {
		return
	}
	for _, node := range slices.Sorted(maps.Keys(obs.VMKeepers)) {
		for _, k := range obs.VMKeepers[node] {
			kd := k.Disks()
			for _, serial := range slices.Sorted(maps.Keys(byserial)) {
				if d, ok := kd[serial]; ok && byserial[serial].Reclaim == DeleteOnDrop {
					c.Volumes = append(c.Volumes, VolumeChange{Volume: byserial[serial], Action: VolFree, VolID: d.Volume, OldSize: d.Size, Serial: serial})
					if c.Node == "" {
						c.Node = node
					}
					c.Action = Delete
				}
			}
		}
	}
	for _, v := range c.Volumes {
		if why := vmVolumeWhy(v, c.Node); why != "" {
			c.Reasons = append(c.Reasons, why)
		}
	}
}
