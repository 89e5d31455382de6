package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
)

// A rescue container is corral's answer to "the app will not come up and
// I need a shell where its data is" (corral rescue): with only an API
// token PVE offers no console into a stopped container, and `pct enter`
// or `pct mount` are root's on the node. So the app's container is
// stopped, its retained volumes are detached from it and attached, at the
// same paths, to a temporary container made from the app's template on
// the same node, which corral logs into over SSH.
//
// The rescue container only *references* the volumes, as the app's own
// container does: the keeper keeps owning and recording them throughout.
// PVE's move_volume was not used for this on purpose: moved out of the
// keeper, a volume would be owned by the rescue container, and any
// destroy of it (corral's, or one in the web UI) would free the data;
// moved from the app's container (which does not own it), PVE renames
// the keeper's volume without looking at its owner, and the keeper's
// record would name a volume that no longer exists. A container that
// only references a volume never frees it when destroyed (pve-container
// delete_mountpoint_volume: "CT N isn't the owner"), so whatever moment
// corral is killed at, every volume is recorded by its keeper and
// mounted by at most one container besides it.
//
// The root file system is not offered: PVE moves no rootfs to another
// container ("Cannot move to/from 'rootfs'"), and corral treats it as
// disposable anyway (a replace recreates it from the template); what
// must survive belongs on a volume.
const (
	TagRescue = "corral-rescue"
	// TagRescuingPrefix + app tags a rescue container with its app.
	TagRescuingPrefix = "corral-rescuing-"
	markerRescue      = "corral-rescue: "
	rescueHeader      = "corral rescue: this container holds an app's volumes while someone repairs them; " +
		"`corral rescue APP --end` or `corral apply` gives them back to the app's container and removes it. Edit none of these lines."
)

// Rescue is an app's rescue container as observed.
type Rescue struct {
	App    string
	VMID   int
	Node   string
	Status string
	// AppVMID is the app's container its volumes go back to, from its
	// Notes (0 when they do not say).
	AppVMID int
	// Holds are its mount points of volumes it does not own (the app's
	// retained volumes, owned by a keeper), in key order.
	Holds []KeyedMount
	// Unused are the unusedN entries of volumes it does not own: a
	// detach that was killed before it dropped them.
	Unused []string
}

// RescueNotes renders a rescue container's Notes.
func RescueNotes(app string, appVMID int) string {
	return rescueHeader + "\n" + markerRescue + "app=" + app + " ct=" + strconv.Itoa(appVMID) + "\n"
}

// parseRescueNotes reads the app and its container from a rescue
// container's Notes ("" and 0 when they name none).
func parseRescueNotes(desc string) (app string, appVMID int) {
	for _, line := range manifest.DescriptionLines(desc) {
		v, ok := strings.CutPrefix(manifest.MarkerLine(line), markerRescue)
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(v) {
			k, val, _ := strings.Cut(kv, "=")
			switch k {
			case "app":
				app = val
			case "ct":
				appVMID, _ = strconv.Atoi(val)
			}
		}
	}
	return app, appVMID
}

// IsRescue reports whether tags mark a rescue container.
func IsRescue(tags []string) bool {
	if slices.Contains(tags, TagRescue) {
		return true
	}
	return slices.ContainsFunc(tags, func(t string) bool { return strings.HasPrefix(t, TagRescuingPrefix) })
}

// ReadRescue reads a rescue container: its app from its tag (else its
// Notes), the app's container from its Notes, and what it holds.
func ReadRescue(vmid int, node, status string, tags []string, conf map[string]string) *Rescue {
	app, appVMID := parseRescueNotes(conf["description"])
	for _, t := range tags {
		if a, ok := strings.CutPrefix(t, TagRescuingPrefix); ok && a != "" {
			app = a
		}
	}
	r := &Rescue{App: app, VMID: vmid, Node: node, Status: status, AppVMID: appVMID}
	for _, key := range sortedConfigKeys(conf, "mp") {
		mp := ParseMountPoint(conf[key])
		if mp.Volume != "" && VolumeOwner(mp.Volume) != vmid {
			r.Holds = append(r.Holds, KeyedMount{Key: key, MountPoint: mp})
		}
	}
	for _, key := range sortedConfigKeys(conf, "unused") {
		if v := conf[key]; v != "" && VolumeOwner(v) != vmid {
			r.Unused = append(r.Unused, v)
		}
	}
	return r
}

// HoldList names what it holds, for messages ("local-lvm:vm-100-disk-1
// at /srv/data"), or "no volume".
func (r *Rescue) HoldList() string {
	var parts []string
	for _, h := range r.Holds {
		parts = append(parts, h.Volume+" at "+h.Path)
	}
	if len(parts) == 0 {
		return "no volume"
	}
	return strings.Join(parts, ", ")
}

// Fix says how a rescue is ended.
func (r *Rescue) Fix() string {
	return fmt.Sprintf("corral rescue %s --end (or corral apply, which also starts the app) gives the volumes back to its container and removes rescue CT %d", r.App, r.VMID)
}

// String is the plan's line for a rescue the next changing command ends:
// which CT holds what, and the two ways to end it.
func (r *Rescue) String() string {
	to := "its container"
	if r.AppVMID != 0 {
		to = "its container " + strconv.Itoa(r.AppVMID)
	}
	return fmt.Sprintf("app %s is in rescue: rescue CT %d on %s (%s) holds %s; apply ends it first (the volumes back to %s, the rescue CT removed), as corral rescue %s --end does alone; while a corral rescue still runs it holds corral's lock, and both wait for it",
		r.App, r.VMID, r.Node, r.Status, r.HoldList(), to, r.App)
}

// InRescue reports whether app has a rescue container.
func (o *Observed) InRescue(app string) bool { return len(o.Rescues[app]) > 0 }

// Interrupted reports whether an earlier command left work that the next
// changing command finishes first: a restore or a rescue.
func (o *Observed) Interrupted() bool {
	return len(o.Restores) > 0 || len(o.VMRestores) > 0 || len(o.Rescues) > 0
}
