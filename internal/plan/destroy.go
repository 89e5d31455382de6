package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/corralhq/corral/internal/manifest"
)

// Destroy plans `corral destroy`: every app's container is removed and its
// volumes are detached and kept in the keeper. With deleteVolumes, volumes
// whose reclaim is "delete" are freed; retained volumes never are.
//
// A container that owns volumes corral does not manage is refused
// (RefusedError): destroying it would free them. So is a container of
// another project than the app's.
func Destroy(apps []App, obs *Observed, deleteVolumes bool) (*Plan, error) {
	p := &Plan{}
	p.Recover, p.RecoverNodes = recoveries(obs)
	if obs.CannotSeeGuests {
		return p, &RefusedError{Problems: blindRefusals(apps, obs)}
	}
	var refused []string
	for i := range apps {
		c, probs, warns := destroyApp(&apps[i], obs, deleteVolumes)
		refused = append(refused, probs...)
		p.Warnings = append(p.Warnings, warns...)
		p.Changes = append(p.Changes, c)
	}
	// Stale copies of recovered apps go too, first.
	stale, warn, probs := staleChanges(apps, obs)
	p.Changes = append(stale, p.Changes...)
	p.Warnings = append(p.Warnings, warn...)
	refused = append(refused, probs...)
	refused = append(refused, damagedRefusals(p, obs)...)
	vmLockReasons(p, obs)
	if len(refused) > 0 {
		return p, &RefusedError{Problems: refused}
	}
	return p, nil
}

// blindRefusals refuses every app when corral cannot see the guests:
// nothing can be planned, since every container, keeper included, would
// look missing.
func blindRefusals(apps []App, obs *Observed) []string {
	var refused []string
	for i := range apps {
		node := blindNode(&apps[i], obs)
		refused = append(refused, BlindReason(apps[i].Name, node))
	}
	return refused
}

// destroyApp is the destroy change of one app: first its containers, then
// its volumes (which need the node the containers are on). It also returns
// the app's refusals and warnings.
func destroyApp(a *App, obs *Observed, deleteVolumes bool) (c Change, refused, warns []string) {
	if a.Kind == KindVM {
		return destroyVMApp(a, obs, deleteVolumes)
	}
	c = Change{App: a.Name, Action: NoOp, Desired: a}
	refused, warns = destroyContainers(&c, a, obs)
	for _, v := range destroyedVolumes(a, c.Node, obs) {
		destroyVolume(&c, a.Name, v, obs, deleteVolumes)
	}
	return c, refused, warns
}

// destroyContainers turns c into the deletion of a's containers. A
// container of another project, one destroyed elsewhere, or one holding
// volumes corral does not manage is refused; one on an offline node is
// left alone with a warning.
func destroyContainers(c *Change, a *App, obs *Observed) (refused, warns []string) {
	for _, ct := range obs.Apps[a.Name] {
		if a.Project != "" && !ct.OwnedBy(a.Project, true) {
			refused = append(refused, fmt.Sprintf("app %s: container %d carries the tag %s%s: it is project %s's, and corral destroys only this project's (%s) containers; run corral destroy from that project's manifest",
				a.Name, ct.VMID, TagProjectPrefix, ct.Project, ct.Project, a.Project))
			continue
		}
		if why := destroyedElsewhere(a, ct); why != "" {
			refused = append(refused, why)
			continue
		}
		if slices.Contains(obs.Offline, ct.Node) {
			warns = append(warns, fmt.Sprintf("app %s: node %s is offline; container %d is left alone until the node is back", a.Name, ct.Node, ct.VMID))
			continue
		}
		refused = append(refused, unmanagedVolumes(a.Name, ct, "destroying")...)
		c.Node, c.OldVMID, c.VMID, c.Digest = ct.Node, ct.VMID, ct.VMID, ct.Digest
		c.Action = Delete
		c.Reasons = append(c.Reasons, fmt.Sprintf("destroy container %d (%s)", ct.VMID, ct.Status))
	}
	return refused, warns
}

// destroyedVolumes are the volumes of a that destroy handles: the
// manifest's, or, for an app removed from the manifest, what the keepers
// on node record for it (detached and kept).
func destroyedVolumes(a *App, node string, obs *Observed) []Volume {
	vols := a.Volumes
	if len(vols) == 0 && node != "" {
		for _, k := range obs.Keepers[node] {
			for _, vk := range sortedVolumeKeys(k.Records) {
				if vk.App == a.Name {
					vols = append(vols, Volume{Name: vk.Name, Reclaim: Retain})
				}
			}
		}
	}
	return vols
}

// destroyVolume adds to c what happens to volume v of app on each node
// whose keeper holds it: detached, or freed with deleteVolumes when its
// reclaim is "delete" (which makes c a Delete even without a container).
func destroyVolume(c *Change, app string, v Volume, obs *Observed, deleteVolumes bool) {
	key := VolumeKey{app, v.Name}
	for _, node := range slices.Sorted(maps.Keys(obs.Keepers)) {
		k := obs.Holder(node, key)
		if k == nil {
			continue
		}
		volid := k.Records[key]
		// Not the desired size, backup flag or adopt source: the
		// volume in the keeper may differ, and destroy does not
		// read it.
		vc := VolumeChange{Volume: Volume{Name: v.Name, Storage: v.Storage, Mount: v.Mount, Reclaim: v.Reclaim}, VolID: volid, Action: VolDetach}
		if deleteVolumes && v.Reclaim == DeleteOnDrop {
			vc.Action = VolFree
			if c.Node == "" {
				c.Node = node
			}
			c.Action = Delete
			c.Reasons = append(c.Reasons, fmt.Sprintf("free volume %s (%s): reclaim: delete and --delete-volumes", v.Name, volid))
		}
		c.Volumes = append(c.Volumes, vc)
	}
}

// NoteLeftOut notes in p, when names narrow a destroy, the apps f
// declares that have containers (a whole destroy would remove them) and
// how many containers they have. p may be nil (nothing to note in).
func (p *Plan) NoteLeftOut(f *manifest.File, obs *Observed, names []string) {
	if len(names) == 0 || p == nil {
		return
	}
	p.Targets = slices.Clone(names)
	for _, a := range f.Apps {
		if n := len(obs.Apps[a.Name]); n > 0 && !slices.Contains(names, a.Name) {
			p.LeftOut = append(p.LeftOut, a.Name)
			p.LeftOutChanges += n
		}
	}
}

// Destroyed are the VMIDs of the containers the destroy plan p removes.
func (p *Plan) Destroyed() []int {
	out := []int{}
	for _, c := range p.Changes {
		if c.Action == Delete && c.OldVMID != 0 {
			out = append(out, c.OldVMID)
		}
	}
	return out
}

// DestroyTargets are the apps `corral destroy` removes: the manifest's, or only those
// named. A name the manifest does not declare is taken while a container
// of the project carries it (an app removed from the manifest, a copy
// restored with --as), or a container with no project tag (made before
// projects, or a copy restored by an older corral): this manifest takes
// it on purpose.
func DestroyTargets(f *manifest.File, obs *Observed, names []string) ([]App, error) {
	apps := FromManifest(f)
	if len(names) > 0 {
		apps = slices.DeleteFunc(apps, func(a App) bool { return !slices.Contains(names, a.Name) })
	}
	for _, n := range names {
		if _, ok := f.App(n); ok {
			continue
		}
		if vm := projectVM(obs, n, f.Project); vm != nil {
			apps = append(apps, *vm) // a VM copy restored --as (cli/vmbackup.go)
			continue
		}
		if !slices.ContainsFunc(obs.Apps[n], func(ct *CT) bool { return ct.Project == f.Project || ct.Project == "" }) {
			return nil, fmt.Errorf("app %q is not in %s, and no container of project %s (tag %s%s) carries it; check the name (`corral status` lists the project's apps)", n, f.Path, f.Project, TagProjectPrefix, f.Project)
		}
		for _, ct := range obs.Apps[n] {
			if why := RemovedElsewhere(n, ct, f.Project, f.Origin, f.ProjectSet); ct.Project == f.Project && why != "" {
				return nil, errors.New(why)
			}
		}
		apps = append(apps, App{Name: n, Project: f.Project})
	}
	return apps, nil
}

// projectVM is the app of the project's VM named name that the manifest
// does not declare (a copy restored with --as), when no container
// carries that name; nil otherwise.
func projectVM(obs *Observed, name, project string) *App {
	if len(obs.Apps[name]) > 0 {
		return nil
	}
	for _, vm := range obs.VMs[name] {
		if vm.Project == project {
			return &App{Name: name, Project: project, Kind: KindVM}
		}
	}
	return nil
}
