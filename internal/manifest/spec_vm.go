package manifest

// An app's kind: and vm: keys (issue 34): an app runs in an LXC
// container (kind: ct, the default) or in a QEMU/KVM virtual machine
// (kind: vm) booted from a cloud image that cloud-init configures.

// Kinds of app.
const (
	KindCT = "ct"
	KindVM = "vm"
)

// DefaultVMImage is the disk image a VM app imports when it names none:
// the Debian 12 cloud image corral's emulator offers under this name
// (docs/emulator.md, "Virtual machines"). On real PVE, upload a cloud
// image to a storage's import/ directory (PVE 8.2+) and name it.
const DefaultVMImage = "local:import/debian-12-corral-vm.qcow2"

// The firmware a VM app boots (vm.bios), PVE's bios values.
const (
	BIOSSeaBIOS = "seabios"
	BIOSOVMF    = "ovmf"
)

// Defaults of a VM app's keys.
const (
	defaultVMUser     = "debian"
	defaultVMDiskSize = "8G"
	minVMDisk         = 1 * GiB
	minVMDiskWhy      = "the cloud image is imported into it and grown to this size; Debian's cloud images take 2G"
)

var kindSpec = &field{key: "kind", kind: kindString, def: KindCT, enum: []string{KindCT, KindVM},
	doc: "What the app runs in: ct, an LXC container from a template; vm, a QEMU/KVM virtual machine booted from a cloud image " +
		"(its own kernel and stronger isolation, at a cost in host memory: a VM's memory is reserved on the host as a whole). " +
		"A vm app takes the keys of vm:, volumes (retained disks), provision and health (run over SSH as vm.user, through sudo, at the static network.ip or the address the guest agent reports), " +
		"backup: (app-consistent through the guest agent's fs-freeze), snapshotBeforeChange, firewall (its NIC gets firewall=1) and ha (an HA resource vm:<vmid>, its disk and volumes on shared storage)."}

var vmSpec = &field{key: "vm", kind: kindObject,
	doc: "The virtual machine of a kind: vm app: its disk, the image it starts from, memory ballooning, cloud-init's user and the guest agent. " +
		"cores, memory, network, tags, onboot, description and ssh.publicKeys (the cloud-init user's keys) are the app's.",
	fields: []*field{
		{key: "image", kind: kindString, def: DefaultVMImage, maxLen: 255,
			doc: "Disk image the VM's disk is imported from (PVE's import-from), a volume of content import or images, e.g. local:import/debian-12-genericcloud-amd64.qcow2. " +
				"Default: the Debian 12 cloud image corral's emulator offers; on real PVE upload a cloud image to a storage's import/ directory (PVE 8.2+) and name it here.",
			pattern: `^[a-zA-Z][a-zA-Z0-9._-]*[a-zA-Z0-9]:[^\s,;:][^\s,;:]*$`,
			allowed: "a volume ID STORAGE:NAME, e.g. local:import/debian-12-genericcloud-amd64.qcow2"},
		{key: "disk", kind: kindObject,
			doc: "The VM's system disk (scsi0). It is replaced with the VM, so it holds no data corral keeps: put data on volumes, which a keeper VM retains.",
			fields: []*field{
				{key: "storage", kind: kindString, def: defaultStorage,
					doc: "PVE storage to allocate the disk on.", pattern: storagePattern, allowed: storageAllowed},
				{key: "size", kind: kindSize, def: defaultVMDiskSize, minSize: minVMDisk, minSizeWhy: minVMDiskWhy,
					doc: "Size of the disk, e.g. 16G, at least 1G: the imported image is grown to it. It can grow in place but not shrink."},
			}},
		{key: "balloon", kind: kindInt, def: int64(0), min: 0,
			doc: "Minimum memory in MiB the balloon driver may shrink the VM to; 0 turns ballooning off, so the host reserves the whole memory."},
		{key: "user", kind: kindString, def: defaultVMUser,
			doc: "The user cloud-init creates, with ssh.publicKeys (and corral's own key) as its keys and sudo without a password; corral logs in as this user to run provision steps and health checks, through sudo.", pattern: userNamePattern, allowed: userNameAllowed},
		{key: "agent", kind: kindBool, def: true,
			doc: "Enable the QEMU guest agent (agent: 1): PVE then shuts the VM down through it, and corral reads the VM's addresses from it. The image must run qemu-guest-agent."},
		{key: "bios", kind: kindString, def: BIOSSeaBIOS, enum: []string{BIOSSeaBIOS, BIOSOVMF},
			doc: "The VM's firmware: seabios (PVE's default, a legacy BIOS) or ovmf (UEFI, with Secure Boot). ovmf gives the VM an EFI vars disk (efidisk0, efitype=4m with the distribution's and Microsoft's keys pre-enrolled) on vm.disk.storage " +
				"and machine q35, on which PVE's Secure Boot firmware runs; the image must boot under UEFI (Debian's cloud images boot under both). A change recreates the VM, as a new image does."},
		{key: "addressWait", kind: kindDuration, def: "5m",
			doc: "How long apply waits after a start for the guest agent to report an address (with agent on and ip: dhcp); a static ip is known from the config and not waited for."},
	}}

// ctOnlyKeys are the app keys a kind: vm app may not write, each with why.
var ctOnlyKeys = []struct{ key, why string }{
	{"template", "a VM boots from vm.image, not an LXC template"},
	{"unprivileged", "it is a container setting"},
	{"swap", "it is a container setting; a VM's swap is inside the guest"},
	{"rootfs", "a VM's disk is vm.disk"},
	{"features", "container feature flags do not apply to a VM"},
	{"password", "give the cloud-init user ssh.publicKeys instead"},
}

// An app needs template: unless it is a VM, and its volumes mount: but
// a VM's, which take no mount or adopt (buildKind checks the same).
func init() {
	appSpec.anyOf = []any{
		map[string]any{"required": []string{"template"},
			"properties": map[string]any{"volumes": map[string]any{"items": map[string]any{"required": []string{"mount"}}}}},
		map[string]any{"required": []string{"kind"}, "properties": map[string]any{
			"kind":    map[string]any{"enum": []any{KindVM}},
			"volumes": map[string]any{"items": map[string]any{"not": map[string]any{"anyOf": []any{map[string]any{"required": []string{"mount"}}, map[string]any{"required": []string{"adopt"}}}}}},
		}},
	}
}
