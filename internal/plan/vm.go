package plan

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/manifest"
)

// KindVM is Change.Kind of a VM app's change (issue 34); a container's
// change has Kind "".
const KindVM = manifest.KindVM

// VMSpec is a kind: vm app's virtual machine, converted once from
// manifest.VM (sizes in bytes). The app's cores, memory, network, tags,
// onboot, description and SSH keys are App's own fields.
type VMSpec struct {
	Image       string // the volid import-from names
	DiskStorage string
	DiskSize    int64
	BalloonMiB  int // 0: ballooning off
	User        string
	Agent       bool
	AddressWait time.Duration
	BIOS        string // manifest.BIOSSeaBIOS or manifest.BIOSOVMF
}

// vmSpecOf is m's VMSpec, nil for a container app.
func vmSpecOf(m manifest.App) *VMSpec {
	if m.VM == nil {
		return nil
	}
	v := m.VM
	return &VMSpec{Image: v.Image, DiskStorage: v.DiskStorage, DiskSize: v.DiskSize.Bytes(), BalloonMiB: v.BalloonMiB,
		User: v.User, Agent: v.Agent, AddressWait: v.AddressWait, BIOS: v.BIOS}
}

// VM is one observed virtual machine of corral's: tagged as an app's, or
// (in Observed.MarkedVMs) carrying corral's marker in its Notes without
// the tags.
type VM struct {
	VMID    int
	Node    string
	Project string // its corral-project-<project> tag, "" for none
	Status  string // running | stopped
	Config  map[string]string
	// Digest is PVE's digest of the config as read: the update is sent
	// with it, so a change made meanwhile fails instead of being lost.
	Digest string
	// Pending are keys whose change waits for the next start.
	Pending []string
	// Firewall is its firewall as read, only for an app that declares
	// one (nil: not read, and the plan says nothing of it).
	Firewall *ObservedFirewall
	// HA is its HA resource vm:<vmid>, nil when it has none; HAState
	// the state PVE's HA has it in (/cluster/resources' hastate).
	HA      *HAResource
	HAState string
}

// The VM's Notes carry corral's header and these lines besides
// corral-app and corral-declared: a VM has no template to name.
const (
	markerKind  = "corral-kind: "
	markerImage = "corral-image: "
)

// VMDescription is a VM app's Notes: the user's text, corral's header
// and its marker lines (app, kind, image, declarer), read back by
// ParseMarker (App, Declared) and vmImageOf.
func VMDescription(a App) string {
	var b strings.Builder
	if d := strings.TrimSpace(a.Description); d != "" {
		b.WriteString(d + "\n\n")
	}
	b.WriteString(markerHeader + "\n")
	b.WriteString(markerApp + a.Name + "\n")
	b.WriteString(markerKind + KindVM + "\n")
	b.WriteString(markerImage + a.VM.Image + "\n")
	if a.Origin != "" {
		b.WriteString(markerDeclared + a.Origin + "\n")
	}
	return b.String()
}

// vmImageOf is the image a VM's Notes say it was imported from.
func vmImageOf(desc string) string {
	for _, line := range manifest.DescriptionLines(desc) {
		if v, ok := strings.CutPrefix(manifest.MarkerLine(line), markerImage); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// VMDisk is the drive key of a VM app's disk.
const VMDisk = "scsi0"

// VMConfig is the config corral writes for a VM app, key by key in PVE's
// spelling, without the disks (create adds them, VMCreateDisks). A plan
// compares these keys with the VM's (vmEdits).
func VMConfig(a App) map[string]string {
	v := a.VM
	conf := map[string]string{
		"name":        a.Name,
		"cores":       strconv.Itoa(a.Cores),
		"memory":      strconv.Itoa(a.MemoryMiB),
		"balloon":     strconv.Itoa(v.BalloonMiB),
		"agent":       boolDigit(v.Agent),
		"net0":        vmNet0(a),
		"ipconfig0":   vmIPConfig(a),
		"ciuser":      v.User,
		"onboot":      boolDigit(a.OnBoot),
		"tags":        strings.Join(AppTags(a), ";"),
		"description": VMDescription(a),
	}
	if len(a.SSHKeys) > 0 {
		conf["sshkeys"] = encodeSSHKeys(a.SSHKeys)
	}
	if len(a.DNS) > 0 {
		conf["nameserver"] = strings.Join(a.DNS, " ")
	}
	if v.BIOS == manifest.BIOSOVMF {
		// qemu-server runs the Secure Boot firmware (OVMF_CODE_4M.secboot.fd,
		// which needs SMM) only on q35; on i440fx it would take the
		// firmware without SMM and the pre-enrolled keys would guard less.
		conf["bios"], conf["machine"] = manifest.BIOSOVMF, "q35"
	}
	return conf
}

// VMEFIDisk is the EFI vars disk of a bios: ovmf VM: the 4 MiB vars
// template with the distribution's and Microsoft's keys, as PVE's web
// UI creates it (the 1 is ignored: qemu-server allocates the vars'
// size).
const VMEFIDisk = ":1,efitype=4m,pre-enrolled-keys=1"

// vmNet0 is the VM's NIC on the app's bridge, with PVE's firewall=1 when
// the app declares a firewall: only a NIC with the flag goes through
// the guest's firewall bridge, so the rules filter nothing without it.
func vmNet0(a App) string {
	if a.Firewall != nil {
		return "virtio,bridge=" + a.Bridge + ",firewall=1"
	}
	return "virtio,bridge=" + a.Bridge
}

// VMCreateDisks are the drives of a new VM: its disk imported from the
// image (PVE takes the image's size; apply grows it to DiskSize after)
// and the cloud-init drive on the same storage, and with bios: ovmf the
// EFI vars disk there too.
func VMCreateDisks(a App) map[string]string {
	disks := map[string]string{
		VMDisk: a.VM.DiskStorage + ":0,import-from=" + a.VM.Image,
		"ide2": a.VM.DiskStorage + ":cloudinit",
	}
	if a.VM.BIOS == manifest.BIOSOVMF {
		disks["efidisk0"] = a.VM.DiskStorage + VMEFIDisk
	}
	return disks
}

// vmBIOSOf is the firmware a VM's config boots: PVE's default when it
// names none.
func vmBIOSOf(conf map[string]string) string {
	if b := conf["bios"]; b != "" {
		return b
	}
	return manifest.BIOSSeaBIOS
}

// vmIPConfig is ipconfig0: DHCP, or the static address and gateway.
func vmIPConfig(a App) string {
	if a.IP == "" || a.IP == "dhcp" {
		return "ip=dhcp"
	}
	s := "ip=" + a.IP
	if a.Gateway != "" {
		s += ",gw=" + a.Gateway
	}
	return s
}

// StaticAddress is the IPv4 address a VM app's config gives it (without
// the prefix length), "" for DHCP: apply need not wait for the agent.
func StaticAddress(a *App) string {
	if a.IP == "" || a.IP == "dhcp" {
		return ""
	}
	addr, _, _ := strings.Cut(a.IP, "/")
	return addr
}

// encodeSSHKeys is the sshkeys value qemu-server stores: the keys one a
// line, URI-escaped (%20 for a space), as pve.EncodeSSHKeys sends them.
func encodeSSHKeys(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strings.ReplaceAll(url.QueryEscape(strings.TrimSpace(k)), "+", "%20"))
		b.WriteString("%0A")
	}
	return b.String()
}

// sameSSHKeys compares two sshkeys values by the keys they hold, however
// each was escaped (a key added in the web UI is escaped by the browser).
func sameSSHKeys(a, b string) bool {
	ka, errA := url.PathUnescape(a)
	kb, errB := url.PathUnescape(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return slices.Equal(strings.Fields(ka), strings.Fields(kb))
}

// VMCost is what a VM app costs the host in memory, in the plan's words
// (seed 004: a VM's memory is allocated as a whole; the same workload
// took about +2 GB of host RAM in a VM against +211 MB in a container).
func VMCost(a *App) string {
	if a.VM.BalloonMiB == 0 {
		return fmt.Sprintf("vm: %d MiB reserved on the host (no ballooning; a container would take only what it uses)", a.MemoryMiB)
	}
	return fmt.Sprintf("vm: %d MiB reserved on the host while it runs, down to %d MiB as the balloon driver gives memory back", a.MemoryMiB, a.VM.BalloonMiB)
}
