package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A manifest's apps form a project (manifest.File.Project). Every app CT
// carries its project's tag, so a plan can tell this project's containers
// from other projects' on the same cluster: it destroys this project's
// containers whose app the manifest no longer lists (like a resource
// removed from a Terraform configuration; their volumes stay in the
// keeper) and never touches another project's. A CT made before projects
// existed has no project tag: it belongs to the project whose manifest
// names its app, and gets the tag from that project's next apply.
//
// App names stay unique in a cluster: keepers record volumes by app name,
// so a manifest that names an app another project holds is refused.
//
// A project defaulted from the manifest's directory name can be shared by
// accident (shop/app/corral.yaml and blog/app/corral.yaml are both
// project app). So each app records who declared it (App.Origin: on its
// container, and as OriginID in the keeper beside its volumes' project),
// and under a defaulted project a plan deletes no container and frees no
// volume that another manifest (or an unrecorded one) declared, and
// changes no container another manifest declared: it refuses, naming the
// declarer and the fix, an explicit project:.

// projectOf is the project of the manifest's apps ("" when the caller has
// no manifest: then nothing is pruned).
func projectOf(apps []App) string {
	for _, a := range apps {
		if a.Project != "" {
			return a.Project
		}
	}
	return ""
}

// OwnedBy reports whether ct belongs to project: tagged with it, or
// untagged (made before projects) while project's manifest names its app
// (inManifest).
func (ct *CT) OwnedBy(project string, inManifest bool) bool {
	if ct.Project == "" {
		return inManifest
	}
	return ct.Project == project
}

// foreignApp explains why app a cannot be planned by its project: a
// container or the keepers' records of the same app name belong to
// another project. "" when nothing does.
func foreignApp(a *App, obs *Observed) string {
	if a.Project == "" {
		return ""
	}
	for _, ct := range obs.Apps[a.Name] {
		if !ct.OwnedBy(a.Project, true) {
			return fmt.Sprintf("app %s: container %d on %s carries the tag %s%s: it is project %s's app, and corral never touches another project's containers. "+
				"App names are shared by every project on a cluster (keepers record volumes by app name): rename this app, or set project: %s to manage it from this manifest",
				a.Name, ct.VMID, ct.Node, TagProjectPrefix, ct.Project, ct.Project, ct.Project)
		}
	}
	if why := createdElsewhere(a, obs); why != "" {
		return why
	}
	if p := obs.RecordProject(a.Name); p != "" && p != a.Project {
		return fmt.Sprintf("app %s: the keeper records its volumes for project %s (corral-project: %s=%s): they are another project's data, and corral does not attach them here. "+
			"Rename this app, or set project: %s to manage it from this manifest", a.Name, p, a.Name, p, p)
	}
	return ""
}

// originOf is the origin of the manifest's apps and whether their
// project is explicit ("", true when the caller has no manifest).
func originOf(apps []App) (origin string, explicit bool) {
	for _, a := range apps {
		if a.Project != "" {
			return a.Origin, a.ProjectSet || a.Origin == ""
		}
	}
	return "", true
}

// declaredBy is the origin a container records (corral-declared:), or "".
func declaredBy(ct *CT) string { return ParseMarker(ct.Config["description"]).Declared }

// declarer names who declared an app for a message: its recorded origin,
// or that none is recorded.
func declarer(origin string) string {
	if p, ok := strings.CutPrefix(origin, "project "); ok {
		return "a manifest that sets project: " + p
	}
	if origin == "" {
		return "a manifest corral did not record (it was made before corral recorded which manifest declares an app)"
	}
	return "the manifest " + origin
}

// keptOrigin is a with the origin its container ct is to record: under a
// defaulted project the one ct records stays (the manifest that first
// declared the app; a second directory of the same name takes nothing
// over); an explicit project, or a container recording none, takes this
// manifest's.
func keptOrigin(a *App, ct *CT) *App {
	by := declaredBy(ct)
	if by == "" || a.ProjectSet || a.Origin == "" {
		return a
	}
	b := *a
	b.Origin = by
	return &b
}

// originReason says that an update records a new declarer, or "".
func originReason(e ConfigEdit) string {
	old, now := ParseMarker(e.Old).Declared, ParseMarker(e.New).Declared
	if e.Key != "description" || old == now {
		return ""
	}
	if old == "" {
		return "record that " + declarer(now) + " declares it (no declarer was recorded)"
	}
	return "record that " + declarer(now) + " declares it (it was " + declarer(old) + ")"
}

// collisionFix is the edit that settles which manifest owns project's
// apps when the project is defaulted from the directory name.
func collisionFix(project string) string {
	return fmt.Sprintf("Both manifests default to project %s (their directories' name). If they are different projects, set project: explicitly in each (e.g. project: shop and project: blog); "+
		"if this manifest replaced that one (a moved or renamed directory, a clone on another machine), set project: %s in this manifest to take its apps and volumes over", project, project)
}

// RemovedElsewhere refuses, under a defaulted project (!explicit), the
// deletion of ct of app, which this manifest (origin) does not list and
// another manifest declared, or one corral did not record. "" when the
// deletion may go ahead.
func RemovedElsewhere(app string, ct *CT, project, origin string, explicit bool) string {
	by := declaredBy(ct)
	if explicit || by == origin {
		return ""
	}
	return fmt.Sprintf("app %s (container %d on %s) is not in this manifest (%s), but it was declared by %s: corral does not delete it. %s",
		app, ct.VMID, ct.Node, origin, declarer(by), collisionFix(project))
}

// destroyedElsewhere refuses, under a defaulted project, `corral destroy`
// of ct of app a, which this manifest names but another manifest
// declared (the first of two directories of one name). "" when a records
// no declarer, or ct records this manifest or none.
func destroyedElsewhere(a *App, ct *CT) string {
	by := declaredBy(ct)
	if a.ProjectSet || a.Origin == "" || by == "" || by == a.Origin {
		return ""
	}
	return fmt.Sprintf("app %s (container %d on %s) was declared by %s, not by this manifest (%s): corral does not destroy it. %s",
		a.Name, ct.VMID, ct.Node, declarer(by), a.Origin, collisionFix(a.Project))
}

// createdElsewhere refuses, under a defaulted project, to create app a
// on the volumes the keepers keep for it when another manifest declared
// them: the new container would mount that manifest's data. "" when a
// container of the app exists, the project is explicit, or the records
// name this manifest or none (records written before origins were).
func createdElsewhere(a *App, obs *Observed) string {
	id := obs.RecordDeclared(a.Name)
	if a.ProjectSet || a.Origin == "" || len(obs.Apps[a.Name]) > 0 || id == "" || id == OriginID(a.Origin) || obs.RecordProject(a.Name) != a.Project {
		return ""
	}
	return fmt.Sprintf("app %s: the keeper keeps its volumes (corral volumes lists them) for another manifest than this one (%s): its records say corral-declared: %s=%s, and this manifest is %s. "+
		"corral does not create the app on another manifest's data. %s",
		a.Name, a.Origin, a.Name, id, OriginID(a.Origin), collisionFix(a.Project))
}

// changedElsewhere refuses, under a defaulted project, change c of app
// a, whose container another manifest declared (the first of two
// directories of one name): an update, a replace that would destroy that
// manifest's container, a move. "" for a no-op, or when the project is
// explicit, a records no origin, or the container records this manifest
// or none.
func changedElsewhere(a *App, c Change, obs *Observed) string {
	if c.App != a.Name || c.Action == NoOp {
		return ""
	}
	what := c.Action.String()
	if len(c.Reasons) > 0 {
		what += ": " + strings.Join(c.Reasons, "; ")
	}
	for _, ct := range obs.Apps[a.Name] {
		if why := ChangedElsewhere(a.Name, ct, a.Project, a.Origin, a.ProjectSet, what); why != "" {
			return why
		}
	}
	return ""
}

// ChangedElsewhere refuses, under a defaulted project (!explicit), what
// (in words: "update: memory 256 → 512", "restore an archive in its
// place") to ct of app, which this manifest (origin) names but another
// manifest declared. "" when the project is explicit, there is no
// manifest (origin ""), or ct records this manifest or none.
func ChangedElsewhere(app string, ct *CT, project, origin string, explicit bool, what string) string {
	by := declaredBy(ct)
	if explicit || origin == "" || by == "" || by == origin {
		return ""
	}
	return fmt.Sprintf("app %s: container %d on %s was declared by %s, not by this manifest (%s): corral does not change another manifest's app (this would %s). %s",
		app, ct.VMID, ct.Node, declarer(by), origin, what, collisionFix(project))
}

// removedChanges plans the destruction of project's containers whose app
// the manifest (apps) no longer lists, exactly as `corral destroy` of that
// app: the container goes, its volumes stay in the keeper.
func removedChanges(project string, apps []App, obs *Observed) (changes []Change, warnings, refused []string) {
	if project == "" {
		return nil, nil, nil
	}
	listed := map[string]bool{}
	for _, a := range apps {
		listed[a.Name] = true
	}
	origin, explicit := originOf(apps)
	for _, name := range slices.Sorted(maps.Keys(obs.Apps)) {
		if listed[name] {
			continue
		}
		for _, ct := range obs.Apps[name] {
			if !ct.OwnedBy(project, false) || ct.Copy() != "" {
				continue // another project's, or a copy kept on purpose (CT.Copy)
			}
			if slices.Contains(obs.Offline, ct.Node) {
				warnings = append(warnings, fmt.Sprintf("app %s was removed from the manifest, but node %s is offline; container %d is left alone until the node is back", name, ct.Node, ct.VMID))
				continue
			}
			if why := RemovedElsewhere(name, ct, project, origin, explicit); why != "" {
				refused = append(refused, why)
				continue
			}
			c, probs := deleteChange(name, ct, obs)
			c.Reasons = append([]string{"app " + name + " was removed from the manifest"}, c.Reasons...)
			c.Reasons = append(c.Reasons, "app "+name+" was declared by "+declarer(declaredBy(ct)))
			changes = append(changes, c)
			refused = append(refused, probs...)
		}
	}
	return changes, warnings, refused
}

// deleteChange destroys one CT of app: the volumes the keepers record for
// the app are detached and kept. It is refused while the CT owns volumes
// corral does not manage (PVE would free them with it).
func deleteChange(app string, ct *CT, obs *Observed) (Change, []string) {
	c := Change{App: app, Node: ct.Node, VMID: ct.VMID, OldVMID: ct.VMID, Digest: ct.Digest, Action: Delete,
		Reasons: []string{fmt.Sprintf("destroy container %d (%s); its volumes stay in the keeper", ct.VMID, ct.Status)}}
	for _, k := range obs.Keepers[ct.Node] {
		for _, vk := range sortedVolumeKeys(k.Records) {
			if vk.App != app {
				continue
			}
			vc := VolumeChange{Volume: Volume{Name: vk.Name}, Action: VolDetach, VolID: k.Records[vk]}
			for _, mp := range ct.Mounts() {
				if mp.Volume == vc.VolID {
					vc.Key, vc.Mount = mp.Key, mp.Path
				}
			}
			c.Volumes = append(c.Volumes, vc)
		}
	}
	return c, unmanagedVolumes(app, ct, "destroying")
}

// noteProjects adds to the keeper changes the corral-project lines the
// keepers lack for this project's apps (listed in the manifest, or with a
// container tagged with the project): records made before projects, which
// would otherwise belong to no project once the app's container is gone.
func noteProjects(kcs []KeeperChange, project string, apps []App, obs *Observed) []KeeperChange {
	if project == "" {
		return kcs
	}
	listed := map[string]bool{}
	for _, a := range apps {
		listed[a.Name] = true
	}
	for _, node := range slices.Sorted(maps.Keys(obs.Keepers)) {
		if slices.Contains(obs.Offline, node) {
			continue
		}
		for _, k := range obs.Keepers[node] {
			missing := map[string]string{}
			for _, vk := range sortedVolumeKeys(k.Records) {
				if obs.RecordProject(vk.App) != "" {
					continue // a keeper names its project
				}
				ours := listed[vk.App] || slices.ContainsFunc(obs.Apps[vk.App], func(ct *CT) bool { return ct.Project == project })
				if ours && slices.ContainsFunc(obs.Apps[vk.App], func(ct *CT) bool { return !ct.OwnedBy(project, listed[vk.App]) }) {
					ours = false // a container of another project carries the name
				}
				if ours {
					missing[vk.App] = project
				}
			}
			if len(missing) == 0 {
				continue
			}
			i := slices.IndexFunc(kcs, func(kc KeeperChange) bool { return kc.Node == node && kc.VMID == k.VMID })
			if i < 0 {
				kcs = append(kcs, KeeperChange{Node: node, VMID: k.VMID, Action: Update})
				i = len(kcs) - 1
			}
			kcs[i].Projects = missing
			for _, app := range slices.Sorted(maps.Keys(missing)) {
				kcs[i].Reasons = append(kcs[i].Reasons, fmt.Sprintf("note that app %s's volumes belong to project %s (the keeper recorded no project for them: made before projects, or by a restore --as of an older corral)", app, project))
			}
		}
	}
	return kcs
}

// noteDeclared adds to the keeper changes the corral-declared lines the
// keepers lack for the manifest's apps: records made before declarers
// were recorded, whose volumes prune would otherwise refuse once the
// app's container is gone; under an explicit project, also records that
// name another declarer (the manifest took them over). Under a defaulted
// project an app whose container records another declarer is left: this
// manifest did not declare it.
func noteDeclared(kcs []KeeperChange, apps []App, obs *Observed) []KeeperChange {
	for _, a := range apps {
		if a.Origin == "" || a.Project == "" {
			continue
		}
		id := OriginID(a.Origin)
		if slices.ContainsFunc(obs.Apps[a.Name], func(ct *CT) bool {
			return ct.Project != "" && ct.Project != a.Project || !a.ProjectSet && declaredBy(ct) != "" && declaredBy(ct) != a.Origin
		}) {
			continue
		}
		for _, node := range slices.Sorted(maps.Keys(obs.Keepers)) {
			if slices.Contains(obs.Offline, node) {
				continue
			}
			for _, k := range obs.Keepers[node] {
				cur := k.Declared[a.Name]
				if !k.RecordsApp(a.Name) || cur == id || cur != "" && !a.ProjectSet || k.Projects[a.Name] != "" && k.Projects[a.Name] != a.Project {
					continue
				}
				i := slices.IndexFunc(kcs, func(kc KeeperChange) bool { return kc.Node == node && kc.VMID == k.VMID })
				if i < 0 {
					kcs = append(kcs, KeeperChange{Node: node, VMID: k.VMID, Action: Update})
					i = len(kcs) - 1
				}
				if kcs[i].Declared == nil {
					kcs[i].Declared = map[string]string{}
				}
				kcs[i].Declared[a.Name] = id
				kcs[i].Reasons = append(kcs[i].Reasons, fmt.Sprintf("note that app %s's volumes were declared by %s", a.Name, declarer(a.Origin)))
			}
		}
	}
	return kcs
}
