package plan

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// VolumeInfo is one volume corral manages, as `corral volumes` and
// `corral status` show it.
type VolumeInfo struct {
	// Kind is the kind of app the volume is for: "ct" (a container's
	// volume, kept by a keeper CT) or "vm" (a kind: vm app's retained
	// disk, kept by a keeper VM).
	Kind  string `json:"kind"`
	App   string `json:"app"`
	Name  string `json:"name"`
	VolID string `json:"volid"`
	Node  string `json:"node"`
	Size  int64  `json:"size"`
	// Holder is where the volume is attached now: "keeper" (as unusedN)
	// or the VMID of the app's container ("ct 105").
	Holder     string `json:"holder"`
	HolderVMID int    `json:"holder_vmid"`
	Mount      string `json:"mount,omitempty"`
	// Serial is a VM app's retained disk's serial (vmkeeper.go), by
	// which the guest finds it (/dev/disk/by-id/…_<serial>).
	Serial string `json:"serial,omitempty"`
	// Missing: the keeper records the volume but the storage does not list
	// it (freed outside corral).
	Missing bool `json:"missing,omitempty"`
	// Project is the project the volume belongs to: the keeper's
	// corral-project line for its app, else its app's container's project
	// tag; "" when neither says (records made before projects).
	Project string `json:"project,omitempty"`
	// Damaged says why the volume's keeper or carrier is not recognized
	// (its tags were edited) and how to repair it; "" when it is.
	Damaged string `json:"damaged,omitempty"`
}

// Inventory lists every volume recorded by a keeper, sorted by app and
// name, with where it is attached.
func Inventory(obs *Observed) []VolumeInfo {
	var out []VolumeInfo
	for node, ks := range obs.Keepers {
		for _, k := range ks {
			for key, volid := range k.Records {
				vi := VolumeInfo{Kind: "ct", App: key.App, Name: key.Name, VolID: volid, Node: node, Holder: "keeper", HolderVMID: k.VMID}
				size, ok := obs.Volumes[volKey(node, volid)]
				vi.Size, vi.Missing = size, !ok
				vi.Project = obs.AppProject(key.App)
				for _, ct := range obs.Apps[key.App] {
					for _, mp := range ct.Mounts() {
						if mp.Volume == volid {
							vi.Holder, vi.HolderVMID, vi.Mount = "ct "+strconv.Itoa(ct.VMID), ct.VMID, mp.Path
						}
					}
				}
				out = append(out, vi)
			}
		}
	}
	for _, d := range obs.Damaged {
		for key, volid := range d.Records {
			size, ok := obs.Volumes[volKey(d.Node, volid)]
			out = append(out, VolumeInfo{Kind: kindOf(d.VM), App: key.App, Name: key.Name, VolID: volid, Node: d.Node, Size: size, Missing: !ok,
				Holder: "damaged " + d.Kind, HolderVMID: d.VMID, Project: obs.AppProject(key.App), Damaged: d.Problem()})
		}
	}
	out = append(out, vmInventory(obs)...)
	slices.SortFunc(out, func(a, b VolumeInfo) int {
		if c := strings.Compare(a.App, b.App); c != 0 {
			return c
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	return out
}

// vmInventory lists the retained disks of kind: vm apps: those the
// keeper VMs hold (named by their Notes) and those attached to an app's
// VM (named by a keeper VM's Notes on its node, else by the serial).
func vmInventory(obs *Observed) []VolumeInfo {
	var out []VolumeInfo
	names := map[string]map[string]VolumeKey{} // node → serial → volume
	for _, x := range keptVMDisks(obs) {
		vi := VolumeInfo{Kind: KindVM, App: x.key.App, Name: x.key.Name, VolID: x.volid, Node: x.node, Size: x.size,
			Holder: "keeper vm " + strconv.Itoa(x.keeper), HolderVMID: x.keeper, Serial: x.serial, Project: x.project}
		if vi.App == "" {
			vi.Name = x.serial // recorded for no app: the serial is its one name
		}
		out = append(out, vi)
	}
	for node, ks := range obs.VMKeepers {
		names[node] = map[string]VolumeKey{}
		for _, k := range ks {
			maps.Copy(names[node], ParseVMKeeperNotes(k.Config["description"]))
		}
	}
	for _, app := range slices.Sorted(maps.Keys(obs.VMs)) {
		for _, vm := range obs.VMs[app] {
			disks := VMVolumeDisks(vm.Config)
			for _, serial := range slices.Sorted(maps.Keys(disks)) {
				d := disks[serial]
				out = append(out, VolumeInfo{Kind: KindVM, App: app, Name: cmp.Or(names[vm.Node][serial].Name, serial), VolID: d.Volume, Node: vm.Node, Size: d.Size,
					Holder: "vm " + strconv.Itoa(vm.VMID) + " " + d.Key, HolderVMID: vm.VMID, Serial: serial, Project: vm.Project})
			}
		}
	}
	return out
}
