package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// A keeper VM is to a kind: vm app's retained disks what the keeper CT is
// to a container's volumes: a protected, never-started VM per node that
// owns them whenever no app VM holds them, so that no destroy or
// recreate of an app VM frees them. PVE reassigns a disk only between
// two VMs on one node (qemu-server's move_disk with target-vmid; never
// between a VM and a container), the source stopped, renaming the
// volume for its new owner (vm-<target>-disk-K): the volid does not say
// whose data a disk is. The disk's serial does: corral gives each
// retained disk the serial VMVolumeSerial(app, name), which travels with
// the drive through every reassign and names the disk in the guest
// (/dev/disk/by-id/…_<serial>). The keeper VM's Notes repeat serial and
// volume for people, and to recognize it when its tags were edited.

// VMKeeper is a node's keeper VM as observed: tagged corral-managed and
// corral-keeper as a keeper CT is, told apart by its type (qemu).
type VMKeeper struct {
	VMID   int
	Node   string
	Config map[string]string
	Digest string
}

// Disks are the retained disks it holds, by serial.
func (k *VMKeeper) Disks() map[string]VMVolumeDisk { return VMVolumeDisks(k.Config) }

// Protected reports whether protection is on.
func (k *VMKeeper) Protected() bool { return truthy(k.Config["protection"]) }

// vmSerialPrefix starts every retained disk's serial; PVE allows at
// most 20 characters of [-%a-zA-Z0-9_] there.
const vmSerialPrefix = "crl-"

// VMVolumeSerial is the serial of app's retained disk name: the prefix
// and 16 hex digits of a hash of "app/name", the same on every run.
func VMVolumeSerial(app, name string) string {
	sum := sha256.Sum256([]byte(app + "/" + name))
	return vmSerialPrefix + hex.EncodeToString(sum[:8])
}

// VMVolumeDisk is one drive of a VM that carries a retained disk's serial.
type VMVolumeDisk struct {
	Key    string // scsiN, virtioN, …
	Volume string // its volid as now named
	Serial string
	Size   int64
}

// VMVolumeDisks are the drives of conf whose serial marks them as
// retained disks, by serial. Drives only: an unusedN entry carries no
// options, so a disk there has lost its serial.
func VMVolumeDisks(conf map[string]string) map[string]VMVolumeDisk {
	out := map[string]VMVolumeDisk{}
	for key, v := range conf {
		if !isVMDriveKey(key) {
			continue
		}
		serial := driveOption(v, "serial")
		if !strings.HasPrefix(serial, vmSerialPrefix) {
			continue
		}
		d := ParseVMDisk(v)
		out[serial] = VMVolumeDisk{Key: key, Volume: d.Volume, Serial: serial, Size: d.Size}
	}
	return out
}

// isVMDriveKey reports whether key names a VM drive (ide, sata, scsi,
// virtio and a number).
func isVMDriveKey(key string) bool {
	for _, p := range []string{"scsi", "virtio", "sata", "ide"} {
		if n, ok := strings.CutPrefix(key, p); ok && n != "" {
			_, err := strconv.Atoi(n)
			return err == nil
		}
	}
	return false
}

// driveOption is option k of a drive value, "" when absent.
func driveOption(v, k string) string {
	for _, item := range strings.Split(v, ",")[1:] {
		if val, ok := strings.CutPrefix(item, k+"="); ok {
			return val
		}
	}
	return ""
}

// VMFreeDriveKey is the first free scsi key (scsi0 to scsi30, PVE's
// range) of conf at or after scsiFIRST, "" when all are taken.
func VMFreeDriveKey(conf map[string]string, first int) string {
	for n := first; n <= 30; n++ {
		if _, used := conf["scsi"+strconv.Itoa(n)]; !used {
			return "scsi" + strconv.Itoa(n)
		}
	}
	return ""
}

// VMVolumeDrive is the drive value that allocates volume v of app on
// its storage (STORAGE:SIZE_IN_GiB), with its serial and backup flag.
func VMVolumeDrive(app string, v Volume) string {
	return fmt.Sprintf("%s:%s,serial=%s,backup=%s", v.Storage, GiB(v.Size), VMVolumeSerial(app, v.Name), boolDigit(v.Backup))
}

// The keeper VM's Notes: a header and one line per disk it was given.
const (
	vmKeeperHeader = "corral keeper VM: this virtual machine owns the disks corral keeps for its kind: vm apps; corral writes these Notes and reads them back. " +
		"Never start it, keep protection on, and edit neither these lines nor its disks' serials: each serial names whose data a disk holds."
	markerVMVolume = "corral-vm-volume: "
)

// VMKeeperDescription is the keeper VM's Notes for records (serial →
// volume), with no project lines.
func VMKeeperDescription(records map[string]VolumeKey) string {
	return VMKeeperNotes{Disks: records}.String()
}

// VMKeeperNotes is everything corral writes in a keeper VM's Notes: the
// volume of each disk (by serial) and, per app, its project and the
// OriginID of the manifest that declared it, the lines a keeper CT
// keeps (KeeperNotes.Projects, Declared). Once an app's VM is gone they
// are what says whose its disks are: corral volumes prune frees only
// this project's, and under a defaulted project only those this
// manifest declared.
type VMKeeperNotes struct {
	Disks    map[string]VolumeKey
	Projects map[string]string
	Declared map[string]string
}

// ReadVMKeeperNotes reads a keeper VM's Notes.
func ReadVMKeeperNotes(desc string) VMKeeperNotes {
	return VMKeeperNotes{Disks: ParseVMKeeperNotes(desc), Projects: ParseKeeperProjects(desc), Declared: ParseKeeperDeclared(desc)}
}

// String writes the Notes: the header, the disks' lines, then the
// project and declarer lines of the apps a disk line still names (an
// app's lines go with its last disk).
func (n VMKeeperNotes) String() string {
	var b strings.Builder
	b.WriteString(vmKeeperHeader + "\n")
	apps := map[string]bool{}
	for _, serial := range slices.Sorted(maps.Keys(n.Disks)) {
		fmt.Fprintf(&b, "%s%s=%s\n", markerVMVolume, n.Disks[serial], serial)
		apps[n.Disks[serial].App] = true
	}
	for _, app := range slices.Sorted(maps.Keys(n.Projects)) {
		if apps[app] && n.Projects[app] != "" {
			fmt.Fprintf(&b, "%s%s=%s\n", markerProject, app, n.Projects[app])
		}
	}
	for _, app := range slices.Sorted(maps.Keys(n.Declared)) {
		if apps[app] && n.Declared[app] != "" {
			fmt.Fprintf(&b, "%s%s=%s\n", markerDeclared, app, n.Declared[app])
		}
	}
	return b.String()
}

// Note records app's disk serial as volume name, with the app's project
// and declaring manifest (origin; OriginID is what is kept) when known.
func (n *VMKeeperNotes) Note(serial string, app, name, project, origin string) {
	if n.Disks == nil {
		n.Disks = map[string]VolumeKey{}
	}
	n.Disks[serial] = VolumeKey{App: app, Name: name}
	if project != "" {
		if n.Projects == nil {
			n.Projects = map[string]string{}
		}
		n.Projects[app] = project
	}
	if origin != "" {
		if n.Declared == nil {
			n.Declared = map[string]string{}
		}
		n.Declared[app] = OriginID(origin)
	}
}

// ParseVMKeeperNotes reads the records of a keeper VM's Notes (serial →
// volume).
func ParseVMKeeperNotes(desc string) map[string]VolumeKey {
	out := map[string]VolumeKey{}
	for k, serial := range markerPairs(desc, markerVMVolume) {
		app, name, ok := strings.Cut(strings.TrimSpace(k), "/")
		if ok && app != "" && name != "" {
			out[strings.TrimSpace(serial)] = VolumeKey{App: app, Name: name}
		}
	}
	return out
}

// ReadDamagedVM says whether a VM without corral's keeper tag shows a
// keeper VM's other signals (its Notes' header or records, or its name
// with retained disks), and how; nil for any other VM. Such a VM may
// hold apps' data: the plan refuses those apps, and creates no keeper VM
// or retained disk on its node, until its tags are back.
func ReadDamagedVM(vmid int, node, name string, tags []string, conf map[string]string) *Damaged {
	if slices.Contains(tags, TagKeeper) || ParseMarker(conf["description"]).App != "" {
		return nil
	}
	desc := conf["description"]
	notes := ParseVMKeeperNotes(desc)
	disks := VMVolumeDisks(conf)
	if !hasHeader(desc, vmKeeperHeader) && len(notes) == 0 && !(name == KeeperName && len(disks) > 0) {
		return nil
	}
	d := &Damaged{Kind: "keeper", VM: true, VMID: vmid, Node: node, Tags: tags, Records: map[VolumeKey]string{}}
	for _, serial := range slices.Sorted(maps.Keys(disks)) {
		d.Volumes = append(d.Volumes, disks[serial].Volume)
		if vk, ok := notes[serial]; ok {
			d.Records[vk] = disks[serial].Volume
		}
	}
	d.signal(name == KeeperName, "its name is "+KeeperName)
	d.signal(hasHeader(desc, vmKeeperHeader), "its Notes carry corral's keeper VM header")
	d.signal(len(notes) > 0, strconv.Itoa(len(notes))+" corral-vm-volume line(s) in its Notes")
	d.signal(len(disks) > 0, strconv.Itoa(len(disks))+" disk(s) with a retained disk's serial")
	d.signal(truthy(conf["protection"]), "protection is on")
	if len(d.Volumes) == 0 {
		return nil // an empty shell: nothing to lose
	}
	return d
}

// VMVolumeInventory is where a VM app's retained disks are: on its VM
// or on a keeper VM, with their serials (nil for a container app).
func VMVolumeInventory(a *App, obs *Observed) []VolumeInfo {
	if a.Kind != KindVM {
		return nil
	}
	var out []VolumeInfo
	for _, v := range a.Volumes {
		serial := VMVolumeSerial(a.Name, v.Name)
		for _, vm := range obs.VMs[a.Name] {
			if d, ok := VMVolumeDisks(vm.Config)[serial]; ok {
				out = append(out, VolumeInfo{Kind: KindVM, App: a.Name, Name: v.Name, VolID: d.Volume, Node: vm.Node, Size: d.Size,
					Holder: "vm " + strconv.Itoa(vm.VMID) + " " + d.Key, HolderVMID: vm.VMID, Serial: serial, Project: vm.Project})
			}
		}
		for _, node := range slices.Sorted(maps.Keys(obs.VMKeepers)) {
			for _, k := range obs.VMKeepers[node] {
				if d, ok := k.Disks()[serial]; ok {
					out = append(out, VolumeInfo{Kind: KindVM, App: a.Name, Name: v.Name, VolID: d.Volume, Node: node, Size: d.Size,
						Holder: "keeper vm " + strconv.Itoa(k.VMID), HolderVMID: k.VMID, Serial: serial, Project: ReadVMKeeperNotes(k.Config["description"]).Projects[a.Name]})
				}
			}
		}
	}
	return out
}
