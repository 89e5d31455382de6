package manifest

import (
	"fmt"
	"time"
)

// VM is a kind: vm app's vm: keys. The app's cores, memory, network,
// tags, onboot, description and SSH keys are App's own fields.
type VM struct {
	Image       string // volid import-from names
	DiskStorage string
	DiskSize    Size
	BalloonMiB  int // 0: ballooning off
	User        string
	Agent       bool
	// AddressWait bounds apply's wait for the agent to report an address.
	AddressWait time.Duration
	// BIOS is BIOSSeaBIOS or BIOSOVMF.
	BIOS string
}

// IsVM reports whether the app runs in a virtual machine.
func (a *App) IsVM() bool { return a.Kind == KindVM }

// KindName is the app's kind as written in a manifest: KindVM or KindCT.
func (a *App) KindName() string {
	if a.IsVM() {
		return KindVM
	}
	return KindCT
}

// buildKind sets the app's kind and, for a VM, its vm: keys. It refuses
// what does not fit the kind: a container's keys on a VM app (each with
// why, and what is not there yet said so), vm: on a container, and a
// container without its template (template: is required only of kind: ct).
func (d *decoder) buildKind(v *value, a *App) {
	if v.strOr("kind") != KindVM {
		if vm := v.member("vm"); vm != nil {
			d.report(vm.node, vm.path, "vm: is only for a kind: vm app; add kind: vm to run the app in a virtual machine, or remove vm:", "")
		}
		if v.member("template") == nil && v.obj["template"] == nil {
			d.report(v.node, joinPath(v.path, "template"), "required key is missing", "")
		}
		d.kindVolumes(v, false)
		return
	}
	a.Kind = KindVM
	for _, k := range ctOnlyKeys {
		if m := v.obj[k.key]; m != nil {
			d.report(m.node, m.path, fmt.Sprintf("a kind: vm app takes no %s: %s; remove it, or use kind: ct", k.key, k.why), "")
		}
	}
	d.kindVolumes(v, true)
	vm := v.object("vm")
	disk := vm.object("disk")
	a.VM = &VM{Image: vm.strOr("image"), DiskStorage: disk.strOr("storage"), DiskSize: disk.sizeOr("size"),
		BalloonMiB: int(vm.intOr("balloon")), User: vm.strOr("user"), Agent: vm.boolOr("agent"), AddressWait: vm.durOr("addressWait"),
		BIOS: vm.strOr("bios")}
	if a.VM.BalloonMiB > a.MemoryMiB {
		if b := vm.member("balloon"); b != nil {
			d.report(b.node, b.path, fmt.Sprintf("balloon %d MiB is more than the app's memory (%d MiB); write at most memory, or 0 to turn ballooning off", a.VM.BalloonMiB, a.MemoryMiB), "")
		}
	}
}

// kindVolumes checks a volume's keys against the app's kind. A
// container app's volumes must say where they mount. A VM app's may not
// have a mount path (a VM's volume is a disk; PVE's cloud-init keys
// cannot format or mount it, so the guest mounts it by the serial corral
// gives it) nor adopt (taking over an existing disk is not there yet for
// VMs).
func (d *decoder) kindVolumes(v *value, vm bool) {
	for _, vv := range v.members("volumes") {
		if !vv.ok {
			continue
		}
		m := vv.obj["mount"]
		switch {
		case !vm && m == nil:
			d.report(vv.node, joinPath(vv.path, "mount"), "required key is missing", "")
		case vm && m != nil:
			d.report(m.node, m.path, "a kind: vm app's volume takes no mount: it is attached to the VM as a disk (scsiN) whose serial corral status shows; "+
				"format and mount it in the guest by /dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_<serial>; remove mount, or use kind: ct", "")
		}
		if m := vv.obj["adopt"]; vm && m != nil {
			d.report(m.node, m.path, "a kind: vm app's volume takes no adopt: taking over an existing disk is not there yet for VMs; remove adopt to allocate a new volume", "")
		}
	}
}
