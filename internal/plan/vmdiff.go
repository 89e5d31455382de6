package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/pvesize"
	"github.com/corralhq/corral/internal/ui/human"
)

// vmRestartKeys are the keys whose change a running VM takes only at its
// next start: the hardware, and cloud-init's, which qemu-server writes
// into the cloud-init drive when the VM starts. The others (name, tags,
// onboot, description, and net0, which PVE hot-plugs) apply at once.
var vmRestartKeys = []string{"cores", "memory", "balloon", "agent", "ciuser", "sshkeys", "ipconfig0", "nameserver"}

// vmChange compares VM vm with app a: a new image, disk storage or bios
// recreates the VM (its disk holds nothing corral keeps), a larger disk
// grows in place, a smaller one is refused, and the other keys are edited
// in place; a stopped VM is started.
func vmChange(a *App, vm *VM) (Change, []string) {
	c := Change{App: a.Name, Kind: KindVM, Node: vm.Node, VMID: vm.VMID, Digest: vm.Digest, Desired: a}
	disk := ParseVMDisk(vm.Config[VMDisk])
	var replace []string
	if img := vmImageOf(vm.Config["description"]); img != a.VM.Image {
		replace = append(replace, fmt.Sprintf("image %s → %s: the disk is imported anew", orNone(img), a.VM.Image))
	}
	if disk.Storage != a.VM.DiskStorage {
		replace = append(replace, fmt.Sprintf("disk storage %s → %s", orNone(disk.Storage), a.VM.DiskStorage))
	}
	if have, want := vmBIOSOf(vm.Config), vmBIOSOf(map[string]string{"bios": a.VM.BIOS}); have != want {
		replace = append(replace, fmt.Sprintf("bios %s → %s: the image boots anew under the other firmware (ovmf with its EFI vars disk and machine q35)", have, want))
	}
	if a.VMID != 0 && a.VMID != vm.VMID {
		replace = append(replace, fmt.Sprintf("vmid %d → %d", vm.VMID, a.VMID))
	}
	if len(replace) > 0 {
		c.Action, c.OldVMID, c.VMID, c.Start = Replace, vm.VMID, a.VMID, true
		c.Reasons = append(replace, fmt.Sprintf("VM %d is destroyed with its system disk and a new one created: the system disk holds no data corral keeps (the app's volumes do, and the keeper VM keeps them)", vm.VMID), VMCost(a))
		vmGuest(&c, a, nil)
		return c, nil
	}
	if disk.Size > a.VM.DiskSize {
		return c, []string{fmt.Sprintf("app %s: disk %s of VM %d is %s, the manifest asks %s: a disk cannot shrink; set vm.disk.size to %s or more",
			a.Name, VMDisk, vm.VMID, human.Size(disk.Size), human.Size(a.VM.DiskSize), pvesize.Format(disk.Size))}
	}
	if disk.Size < a.VM.DiskSize {
		c.RootGrow = a.VM.DiskSize
		c.Reasons = append(c.Reasons, fmt.Sprintf("disk %s grows %s → %s in place", VMDisk, human.Size(disk.Size), human.Size(a.VM.DiskSize)))
	}
	c.Config = vmEdits(a, vm)
	running := vm.Status == "running"
	for _, e := range c.Config {
		c.Restart = c.Restart || e.Restart && running
	}
	if running && len(vm.Pending) > 0 {
		c.Restart = true
		c.Reasons = append(c.Reasons, fmt.Sprintf("changes wait in VM %d's pending section (%s): it restarts to take them", vm.VMID, strings.Join(vm.Pending, ", ")))
	}
	if c.Restart {
		c.Reasons = append(c.Reasons, fmt.Sprintf("VM %d restarts (shutdown, start) to take the changes PVE applies at the next start", vm.VMID))
	}
	if !running && !vmHAOwned(vm) { // an HA VM's running state is HA's
		c.Start = true
		c.Reasons = append(c.Reasons, fmt.Sprintf("VM %d is %s: it is started", vm.VMID, vm.Status))
	}
	vmGuest(&c, a, vm)
	if len(c.Config) > 0 || c.RootGrow > 0 || c.Restart || c.Start || c.Guest {
		c.Action = Update
		c.Reasons = append(c.Reasons, VMCost(a))
	}
	return c, nil
}

// vmEdits are the keys of the VM's config that differ from what the app
// wants (VMConfig), each compared as PVE may spell it.
func vmEdits(a *App, vm *VM) []ConfigEdit {
	want := VMConfig(*a)
	want["description"] = vmKeptDescription(want["description"], vm.Config["description"])
	var edits []ConfigEdit
	for _, key := range slices.Sorted(maps.Keys(want)) {
		have, w := vm.Config[key], want[key]
		if key == "sshkeys" {
			have = vmUserKeys(have)
		}
		if sameVMValue(key, have, w) {
			continue
		}
		if key == "net0" {
			w = mergeVMNet(w, have)
		}
		edits = append(edits, ConfigEdit{Key: key, Old: have, New: w, Restart: slices.Contains(vmRestartKeys, key)})
	}
	for _, key := range []string{"sshkeys", "nameserver"} {
		if _, wanted := want[key]; !wanted && vm.Config[key] != "" && (key != "sshkeys" || vmUserKeys(vm.Config[key]) != "") {
			edits = append(edits, ConfigEdit{Key: key, Old: vm.Config[key], New: "", Restart: true})
		}
	}
	return edits
}

// sameVMValue compares one key's value as read with the wanted one.
func sameVMValue(key, have, want string) bool {
	switch key {
	case "sshkeys":
		return sameSSHKeys(have, want)
	case "tags":
		return slices.Equal(ParseTags(have), ParseTags(want))
	case "description":
		return strings.TrimSpace(have) == strings.TrimSpace(want)
	case "agent":
		return truthy(agentEnabled(have)) == truthy(want)
	case "onboot":
		return truthy(have) == truthy(want)
	case "machine":
		// PVE may pin the version a VM was made with (pc-q35-9.2).
		return have == want || want == "q35" && strings.HasPrefix(have, "pc-q35-")
	case "net0":
		// A firewall flag the app does not ask for is left alone, as is
		// the firewall of an app that declares none.
		h, w := vmNet(have), vmNet(want)
		return h.model == w.model && h.bridge == w.bridge && (!w.firewall || h.firewall)
	}
	return have == want
}

// agentEnabled is the enabled flag of an agent value ("1",
// "enabled=1,fstrim_cloned_disks=1").
func agentEnabled(v string) string {
	first, _, _ := strings.Cut(v, ",")
	if e, ok := strings.CutPrefix(first, "enabled="); ok {
		return e
	}
	return first
}

// vmNIC is a netN value's model, MAC, bridge and firewall flag.
type vmNIC struct {
	model, mac, bridge string
	firewall           bool
}

// vmNet parses "virtio=BC:24:11:…,bridge=vmbr0" (or "virtio,bridge=…").
func vmNet(v string) vmNIC {
	var n vmNIC
	for i, item := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(item, "=")
		switch {
		case i == 0:
			n.model, n.mac = k, val
		case k == "bridge":
			n.bridge = val
		case k == "firewall":
			n.firewall = truthy(val)
		}
	}
	return n
}

// mergeVMNet keeps the VM's MAC address in a new net0 of the same model,
// so a bridge change does not give the guest a new NIC identity.
func mergeVMNet(want, have string) string {
	h, w := vmNet(have), vmNet(want)
	if h.mac == "" || h.model != w.model {
		return want
	}
	return strings.Replace(want, w.model, w.model+"="+h.mac, 1)
}

// VMDiskInfo is a VM drive value, parsed: its volume, that volume's
// storage and its size in bytes (0 when not written).
type VMDiskInfo struct {
	Volume, Storage string
	Size            int64
}

// ParseVMDisk parses a drive value such as
// "local-lvm:vm-120-disk-0,iothread=1,size=8G".
func ParseVMDisk(v string) VMDiskInfo {
	var d VMDiskInfo
	for i, item := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(item, "=")
		switch {
		case i == 0:
			d.Volume = k
			d.Storage, _, _ = strings.Cut(k, ":")
		case k == "size":
			if n, err := pvesize.Parse(val); err == nil {
				d.Size = n
			}
		}
	}
	return d
}

// removedVMs plans the destroy of this project's VMs whose app the
// manifest no longer lists. Under a defaulted project only a VM this
// manifest declared goes (a directory's name may be shared).
func (m *planner) removedVMs(apps []App) []Change {
	project := projectOf(apps)
	if project == "" {
		return nil
	}
	listed := map[string]bool{}
	for _, a := range apps {
		listed[a.Name] = true
	}
	origin, explicit := originOf(apps)
	var out []Change
	for _, name := range slices.Sorted(maps.Keys(m.obs.VMs)) {
		if listed[name] {
			continue
		}
		for _, vm := range m.obs.VMs[name] {
			declared := ParseMarker(vm.Config["description"]).Declared
			switch {
			case vm.Project != project || ParseMarker(vm.Config["description"]).CopyOf != "":
				continue // another project's, or a copy restored --as a name no manifest lists (CT.Copy)
			case slices.Contains(m.obs.Offline, vm.Node):
				m.warn(fmt.Sprintf("app %s was removed from the manifest, but node %s is offline; VM %d is left alone until the node is back", name, vm.Node, vm.VMID))
				continue
			case !explicit && declared != origin:
				m.refuse(fmt.Sprintf("app %s was removed from this manifest, but its VM %d was declared by %s under the same defaulted project %s; set project: in the manifest that owns it, or destroy it from there", name, vm.VMID, declarer(declared), project))
				continue
			}
			c := vmDelete(name, vm, "app "+name+" was removed from the manifest")
			vmDeleteVolumes(&c, nil, vm, m.obs, false)
			out = append(out, c)
		}
	}
	return out
}

// vmDelete is the destroy of VM vm of app, with its disks.
func vmDelete(app string, vm *VM, why string) Change {
	return Change{App: app, Kind: KindVM, Node: vm.Node, VMID: vm.VMID, OldVMID: vm.VMID, Digest: vm.Digest, Action: Delete,
		Reasons: []string{why, fmt.Sprintf("destroy VM %d (%s) with its disks", vm.VMID, vm.Status)}}
}

// destroyVMApp is corral destroy's change for a VM app: its VM goes with
// its system disk, its retained disks go back to the keeper VM (freed
// there with deleteVolumes and reclaim: delete). Another project's VM
// is refused; one on an offline node is left alone with its disks.
func destroyVMApp(a *App, obs *Observed, deleteVolumes bool) (c Change, refused, warns []string) {
	c = Change{App: a.Name, Kind: KindVM, Action: NoOp, Desired: a}
	vms := obs.VMs[a.Name]
	for _, vm := range obs.MarkedVMs {
		if ParseMarker(vm.Config["description"]).App == a.Name {
			refused = append(refused, MarkedVMProblem(a.Name, a.Project, vm))
		}
	}
	if len(vms) > 1 {
		refused = append(refused, fmt.Sprintf("app %s has %d VMs tagged as its own: corral does not guess which to destroy; take corral's tags off the others first", a.Name, len(vms)))
	}
	for _, vm := range vms {
		switch {
		case a.Project != "" && vm.Project != "" && vm.Project != a.Project:
			refused = append(refused, fmt.Sprintf("app %s: VM %d carries the tag %s%s: it is project %s's, and corral destroys only this project's (%s) guests", a.Name, vm.VMID, TagProjectPrefix, vm.Project, vm.Project, a.Project))
		case slices.Contains(obs.Offline, vm.Node):
			warns = append(warns, fmt.Sprintf("app %s: node %s is offline; VM %d is left alone until the node is back", a.Name, vm.Node, vm.VMID))
		default:
			c = vmDelete(a.Name, vm, "corral destroy")
			c.Desired = a
			vmDeleteVolumes(&c, a, vm, obs, deleteVolumes)
		}
	}
	if len(vms) == 0 {
		vmDeleteVolumes(&c, a, nil, obs, deleteVolumes)
	}
	return c, refused, warns
}
