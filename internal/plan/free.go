package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Volumes are freed only on purpose: `corral volumes rm VOLID…` frees the
// named volumes, `corral volumes prune` every volume a keeper records for
// the project that no app of the manifest declares (a removed app's, a
// volume removed from an app, the *-replaced-* copies restore --replace
// keeps). Both are planned here from the observed cluster and the guest
// references read right before (refs), and refuse, as a whole, any volume
// another guest than its keeper references, or a snapshot keeps: freeing
// it would pull a file system from under that guest, or leave the
// snapshot naming a volume that is gone (or, once its volid is reused,
// someone else's).

// VolumeFree is one volume a FreePlan frees.
type VolumeFree struct {
	Node string `json:"node"`
	// Kind is the keeper's: "ct" for a container's volume on a keeper CT,
	// "vm" for a kind: vm app's retained disk on a keeper VM.
	Kind   string `json:"kind"`
	Keeper int    `json:"keeper"` // VMID of the keeper that owns it
	// App and Name are the keeper's record of it; both "" for a volume
	// the keeper holds as unusedN with no record (orphaned).
	App     string `json:"app,omitempty"`
	Name    string `json:"name,omitempty"`
	VolID   string `json:"volid"`
	Size    int64  `json:"size"`
	Project string `json:"project,omitempty"`
	// Serial is a retained disk's serial (kind vm), by which the free
	// finds the disk on the keeper VM.
	Serial string `json:"serial,omitempty"`
	Reason string `json:"reason"`
}

// Key is the keeper record of the volume (zero for an orphan).
func (v VolumeFree) Key() VolumeKey { return VolumeKey{v.App, v.Name} }

// FreePlan is what `corral volumes rm` or `prune` frees.
type FreePlan struct {
	Volumes  []VolumeFree `json:"volumes"`
	Warnings []string     `json:"warnings"`
	// Reprotect are the keeper VMs whose protection is off (a free killed
	// between its two writes leaves it so): the run sets it again, even
	// when it frees nothing.
	Reprotect []KeeperRef `json:"reprotect,omitempty"`
}

// KeeperRef names a keeper VM.
type KeeperRef struct {
	Node string `json:"node"`
	VMID int    `json:"vmid"`
}

// Nodes are the nodes whose keepers change, sorted.
func (p *FreePlan) Nodes() []string {
	var out []string
	for _, v := range p.Volumes {
		out = append(out, v.Node)
	}
	for _, k := range p.Reprotect {
		out = append(out, k.Node)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// VolIDs are the volumes freed, in plan order.
func (p *FreePlan) VolIDs() []string {
	out := []string{}
	for _, v := range p.Volumes {
		out = append(out, v.VolID)
	}
	return out
}

// kept is one volume a keeper holds: recorded (key set) or an orphan.
// A keeper VM's (vm) is a disk found by its serial, with the size,
// project and declarer (OriginID) its Notes or its app's VM say.
type kept struct {
	node     string
	keeper   int
	key      VolumeKey
	volid    string
	vm       bool
	serial   string
	size     int64
	project  string
	declared string
}

// keptVolumes lists what every keeper holds: its records, then its
// unusedN entries that no record or adoption in flight names; then the
// retained disks of every keeper VM.
func keptVolumes(obs *Observed) []kept {
	var out []kept
	for _, node := range slices.Sorted(maps.Keys(obs.Keepers)) {
		for _, k := range obs.Keepers[node] {
			recorded := map[string]bool{}
			for _, vk := range sortedVolumeKeys(k.Records) {
				out = append(out, kept{node: node, keeper: k.VMID, key: vk, volid: k.Records[vk]})
				recorded[k.Records[vk]] = true
			}
			for _, in := range k.Intents {
				recorded[ParseMountPoint(k.Config[in.Key]).Volume] = true
				recorded[in.Source] = true
			}
			for _, key := range sortedConfigKeys(k.Config, "unused") {
				if v := k.Config[key]; !recorded[v] {
					out = append(out, kept{node: node, keeper: k.VMID, volid: v})
				}
			}
		}
	}
	return append(out, keptVMDisks(obs)...)
}

// keptVMDisks lists the retained disks every keeper VM holds, named by
// its Notes (a disk whose serial no line names is kept for no app).
func keptVMDisks(obs *Observed) []kept {
	var out []kept
	for _, node := range slices.Sorted(maps.Keys(obs.VMKeepers)) {
		for _, k := range obs.VMKeepers[node] {
			notes := ReadVMKeeperNotes(k.Config["description"])
			disks := k.Disks()
			for _, serial := range slices.Sorted(maps.Keys(disks)) {
				d, vk := disks[serial], notes.Disks[serial]
				x := kept{node: node, keeper: k.VMID, key: vk, volid: d.Volume, vm: true, serial: serial, size: d.Size}
				if vk.App != "" {
					x.project, x.declared = cmp.Or(notes.Projects[vk.App], obs.vmProject(vk.App)), cmp.Or(notes.Declared[vk.App], obs.vmDeclared(vk.App))
				}
				out = append(out, x)
			}
		}
	}
	return out
}

// vmProject is the project tag of app's VM, "" when it has none.
func (o *Observed) vmProject(app string) string {
	for _, vm := range o.VMs[app] {
		if vm.Project != "" {
			return vm.Project
		}
	}
	return ""
}

// vmDeclared is the OriginID of the manifest app's VM records
// (corral-declared:), "" when none says.
func (o *Observed) vmDeclared(app string) string {
	for _, vm := range o.VMs[app] {
		if by := ParseMarker(vm.Config["description"]).Declared; by != "" {
			return OriginID(by)
		}
	}
	return ""
}

// otherCopy names another keeper's record of x's volume key that is not
// freed too (freeing lists the volids asked for), or "": a volume
// recorded twice (see doubleRecords) may lose one copy, never both.
func otherCopy(all []kept, x kept, freeing []string) string {
	for _, y := range all {
		if y.key == x.key && y.vm == x.vm && y.keeper != x.keeper && !slices.Contains(freeing, y.volid) {
			return fmt.Sprintf("keeper %s %d on node %s (%s)", kindOf(y.vm), y.keeper, y.node, y.volid)
		}
	}
	return ""
}

// declared reports whether an app of the manifest declares the volume vk.
func declared(apps []App, vk VolumeKey) bool {
	for _, a := range apps {
		if a.Name == vk.App {
			return slices.ContainsFunc(a.Volumes, func(v Volume) bool { return v.Name == vk.Name })
		}
	}
	return false
}

// SnapshotRefPrefix starts a reference that is a snapshot's (apply's
// Reference.String: "snapshot s1 of CT 105 … removes that snapshot"): a
// snapshot keeps the volumes it covers, so they count as in use.
const SnapshotRefPrefix = "snapshot "

// inUse says which guests other than its keeper, or which snapshots,
// reference a volume, from refs ("node/volid" → "CT 105 (mp0)", …), or "".
func inUse(refs map[string][]string, node, volid string) string {
	return strings.Join(refs[volKey(node, volid)], ", ")
}

// byGuest says how to free a volume in use: fix for a guest's
// reference; for a snapshot's, the reference itself names the command.
func byGuest(u, fix string) string {
	if strings.HasPrefix(u, SnapshotRefPrefix) {
		return "corral frees no volume a snapshot keeps (a rollback to it needs the volume)"
	}
	return "corral frees no volume a guest uses; " + fix
}

func (v *VolumeFree) fill(obs *Observed, x kept) {
	v.Node, v.Keeper, v.App, v.Name, v.VolID = x.node, x.keeper, x.key.App, x.key.Name, x.volid
	v.Kind, v.Serial = kindOf(x.vm), x.serial
	switch {
	case x.vm:
		v.Size, v.Project = x.size, x.project
	default:
		v.Size = obs.Volumes[volKey(x.node, x.volid)]
		if x.key.App != "" {
			v.Project = obs.AppProject(x.key.App)
		}
	}
}

// kindOf is the Kind of a keeper: "vm" for a keeper VM, else "ct".
func kindOf(vm bool) string {
	if vm {
		return KindVM
	}
	return "ct"
}

// FreeVolumes plans `corral volumes rm`: each named volume is freed if a
// keeper holds it, no other guest references it, no app of the manifest
// declares it (the next apply would make an empty one in its place), and
// it is not another project's. Anything else refuses the whole plan.
func FreeVolumes(project string, apps []App, obs *Observed, volids []string, refs map[string][]string) (*FreePlan, error) {
	p := &FreePlan{Volumes: []VolumeFree{}, Warnings: []string{}, Reprotect: unprotectedVMKeepers(obs)}
	var refused []string
	all := keptVolumes(obs)
	seen := map[string]bool{}
	for _, volid := range volids {
		if seen[volid] {
			continue
		}
		seen[volid] = true
		i := slices.IndexFunc(all, func(x kept) bool { return x.volid == volid })
		if i < 0 {
			refused = append(refused, fmt.Sprintf("%s is not a volume corral keeps: no keeper records or holds it (corral frees only what its keepers hold; `corral volumes` lists them)", volid))
			continue
		}
		x := all[i]
		var v VolumeFree
		v.fill(obs, x)
		switch {
		case inUse(refs, x.node, volid) != "":
			u := inUse(refs, x.node, volid)
			refused = append(refused, fmt.Sprintf("%s is referenced by %s: %s", volid, u, byGuest(u, "detach it there first (or destroy that app: its volumes go back to the keeper)")))
			continue
		case obs.Restores[x.key.App] != nil:
			refused = append(refused, restoreInFlight(x.key))
			continue
		case x.key.App == "":
			v.Reason = fmt.Sprintf("keeper %d holds it (%s) recorded for no app", x.keeper, volid)
		case v.Project != "" && v.Project != project:
			refused = append(refused, fmt.Sprintf("%s is volume %s of project %s, not of this project (%s); free it with corral volumes rm from that project's manifest", volid, x.key, v.Project, project))
			continue
		case declared(apps, x.key) && otherCopy(all, x, volids) != "":
			v.Reason = fmt.Sprintf("a second record of volume %s, which app %s declares: %s keeps the other copy", x.key, x.key.App, otherCopy(all, x, volids))
		case declared(apps, x.key):
			refused = append(refused, fmt.Sprintf("%s is volume %s, which app %s declares in the manifest: the next apply would make an empty one in its place; remove the volume from the manifest first", volid, x.key, x.key.App))
			continue
		case v.Project == project && freedElsewhere(x, project, apps, obs) != "":
			refused = append(refused, freedElsewhere(x, project, apps, obs))
			continue
		default:
			v.Reason = "named on the command line"
		}
		p.Volumes = append(p.Volumes, v)
	}
	if len(refused) > 0 {
		return p, &RefusedError{Problems: refused}
	}
	return p, nil
}

// Prune plans `corral volumes prune`: every volume a keeper records for
// this project (by the keeper's corral-project line, or, for records made
// before projects, because the manifest lists the app) that no app of the
// manifest declares. Other projects' volumes, volumes no record names and
// records of unknown project are left, the last two with a warning that
// names the way to free them (corral volumes rm).
func Prune(project string, apps []App, obs *Observed, refs map[string][]string) (*FreePlan, error) {
	p := &FreePlan{Volumes: []VolumeFree{}, Warnings: []string{}, Reprotect: unprotectedVMKeepers(obs)}
	var refused []string
	listed := map[string]bool{}
	for _, a := range apps {
		listed[a.Name] = true
	}
	for _, x := range keptVolumes(obs) {
		var v VolumeFree
		v.fill(obs, x)
		switch {
		case x.key.App == "":
			p.Warnings = append(p.Warnings, fmt.Sprintf("keeper %d on %s holds %s recorded for no app: not pruned (its project is unknown); corral volumes rm %s frees it", x.keeper, x.node, x.volid, x.volid))
			continue
		case v.Project == "" && !listed[x.key.App]:
			p.Warnings = append(p.Warnings, fmt.Sprintf("volume %s (%s) has no project (recorded before projects, or by a restore --as of an older corral) and its app is not in the manifest: not pruned; corral volumes rm %s frees it", x.key, x.volid, x.volid))
			continue
		case v.Project != "" && v.Project != project:
			continue // another project's
		case declared(apps, x.key):
			continue
		case !listed[x.key.App] && slices.ContainsFunc(obs.Apps[x.key.App], func(ct *CT) bool { return ct.Copy() != "" }):
			continue // a copy's (CT.Copy): freed once corral destroy removed the copy
		case freedElsewhere(x, project, apps, obs) != "":
			refused = append(refused, freedElsewhere(x, project, apps, obs))
			continue
		case obs.Restores[x.key.App] != nil:
			// Its restored volumes may not be attached yet: freeing one
			// would leave the finished restore without it.
			p.Warnings = append(p.Warnings, restoreInFlight(x.key))
			continue
		}
		switch {
		case !listed[x.key.App]:
			v.Reason = "app " + x.key.App + " is not in the manifest"
		case strings.Contains(x.key.Name, "-replaced-"):
			v.Reason = "left by restore --replace"
		default:
			v.Reason = "app " + x.key.App + " no longer declares volume " + x.key.Name
		}
		if u := inUse(refs, x.node, x.volid); u != "" {
			refused = append(refused, fmt.Sprintf("volume %s (%s) is referenced by %s: %s", x.key, x.volid, u,
				byGuest(u, "run corral apply first (it detaches what the manifest no longer lists) or detach it there")))
			continue
		}
		p.Volumes = append(p.Volumes, v)
	}
	if len(refused) > 0 {
		return p, &RefusedError{Problems: refused}
	}
	return p, nil
}

// unprotectedVMKeepers are the keeper VMs whose protection is off. A
// free of a keeper VM's disk turns it off and deletes the disk in one
// write, and sets it again in the next: a run killed between leaves it
// off, and the run again, which finds that disk gone and may have
// nothing to free, sets it again.
func unprotectedVMKeepers(obs *Observed) []KeeperRef {
	var out []KeeperRef
	for _, node := range slices.Sorted(maps.Keys(obs.VMKeepers)) {
		for _, k := range obs.VMKeepers[node] {
			if !k.Protected() && !slices.Contains(obs.Offline, node) {
				out = append(out, KeeperRef{Node: node, VMID: k.VMID})
			}
		}
	}
	return out
}

// volumeDeclarer is the OriginID of the manifest that declared app's
// volumes: the keepers' record, else the origin its container records;
// "" when neither says.
func volumeDeclarer(app string, obs *Observed) string {
	if id := obs.RecordDeclared(app); id != "" {
		return id
	}
	for _, ct := range obs.Apps[app] {
		if by := declaredBy(ct); by != "" {
			return OriginID(by)
		}
	}
	return ""
}

// freedElsewhere refuses, under a defaulted project, to free volume x of
// this project that another manifest than this one (apps) declared, or
// whose declarer is unknown while this manifest does not list its app.
// "" when it may be freed.
func freedElsewhere(x kept, project string, apps []App, obs *Observed) string {
	origin, explicit := originOf(apps)
	id := volumeDeclarer(x.key.App, obs)
	if x.vm {
		id = x.declared
	}
	listed := slices.ContainsFunc(apps, func(a App) bool { return a.Name == x.key.App })
	if explicit || id == OriginID(origin) || id == "" && listed {
		return ""
	}
	by := "a manifest corral did not record (the volume was kept before corral recorded which manifest declares an app)"
	if id != "" {
		by = "another manifest (corral-declared: " + x.key.App + "=" + id + " in keeper " + fmt.Sprint(x.keeper) + " on " + x.node + "; this manifest is " + OriginID(origin) + ")"
	}
	return fmt.Sprintf("volume %s (%s) was declared by %s, not by this manifest (%s): corral does not free it. %s",
		x.key, x.volid, by, origin, collisionFix(project))
}

func restoreInFlight(k VolumeKey) string {
	return fmt.Sprintf("volume %s: a restore of app %s was interrupted and is not finished yet: not freed; run corral apply first (it finishes or undoes the restore)", k, k.App)
}
