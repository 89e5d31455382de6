package doctor

import "github.com/corralhq/corral/internal/manifest"

// vm adds what creating, configuring, running and destroying a kind: vm
// app's VM at placement p needs, as qemu-server checks it
// (check_vm_modify_config_perm, the API schema's permissions): on its
// /vms path, the disk's and the image's storages, and its bridge. The
// guest agent's reads are VM.GuestAgent.Audit on PVE 9 and VM.Monitor
// on PVE 8.
func (rs *reqSet) vm(a manifest.App, p Placement) {
	vp, prop := vmPath(p.VMID)
	what := "vm of app " + a.Name
	req := func(priv, op, why string, alt ...string) {
		rs.add(Requirement{Path: vp, Priv: priv, Alt: alt, Propagate: prop, Operation: op, Why: why, App: a.Name})
	}
	// With a static address apply waits for no agent (status asks it
	// when it may): the agent's privilege is then for later.
	agent := func(priv, op, why string, alt ...string) {
		rs.add(Requirement{Path: vp, Priv: priv, Alt: alt, Propagate: prop, Operation: op, Why: why, App: a.Name, Later: a.Network.IP != "" && a.Network.IP != "dhcp"})
	}
	req("VM.Allocate", "create and destroy the "+what, "POST /nodes/{node}/qemu and DELETE …/qemu/{vmid} need VM.Allocate on /vms/<vmid> (corral recreates a VM whose image or disk storage changes)")
	req("VM.Audit", "read the config and status of the "+what, "plan reads each corral VM; /cluster/resources hides guests without VM.Audit")
	req("VM.Config.Disk", "import and grow the disk of the "+what, "scsi0, the cloud-init drive and resize need VM.Config.Disk")
	req("VM.Config.CPU", "set cores of the "+what, "cores needs VM.Config.CPU")
	req("VM.Config.Memory", "set memory and balloon of the "+what, "memory and balloon need VM.Config.Memory")
	req("VM.Config.Network", "set net0 of the "+what, "netN needs VM.Config.Network")
	req("VM.Config.Options", "set name, description, tags, agent and onboot of the "+what, "the other options need VM.Config.Options")
	req("VM.Config.Cloudinit", "set cloud-init's user, keys and address of the "+what, "ciuser, sshkeys, ipconfigN and nameserver need VM.Config.Cloudinit or VM.Config.Network (check_vm_modify_config_perm accepts either)", "VM.Config.Network")
	req("VM.PowerMgmt", "start and shut down the "+what, "status/start and status/shutdown need VM.PowerMgmt")
	if a.VM.BIOS == manifest.BIOSOVMF {
		req("VM.Config.HWType", "set machine q35 of the "+what, "bios: ovmf runs on machine q35, and machine needs VM.Config.HWType")
	}
	rs.add(Requirement{Path: vp, Priv: "VM.Migrate", Propagate: prop, Operation: "move the " + what + " to another node (corral move, corral drain, a change of node:)",
		Why: "POST …/qemu/{vmid}/migrate needs VM.Migrate on /vms/<vmid>; the VM's retained disks go with it", App: a.Name, Later: true})
	if a.VM.Agent {
		if rs.t.major() >= 9 {
			agent("VM.GuestAgent.Audit", "read the addresses the guest agent of the "+what+" reports", "agent/network-get-interfaces needs VM.GuestAgent.Audit on PVE 9", "VM.GuestAgent.Unrestricted")
		} else {
			agent("VM.Monitor", "read the addresses the guest agent of the "+what+" reports", "agent/network-get-interfaces needs VM.Monitor on PVE 8")
		}
	}
	if br := a.Network.Bridge; br != "" {
		rs.add(Requirement{Path: "/sdn/zones/" + SDNZone + "/" + br, Priv: "SDN.Use", Operation: "attach net0 of the " + what + " to bridge " + br, Why: "PVE checks SDN.Use on the bridge's vnet in zone localnetwork for every netN", App: a.Name})
	}
	sid := a.VM.DiskStorage
	rs.add(Requirement{Path: "/storage/" + sid, Priv: "Datastore.AllocateSpace", Operation: "allocate the disk and cloud-init drive of the " + what + " on " + sid, Why: "a new disk needs Datastore.AllocateSpace on its storage", App: a.Name})
	if isid := storageOf(a.VM.Image); isid != "" {
		rs.add(Requirement{Path: "/storage/" + isid, Priv: "Datastore.Audit", Alt: []string{"Datastore.AllocateSpace"}, Operation: "import the disk of the " + what + " from " + a.VM.Image, Why: "import-from reads the image through check_volume_access, which needs Datastore.Audit or Datastore.AllocateSpace on its storage", App: a.Name})
	}
	rs.ha(a, what)
	rs.vmVolumes(a)
}

// vmVolumes adds what a VM app's retained disks need: allocating them on
// their storages, and the keeper VM that owns them (its VMID is not
// known before it exists, so on /vms, propagated), which corral creates,
// allocates disks on, reassigns disks into and out of (move_disk checks
// VM.Config.Disk on both VMs and Datastore.AllocateSpace on the disk's
// storage) and toggles protection of to free one.
func (rs *reqSet) vmVolumes(a manifest.App) {
	if len(a.Volumes) == 0 {
		return
	}
	for _, v := range a.Volumes {
		rs.add(Requirement{Path: "/storage/" + v.Storage, Priv: "Datastore.AllocateSpace", Operation: "allocate and reassign volume " + v.Name + " of app " + a.Name + " on " + v.Storage,
			Why: "a new disk, and moving a disk to another VM, need Datastore.AllocateSpace on its storage", App: a.Name})
	}
	kr := func(priv, op, why string) {
		rs.add(Requirement{Path: "/vms", Priv: priv, Propagate: true, Operation: op, Why: why, App: a.Name})
	}
	kr("VM.Allocate", "create the keeper VM of app "+a.Name+"'s disks", "the keeper VM is a VM; creating it needs VM.Allocate")
	kr("VM.Config.Disk", "hold, attach and free app "+a.Name+"'s disks on the keeper VM", "allocating, reassigning and freeing its disks are disk changes on it")
	kr("VM.Config.Options", "record disks and toggle protection of the keeper VM", "the records live in its description and protection guards them")
	kr("VM.Config.Memory", "set memory of the keeper VM", "create sets memory (never reserved: it never starts)")
	kr("VM.Config.CPU", "set cores of the keeper VM", "create sets cores")
}
