package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Recovery of apps whose node is offline (corral apply --recover).
//
// PVE keeps the config of a container on a dead node under that node
// (requests to it answer 595), VMIDs are unique in the cluster, and only
// root on a quorate node can move the config by hand; PVE HA, which would
// steal it, needs Sys.Console and fencing. What an API token can do is
// build the app anew on a live node, under a new VMID, and attach the same
// volumes, which is possible only when every volume is on shared storage
// (the same volid names the same data on every node). Nothing of the old
// container can be changed while its node is down, so the recovered
// container names it (tag corral-recovered-<vmid>), and when the node is
// back the next changing command removes that stale copy before anything
// else: stop, remove its mount points, destroy (it owns none of the
// volumes: the keeper does).
//
// Both the old container's config and the keeper's records are on the dead
// node, so neither can say which volume is which while it is down. Every
// app container therefore also carries, for each of its volumes on shared
// storage, a tag corral-vol-<name>+<volid>, which /cluster/resources lists
// for guests of every node, dead ones included.

const (
	// TagRecoveredPrefix marks a container built by --recover, with the
	// VMID of the container it stands in for (corral-recovered-<vmid>).
	TagRecoveredPrefix = "corral-recovered-"
	// TagVolumePrefix names a volume on shared storage the container
	// mounts: corral-vol-<name>+<storage>+<volname>, '/' in the volname
	// written as '+' (PVE tags allow [a-z0-9_+.-]).
	TagVolumePrefix = "corral-vol-"
)

// VolumeTag is the tag that records that an app container mounts volid as
// its volume name, or "" when the volid cannot be written as a tag.
func VolumeTag(name, volid string) string {
	sid, volname, ok := strings.Cut(volid, ":")
	if !ok || strings.Contains(volname, "+") {
		return ""
	}
	t := TagVolumePrefix + name + "+" + sid + "+" + strings.ReplaceAll(volname, "/", "+")
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("_+.-", r)) {
			return ""
		}
	}
	return t
}

// VolumeTags maps the volume names a container's tags record to volids.
func VolumeTags(tags []string) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		rest, ok := strings.CutPrefix(t, TagVolumePrefix)
		if !ok {
			continue
		}
		parts := strings.Split(rest, "+")
		if len(parts) < 3 || parts[0] == "" || parts[1] == "" {
			continue
		}
		out[parts[0]] = parts[1] + ":" + strings.Join(parts[2:], "/")
	}
	return out
}

// RecoveredFrom is the VMID a corral-recovered-<vmid> tag names, or 0.
func RecoveredFrom(tags []string) int {
	for _, t := range tags {
		if rest, ok := strings.CutPrefix(t, TagRecoveredPrefix); ok {
			if n, err := strconv.Atoi(rest); err == nil {
				return n
			}
		}
	}
	return 0
}

// Recovery says which container a recovered one stands in for.
type Recovery struct {
	VMID int    // the container on the offline node
	Node string // the offline node
}

// StaleCT is an app container that a recovered container stands in for.
type StaleCT struct {
	App string
	CT  *CT
	By  *CT // the recovered container
}

// SplitStale moves out of obs.Apps every container that another
// container of the same app was recovered from (corral-recovered-<vmid>):
// the stale copy left on a node that was offline. Observe calls it.
func SplitStale(obs *Observed) {
	for _, app := range slices.Sorted(maps.Keys(obs.Apps)) {
		cts := obs.Apps[app]
		if len(cts) < 2 {
			continue
		}
		var keep []*CT
		for _, ct := range cts {
			var by *CT
			for _, other := range cts {
				if other != ct && RecoveredFrom(ParseTags(other.Config["tags"])) == ct.VMID {
					by = other
				}
			}
			if by == nil {
				keep = append(keep, ct)
				continue
			}
			obs.Stale = append(obs.Stale, &StaleCT{App: app, CT: ct, By: by})
		}
		obs.Apps[app] = keep
	}
}

// withVolumeTags is a copy of a whose tags also record each volume of vs
// that is on shared storage and has a volid.
func withVolumeTags(a *App, vs []VolumeChange, obs *Observed) *App {
	var extra []string
	for _, v := range vs {
		if v.VolID == "" || v.Action == VolDetach || v.Action == VolFree || !obs.onShared(v.VolID) {
			continue
		}
		if t := VolumeTag(v.Name, v.VolID); t != "" {
			extra = append(extra, t)
		}
	}
	if len(extra) == 0 {
		return a
	}
	b := *a
	b.Tags = append(slices.Clone(a.Tags), extra...)
	return &b
}

// keptTags is a with the corral-recovered-<vmid> tag of ct kept: it is
// how a stale copy of the app is told from the app's container.
func keptTags(a *App, ct *CT) *App {
	from := RecoveredFrom(ParseTags(ct.Config["tags"]))
	if from == 0 {
		return a
	}
	b := *a
	b.Tags = append(slices.Clone(a.Tags), TagRecoveredPrefix+strconv.Itoa(from))
	return &b
}

// onShared reports whether volid's storage is shared (NFS, CIFS, RBD, …).
func (o *Observed) onShared(volid string) bool {
	sid, _, _ := strings.Cut(volid, ":")
	return o.SharedStorages[sid]
}

// OnShared reports whether volid's storage is shared.
func (o *Observed) OnShared(volid string) bool { return o.onShared(volid) }

// taggedVolume is the volid app container ct's tags record for volume
// name when the volume exists on a node that answers, else "".
func taggedVolume(ct *CT, name string, obs *Observed) (string, int64) {
	if ct == nil {
		return "", 0
	}
	volid := VolumeTags(ParseTags(ct.Config["tags"]))[name]
	if volid == "" || !obs.onShared(volid) {
		return "", 0
	}
	for _, n := range obs.Nodes {
		if slices.Contains(obs.Offline, n) {
			continue
		}
		if size, ok := obs.Volumes[volKey(n, volid)]; ok {
			return volid, size
		}
	}
	return "", 0
}

// recoverable says whether app a, whose container ct is on an offline
// node, can be built anew elsewhere: every volume is recorded in ct's
// tags, on shared storage, and seen from a node that answers. It returns
// the volume changes (attach) or why not.
func recoverable(a *App, ct *CT, obs *Observed) ([]VolumeChange, string) {
	var out []VolumeChange
	var why []string
	for _, v := range a.Volumes {
		vc := VolumeChange{Volume: v, Action: VolAttach}
		vc.Adopt = "" // the volume is attached from its tag: adopted long ago, if ever
		tagged := VolumeTags(ParseTags(ct.Config["tags"]))[v.Name]
		volid, size := taggedVolume(ct, v.Name, obs)
		switch {
		case v.Storage != "" && !obs.SharedStorages[v.Storage]:
			why = append(why, fmt.Sprintf("volume %s is on storage %s, which is not shared: its data stays on node %s's disks", v.Name, v.Storage, ct.Node))
			continue
		case tagged == "":
			why = append(why, fmt.Sprintf("container %d does not record which volume is %s (it was made before corral recorded shared volumes in tags, or the volume is not on shared storage)", ct.VMID, v.Name))
			continue
		case volid == "":
			why = append(why, fmt.Sprintf("volume %s (%s) is not seen on any node that answers", v.Name, tagged))
			continue
		}
		vc.VolID, vc.OldSize = volid, size
		if sid, _, _ := strings.Cut(volid, ":"); v.Storage != "" && sid != v.Storage {
			why = append(why, fmt.Sprintf("volume %s is on storage %s (%s), the manifest says %s", v.Name, sid, volid, v.Storage))
			continue
		}
		if v.Size > size {
			vc.Action = VolGrow
		}
		out = append(out, vc)
	}
	if len(why) > 0 {
		return nil, strings.Join(why, "; ")
	}
	return out, ""
}

// offlineApp plans app a whose container ct is on an offline node: left
// alone (with a warning that says whether --recover could start it
// elsewhere), or, with obs.Recover, built anew on a node that answers.
func offlineApp(p *Plan, a *App, ct *CT, pl *placer, obs *Observed) (Change, string) {
	c := Change{App: a.Name, Node: ct.Node, VMID: ct.VMID, Action: NoOp, Desired: a}
	if haOwned(ct) {
		// A second copy beside HA's recovery would mount the same volumes.
		p.Warnings = append(p.Warnings, fmt.Sprintf("app %s: node %s is offline; its container %d is an HA resource (HA state %s), so PVE's HA fences the node and starts it on another node by itself: corral leaves it to HA, --recover included", a.Name, ct.Node, ct.VMID, orNone(ct.HAState)))
		return c, ""
	}
	vols, why := recoverable(a, ct, obs)
	if !obs.Recover {
		msg := fmt.Sprintf("app %s: node %s is offline, so corral cannot see its storages and volumes; the app is left alone until the node is back", a.Name, ct.Node)
		if why == "" {
			msg += "; every volume of it is on shared storage, so corral apply --recover can start it on another node (first make sure node " + ct.Node + " stays down: see docs/shared-storage.md)"
		} else {
			msg += "; it cannot be recovered on another node: " + why
		}
		p.Warnings = append(p.Warnings, msg)
		return c, ""
	}
	if why != "" {
		// Refused for this app only: the others are recovered.
		p.Warnings = append(p.Warnings, fmt.Sprintf("app %s: --recover refused: node %s is offline and the app cannot be recovered on another node: %s; it is left alone until the node is back", a.Name, ct.Node, why))
		return c, ""
	}
	// Place it as a new app among the nodes that answer; the allowed
	// nodes of its placement still apply, a pinned node: does not (it is
	// the dead one).
	b := *a
	b.Node = ""
	b.VMID = 0
	node, placed, err := pl.placeNew(&b)
	if err != nil {
		return c, err.Error()
	}
	c = Change{App: a.Name, Node: node, Action: Create, Volumes: vols, Start: true, Recover: &Recovery{VMID: ct.VMID, Node: ct.Node}}
	b.Tags = append(slices.Clone(a.Tags), TagRecoveredPrefix+strconv.Itoa(ct.VMID))
	c.Desired = withVolumeTags(&b, vols, obs)
	c.Reasons = append(c.Reasons,
		fmt.Sprintf("recover: node %s is offline and every volume of the app is on shared storage: a new container on %s takes over the volumes of container %d (--recover)", ct.Node, node, ct.VMID),
		fmt.Sprintf("container %d stays configured on %s (PVE keeps it there); node %s must stay down (fenced, or powered off) until corral removes that stale copy, which the first apply after the node is back does before anything else: if it starts the copy at boot (onboot), both containers mount the same volumes", ct.VMID, ct.Node, ct.Node))
	if placed != "" {
		c.Reasons = append(c.Reasons, placed)
	}
	c.Guest = a.GuestDigest != ""
	c.Steps, c.Restarts, _ = planSteps(a, "", true)
	if !hasTemplate(obs, node, a.Template) {
		c.FetchTemplate = true
	}
	return c, ""
}

// staleChanges removes the stale copies of the recovered apps among apps
// (this manifest's: another project's are its own business) on nodes that
// answer again, and warns about those still offline.
func staleChanges(apps []App, obs *Observed) (changes []Change, warn, probs []string) {
	for _, s := range obs.Stale {
		if !slices.ContainsFunc(apps, func(a App) bool { return a.Name == s.App && (a.Project == "" || s.By.OwnedBy(a.Project, true)) }) {
			continue
		}
		if slices.Contains(obs.Offline, s.CT.Node) {
			warn = append(warn, fmt.Sprintf("app %s runs as container %d on %s, recovered from container %d on %s, which is offline: "+
				"when %s is back, its copy must not start (it would mount the same volumes); the next apply removes it first", s.App, s.By.VMID, s.By.Node, s.CT.VMID, s.CT.Node, s.CT.Node))
			continue
		}
		if p := unmanagedVolumes(s.App, s.CT, "destroying the stale copy"); len(p) > 0 {
			probs = append(probs, p...)
			continue
		}
		c := Change{App: s.App, Node: s.CT.Node, VMID: s.CT.VMID, OldVMID: s.CT.VMID, Digest: s.CT.Digest, Action: Delete, Stale: true}
		c.Reasons = append(c.Reasons, fmt.Sprintf("stale copy: app %s was recovered as container %d on %s while %s was offline; container %d (%s) is stopped, its mount points removed and destroyed (the volumes stay in the keeper, in use by %d)",
			s.App, s.By.VMID, s.By.Node, s.CT.Node, s.CT.VMID, s.CT.Status, s.By.VMID))
		changes = append(changes, c)
	}
	return changes, warn, probs
}

// staleOffline is the stale copy of app on an offline node, if any.
func staleOffline(app string, obs *Observed) *Recovery {
	for _, s := range obs.Stale {
		if s.App == app && slices.Contains(obs.Offline, s.CT.Node) {
			return &Recovery{VMID: s.CT.VMID, Node: s.CT.Node}
		}
	}
	return nil
}
