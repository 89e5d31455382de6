package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// An app's ha: in the plan. PVE's HA stack (pve-ha-manager) owns what an
// HA resource says: the container's running state and, after a node
// fails, its node. corral creates, updates and removes the resource and
// its rule membership; it does not start, stop or move the container
// against HA (docs/moving.md, "HA or --recover").

// HA is an app's desired HA resource (manifest ha:).
type HA struct {
	State       string // started or stopped
	Group       string // PVE 8
	Rule        string // PVE 9: a node-affinity rule
	MaxRestart  int
	MaxRelocate int
}

// HAResource is a container's HA resource as observed, PVE's defaults
// applied (state started, max_restart and max_relocate 1).
type HAResource struct {
	State       string
	Group       string
	GroupSet    bool // resources.cfg names a group (deleted when unwanted)
	MaxRestart  int
	MaxRelocate int
	// Rules are the node-affinity rules (PVE 9) that list it.
	Rules []string
}

// HARule is an observed HA rule (PVE 9).
type HARule struct {
	Name      string
	Type      string // node-affinity | resource-affinity
	Resources []string
	Digest    string
}

// HAChange is what apply does with an app's HA resource: add it (Have
// nil), change it, or remove it (Want nil).
type HAChange struct {
	Want *HA         `json:",omitempty"`
	Have *HAResource `json:",omitempty"`
}

// SID is the HA resource id of CT vmid ("ct:<vmid>").
func SID(vmid int) string { return "ct:" + strconv.Itoa(vmid) }

// SIDOf is the HA resource id of app kind's guest vmid: "vm:<vmid>" for
// a VM app, else SID.
func SIDOf(kind string, vmid int) string {
	if kind == KindVM {
		return "vm:" + strconv.Itoa(vmid)
	}
	return SID(vmid)
}

// haRefusals are the reasons an app's ha: cannot be planned: the HA
// config cannot be read, its data is on local storage (PVE would move the
// container after a node failure, but not its data: the start fails and
// the resource ends in error state), or its group or rule does not fit
// the cluster's PVE.
func haRefusals(a *App, obs *Observed) []string {
	h := a.HA
	if h == nil {
		return nil
	}
	if obs.HAUnread != "" {
		return []string{fmt.Sprintf("app %s: ha: corral cannot read the cluster's HA resources (%s): grant the token Sys.Audit and Sys.Console on / (corral doctor --print-setup), or drop ha:", a.Name, obs.HAUnread)}
	}
	var probs []string
	guest, data := "container", "the rootfs and every volume"
	if a.Kind == KindVM {
		guest, data = "VM", "vm.disk and every volume"
	}
	for _, d := range haData(a) {
		if !obs.SharedStorages[d.storage] {
			probs = append(probs, fmt.Sprintf("app %s: ha: %s is on storage %s, which is local to its node: after a node failure PVE's HA moves the %s to another node but not its data, so its start fails there and the resource ends in error state; put %s on shared storage (nfs, rbd, …), or drop ha: and recover a dead node's apps with corral apply --recover", a.Name, d.what, d.storage, guest, data))
		}
	}
	switch {
	case h.Group != "" && obs.HARules:
		probs = append(probs, fmt.Sprintf("app %s: ha.group: this cluster runs PVE 9, whose HA groups were migrated to rules: name a node-affinity rule with ha.rule instead", a.Name))
	case h.Rule != "" && !obs.HARules:
		probs = append(probs, fmt.Sprintf("app %s: ha.rule: this cluster's PVE has no HA rules (PVE 8): name an HA group with ha.group instead", a.Name))
	case h.Rule != "":
		if r, ok := obs.HARuleSet[h.Rule]; !ok || r.Type != "node-affinity" {
			probs = append(probs, fmt.Sprintf("app %s: ha.rule: there is no node-affinity HA rule %s: create it with its nodes (ha-manager rules add node-affinity %s --nodes NODE,… --resources ct:VMID, or in the web UI under Datacenter → HA → Affinity Rules), then apply again", a.Name, h.Rule, h.Rule))
		}
	}
	return probs
}

type haDatum struct{ what, storage string }

// haData are the app's data and their storages: the rootfs (a VM's
// disk, with its cloud-init drive) and each volume.
func haData(a *App) []haDatum {
	out := []haDatum{{"rootfs", a.RootStorage}}
	if a.Kind == KindVM {
		out = []haDatum{{"vm.disk", a.VM.DiskStorage}}
	}
	for _, v := range a.Volumes {
		out = append(out, haDatum{"volume " + v.Name, v.Storage})
	}
	return out
}

// haOwned reports whether ct is an HA resource: its node and running
// state are HA's.
func haOwned(ct *CT) bool { return ct != nil && ct.HA != nil && ct.HA.State != "ignored" }

// planHA adds the app's HA change to c: an HA resource added after a new
// container is made, the resource's settings or rule membership changed,
// or the resource removed when the manifest drops ha:.
func planHA(c *Change, a *App, ct *CT) {
	var have *HAResource
	status := ""
	if ct != nil && c.Action != Replace {
		have, status = ct.HA, ct.Status
	}
	planHAOf(c, a, have, status, "container")
}

// planHAOf is planHA for a guest (what: "container", "VM") whose
// resource is have (nil: none, or a guest to be made) and whose status
// is status.
func planHAOf(c *Change, a *App, have *HAResource, status, what string) {
	switch {
	case a.HA == nil && have == nil:
		return
	case a.HA == nil:
		c.HA = &HAChange{Have: have}
		c.Reasons = append(c.Reasons, "ha: removed: the "+what+" stops being an HA resource")
		if status != "running" {
			c.Start = true // its running state is corral's again
		}
	case have == nil:
		c.HA = &HAChange{Want: a.HA}
		if c.Action == NoOp || c.Action == Update {
			c.Reasons = append(c.Reasons, "ha: the "+what+" becomes an HA resource (state "+a.HA.State+")")
		}
	default:
		reasons := haDiff(a.HA, have)
		if len(reasons) == 0 {
			return
		}
		c.HA = &HAChange{Want: a.HA, Have: have}
		c.Reasons = append(c.Reasons, reasons...)
	}
	if c.Action == NoOp {
		c.Action = Update
	}
}

// haDiff says how the resource have differs from want.
func haDiff(want *HA, have *HAResource) []string {
	var r []string
	diff := func(what, from, to string) {
		if from != to {
			r = append(r, fmt.Sprintf("ha: %s %s → %s", what, orNone(from), orNone(to)))
		}
	}
	diff("state", have.State, want.State)
	diff("group", have.Group, want.Group)
	diff("maxRestart", strconv.Itoa(have.MaxRestart), strconv.Itoa(want.MaxRestart))
	diff("maxRelocate", strconv.Itoa(have.MaxRelocate), strconv.Itoa(want.MaxRelocate))
	if want.Rule != "" && !slices.Contains(have.Rules, want.Rule) {
		r = append(r, "ha: joins rule "+want.Rule)
	}
	for _, rule := range have.Rules {
		if rule != want.Rule {
			r = append(r, "ha: leaves rule "+rule)
		}
	}
	return r
}

// HAWarning says what HA is doing with an app's container when it is not
// what its resource asks (a recovery under way, an error state), for the
// plan's warnings: corral leaves it to HA.
func HAWarning(app string, ct *CT) string {
	if !haOwned(ct) {
		return ""
	}
	return haWarning(app, "CT", ct.VMID, ct.Node, ct.HAState, SID(ct.VMID))
}

// haWarning is HAWarning for guest vmid (kind "CT" or "VM") on node in
// HA state state, its resource sid.
func haWarning(app, kind string, vmid int, node, state, sid string) string {
	if state == "" || state == "started" || state == "stopped" {
		return ""
	}
	msg := fmt.Sprintf("app %s: PVE's HA has %s %d in state %s on %s; corral leaves its node and running state to HA", app, kind, vmid, state, node)
	if state == "error" {
		msg += "; HA gave up on it: fix the cause (ha-manager status, the " + kind + "'s start task), then set the resource's state to disabled and back (ha-manager set " + sid + " --state disabled)"
	}
	return strings.TrimSpace(msg)
}

// haPlaced is a without its pinned node when HA owns its container: HA
// put the container where it is (a recovery, a relocation), and corral
// neither moves it back nor replaces it for that. A warning says what HA
// is doing with it when that is not what the resource asks.
func (m *planner) haPlaced(a *App) *App {
	ct := singleCT(m.obs.Apps[a.Name])
	if !haOwned(ct) {
		return a
	}
	m.warn(HAWarning(a.Name, ct))
	if a.Node == "" || a.Node == ct.Node {
		return a
	}
	b := *a
	b.Node = ""
	return &b
}

// singleCT is the app's one container, nil when it has none or several.
func singleCT(cts []*CT) *CT {
	if len(cts) != 1 {
		return nil
	}
	return cts[0]
}

// HAMoveRefusal refuses corral move and drain for an app whose container
// is an HA resource: PVE's HA decides its node, and a migrate through the
// API would only become an HA request. "" when the app is not HA's.
func HAMoveRefusal(app string, obs *Observed) string {
	ct := singleCT(obs.Apps[app])
	if !haOwned(ct) {
		return ""
	}
	return fmt.Sprintf("app %s: CT %d is an HA resource, and PVE's HA decides its node: move it with ha-manager migrate %s NODE (or a node-affinity rule or group), put its node in maintenance (ha-manager crm-command node-maintenance enable NODE) to drain, or drop ha: first", app, ct.VMID, SID(ct.VMID))
}
