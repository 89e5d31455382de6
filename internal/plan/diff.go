package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/ui/human"
)

// Make compares the desired apps with the observed cluster and returns
// the plan for apply. It refuses (RefusedError) what cannot be done
// without losing data, rather than turning it into a replace.
//
// It plans each app in manifest order (planner.app), then the keepers
// those apps need, then what lies outside the manifest's apps: stale
// copies, removed apps, warnings and damaged keepers or carriers.
func Make(apps []App, obs *Observed) (*Plan, error) {
	p, err := makePlan(apps, obs)
	if obs.SetupDeferred && (err != nil || p.HasChanges() || len(p.Unchecked) > 0) {
		// The bridges and templates are checked for changes only:
		// planning one without them would skip those checks.
		return nil, ErrSetupUnread
	}
	return p, err
}

// ErrSetupUnread is Make's answer to a plan with changes (or refusals) on
// an observation that left the setup out (Observed.SetupDeferred): read
// it (apply.ObserveSetup) and plan again.
var ErrSetupUnread = errors.New("the plan has changes, but the observation left out the nodes' bridges and templates they are checked against: read them (apply.ObserveSetup) and plan again")

// makePlan is Make on a complete observation.
func makePlan(apps []App, obs *Observed) (*Plan, error) {
	p := &Plan{}
	p.Recover, p.RecoverNodes = recoveries(obs)
	if obs.CannotSeeGuests {
		// Nothing can be planned: every container, keeper included,
		// would look missing.
		return p, &RefusedError{Problems: blindRefusals(apps, obs)}
	}
	m := &planner{p: p, obs: obs, pl: newPlacer(obs), warnedBridges: map[string]bool{}}
	m.apps(apps)
	m.keepers(apps)
	m.outside(apps)
	vmLockReasons(p, obs)
	if len(m.refused) > 0 {
		return p, &RefusedError{Problems: unique(m.refused)}
	}
	return p, nil
}

// planner is the state Make builds up while it goes through the apps.
type planner struct {
	p             *Plan
	obs           *Observed
	pl            *placer
	refused       []string
	nodes         []string        // nodes whose apps have volumes, in manifest order
	warnedBridges map[string]bool // nodes whose bridges were said to be unchecked
}

// apps plans each app, an app after those whose facts its guest work
// reads (factOrder), so that their changes say what the facts will be;
// the changes are then put back in manifest order.
func (m *planner) apps(apps []App) {
	desired := map[string]*App{}
	for i := range apps {
		desired[apps[i].Name] = &apps[i]
	}
	spans := make([][2]int, len(apps))
	for _, i := range factOrder(apps) {
		a := &apps[i]
		m.resolveFacts(a, desired)
		from := len(m.p.Changes)
		m.app(a)
		for j := from; j < len(m.p.Changes); j++ {
			if c := &m.p.Changes[j]; c.Guest {
				c.After = slices.Clone(a.FactApps)
			}
		}
		spans[i] = [2]int{from, len(m.p.Changes)}
	}
	planned := m.p.Changes
	m.p.Changes = make([]Change, 0, len(planned))
	for _, sp := range spans {
		m.p.Changes = append(m.p.Changes, planned[sp[0]:sp[1]]...)
	}
}

// refuse adds probs to the refusals.
func (m *planner) refuse(probs ...string) {
	m.refused = append(m.refused, probs...)
}

// warn adds w to the plan's warnings, unless it is "".
func (m *planner) warn(w string) {
	if w != "" {
		m.p.Warnings = append(m.p.Warnings, w)
	}
}

// addNode notes node as one whose keepers this plan may need.
func (m *planner) addNode(node string) {
	if !slices.Contains(m.nodes, node) {
		m.nodes = append(m.nodes, node)
	}
}

// app plans one app (planApp), then refuses whatever that plan would
// change of a container another manifest declared under a shared
// defaulted project (refuseElsewhere).
func (m *planner) app(a *App) {
	n := len(m.p.Changes)
	m.planApp(a)
	m.refuseElsewhere(a, n)
}

// refuseElsewhere takes out of the plan the changes to app a planned
// since the n-th and refuses them when a's container records another
// manifest of a defaulted project as its declarer (changedElsewhere):
// the first manifest's app is changed by that manifest only.
func (m *planner) refuseElsewhere(a *App, n int) {
	kept := m.p.Changes[:n]
	for _, c := range m.p.Changes[n:] {
		if why := changedElsewhere(a, c, m.obs); why != "" {
			m.refuse(why)
			continue
		}
		kept = append(kept, c)
	}
	m.p.Changes = kept
}

// planApp plans one app. The checks go from what forbids any plan for the
// app (refusals, a restore under way, an offline node) to the kinds of
// change: finishing a move, starting one, or creating, replacing or
// updating the container where it is.
func (m *planner) planApp(a *App) {
	obs := m.obs
	if m.vmKind(a) {
		return
	}
	if probs := appRefusals(a, obs); len(probs) > 0 {
		m.refuse(probs...)
		return
	}
	if probs := haRefusals(a, obs); len(probs) > 0 {
		m.refuse(probs...)
		return
	}
	a = m.haPlaced(a)
	if obs.Restores[a.Name] != nil || obs.InRescue(a.Name) {
		// Planned once the restore is finished or rolled back, or the
		// rescue ended.
		m.p.Changes = append(m.p.Changes, leftAlone(a, obs))
		return
	}
	if m.offlineContainer(a) {
		return
	}
	node, placed, err := m.pl.place(a)
	if err != nil {
		m.refuse(err.Error())
		return
	}
	if slices.Contains(obs.Offline, node) {
		// Its storages and volumes cannot be seen: planning it could
		// take retained volumes for lost. Other apps go on.
		c := leftAlone(a, obs)
		c.Node = node // the node it is placed on, not its container's
		m.p.Changes = append(m.p.Changes, c)
		m.warn(fmt.Sprintf("app %s: node %s is offline, so corral cannot see its storages and volumes; the app is left alone until the node is back", a.Name, node))
		return
	}
	if len(a.Volumes) > 0 {
		m.addNode(node)
	}
	if car := obs.Carriers[a.Name]; car != nil {
		m.finishMove(a, car, node)
		return
	}
	if cts := obs.Apps[a.Name]; len(cts) == 1 && cts[0].Node != node {
		m.move(a, cts[0], node)
		return
	}
	m.change(a, node, placed)
}

// appRefusals are the reasons a cannot be planned at all: it is another
// project's or unmanaged, its data is held by a damaged keeper or a
// carrier corral cannot finish, or its volumes are recorded twice.
// Whatever else the app's plan would say follows from that, and misleads.
func appRefusals(a *App, obs *Observed) []string {
	if prob := foreignApp(a, obs); prob != "" {
		return []string{prob}
	}
	if d := obs.damagedHolding(a.Name); d != nil {
		// Its data is where corral cannot read it.
		return []string{d.Problem()}
	}
	if probs := carrierRefusals(a.Name, obs); len(probs) > 0 {
		return probs
	}
	return doubleRecords(a.Name, obs)
}

// leftAlone is the no-op change of an app that cannot be planned now,
// naming its container (the first, if any) and that container's node.
func leftAlone(a *App, obs *Observed) Change {
	c := Change{App: a.Name, Action: NoOp, Desired: a}
	if cts := obs.Apps[a.Name]; len(cts) > 0 {
		c.VMID, c.Node = cts[0].VMID, cts[0].Node
	}
	return c
}

// offlineContainer plans an app whose one container stays on a node that
// is offline (offlineApp), and reports whether it did.
func (m *planner) offlineContainer(a *App) bool {
	cts := m.obs.Apps[a.Name]
	if len(cts) != 1 || a.Node != "" && a.Node != cts[0].Node || !slices.Contains(m.obs.Offline, cts[0].Node) {
		return false
	}
	c, prob := offlineApp(m.p, a, cts[0], m.pl, m.obs)
	if prob != "" {
		m.refuse(prob)
	}
	m.p.Changes = append(m.p.Changes, c)
	return true
}

// finishMove plans an app whose move to node was interrupted: its
// carrier holds volumes, and the node the move came from needs its
// keepers looked at too.
func (m *planner) finishMove(a *App, car *Carrier, node string) {
	c, warn := finishMove(a, car, m.obs)
	m.warn(warn)
	if c.Node != node && len(a.Volumes) > 0 {
		m.addNode(c.Node)
	}
	m.p.Changes = append(m.p.Changes, c)
}

// move plans moving the app's container ct to node.
func (m *planner) move(a *App, ct *CT, node string) {
	c, probs := moveChange(a, ct, node, m.obs)
	planHA(&c, a, ct)
	probs = append(probs, unknownCarrierRefusals(a.Name, c, m.obs)...)
	if prob, warn := bridgeProblem(a, node, m.obs, m.warnedBridges); prob != "" {
		probs = append(probs, prob)
	} else {
		m.warn(warn)
	}
	m.refuse(probs...)
	if len(probs) == 0 { // a refused app's change is not shown
		m.p.Changes = append(m.p.Changes, c)
	}
}

// change plans the app's container on node (appChange) and adds what
// appChange cannot know: the template's storage and download, the bridge,
// why node was chosen (placed), and a stale copy of an interrupted
// recovery.
func (m *planner) change(a *App, node, placed string) {
	obs := m.obs
	c, probs := appChange(a, node, obs)
	planHA(&c, a, singleCT(obs.Apps[a.Name]))
	probs = append(probs, unknownCarrierRefusals(a.Name, c, obs)...)
	if c.Action == Create || c.Action == Replace {
		if prob := templateStorageProblem(a, node, obs); prob != "" {
			probs = append(probs, prob)
		} else if c.FetchTemplate {
			c.Reasons = append(c.Reasons, fmt.Sprintf("template %s is not on node %s: it is downloaded first", a.Template, node))
		}
	}
	if c.Action != NoOp {
		prob, warn := bridgeProblem(a, node, obs, m.warnedBridges)
		if prob != "" {
			probs = append(probs, prob)
		}
		m.warn(warn)
	}
	if placed != "" && c.Action == Create {
		c.Reasons = append(c.Reasons, placed)
	}
	if c.Action != NoOp && c.Recover == nil {
		// A recovery that was interrupted: its stale copy is still
		// on the offline node, which the guard cannot read.
		c.Recover = staleOffline(a.Name, obs)
	}
	m.refuse(probs...)
	if len(probs) == 0 { // a refused app's change is not shown
		m.p.Changes = append(m.p.Changes, c)
	}
}

// keepers plans the keeper work on the nodes of the apps' volumes and on
// those whose keepers record them, and notes projects and declarations.
func (m *planner) keepers(apps []App) {
	p, obs := m.p, m.obs
	m.nodes = append(m.nodes, recordNodes(apps, obs, m.nodes)...)
	for _, node := range m.nodes {
		p.Keepers = append(p.Keepers, keeperChanges(node, obs, p.Changes)...)
	}
	p.Keepers = noteProjects(p.Keepers, projectOf(apps), apps, obs)
	p.Keepers = noteDeclared(p.Keepers, apps, obs)
}

// outside plans what lies outside the manifest's apps: stale copies of
// recovered apps (first), this project's containers whose app is gone
// from the manifest (last), warnings, damaged keepers and carriers, and
// the apps left unchecked.
func (m *planner) outside(apps []App) {
	p, obs := m.p, m.obs
	stale, staleWarn, staleProbs := staleChanges(apps, obs)
	p.Changes = append(stale, p.Changes...)
	p.Warnings = append(p.Warnings, staleWarn...)
	m.refuse(staleProbs...)
	removed, warn, probs := removedChanges(projectOf(apps), apps, obs)
	p.Changes = append(p.Changes, removed...)
	p.Changes = append(p.Changes, m.removedVMs(apps)...)
	p.Warnings = append(p.Warnings, warn...)
	m.refuse(probs...)
	p.Warnings = append(p.Warnings, obs.Warnings...)
	p.Warnings = append(p.Warnings, warnings(apps, obs)...)
	m.refuse(damagedRefusals(p, obs)...)
	p.Unchecked = uncheckedApps(projectOf(apps), apps, p, obs)
}

// keeperChanges is the keeper work on node: repair each keeper
// (re-protect it, finish volumes whose creation was interrupted), and
// create keepers where the new volumes of the changes do not fit in the
// existing ones (a keeper holds at most MaxKeeperVolumes, and its records
// must fit in PVE's description).
func keeperChanges(node string, obs *Observed, changes []Change) []KeeperChange {
	var out []KeeperChange
	keepers := obs.Keepers[node]
	rooms := make([]Room, len(keepers))
	for i, k := range keepers {
		if kc := keeperRepair(k, obs); kc != nil {
			out = append(out, *kc)
		}
		rooms[i] = RoomOf(k)
	}
	var extra []Room // keepers to create
	for _, c := range changes {
		if c.Node != node || c.Kind == KindVM { // a VM app's disks are the keeper VM's (vmkeeper.go)
			continue
		}
		for _, v := range c.Volumes {
			if v.Action != VolCreate && v.Action != VolAdopt && v.Action != VolMove {
				continue
			}
			line := RecordLen(VolumeKey{c.App, v.Name}, v.Storage)
			placed := false
			for i := range rooms {
				if rooms[i].Take(line) {
					placed = true
					break
				}
			}
			for i := range extra {
				if !placed && extra[i].Take(line) {
					placed = true
				}
			}
			if !placed {
				r := NewRoom()
				r.Take(line)
				extra = append(extra, r)
			}
		}
	}
	for range extra {
		reason := "no keeper on node " + node + " to own retained volumes"
		if len(keepers) > 0 {
			reason = fmt.Sprintf("the keepers on node %s are full (at most %d volumes each, and their records must fit in the description): one more", node, MaxKeeperVolumes)
		}
		out = append(out, KeeperChange{Node: node, Action: Create, Reasons: []string{reason}})
	}
	return out
}

// unique is problems without repeats, in their first order (a damaged
// keeper is named once however many apps it refuses).
func unique(problems []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range problems {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// recordNodes are the nodes besides have, in name order, whose keepers
// record a volume of one of apps or of their project (an app moved away
// or removed leaves its records; a keeper there that needs a repair, its
// protection above all, is this manifest's to repair too). Offline nodes
// are left out: nothing there can be read or changed.
func recordNodes(apps []App, obs *Observed, have []string) []string {
	project := projectOf(apps)
	var out []string
	for _, node := range slices.Sorted(maps.Keys(obs.Keepers)) {
		if slices.Contains(have, node) || slices.Contains(obs.Offline, node) {
			continue
		}
	keepers:
		for _, k := range obs.Keepers[node] {
			for vk := range k.Records {
				if slices.ContainsFunc(apps, func(a App) bool { return a.Name == vk.App }) || project != "" && k.Projects[vk.App] == project {
					out = append(out, node)
					break keepers
				}
			}
		}
	}
	return out
}

// damagedOwner reports whether volid belongs to a damaged keeper or
// carrier (Observed.Damaged).
func (o *Observed) damagedOwner(volid string) bool {
	owner := VolumeOwner(volid)
	return owner != 0 && slices.ContainsFunc(o.Damaged, func(d *Damaged) bool { return d.VMID == owner })
}

func isKeeper(keepers []*Keeper, vmid int) bool {
	for _, k := range keepers {
		if k.VMID == vmid {
			return true
		}
	}
	return false
}

// keeperRepair is the work an existing keeper needs, or nil.
func keeperRepair(k *Keeper, obs *Observed) *KeeperChange {
	node := k.Node
	kc := &KeeperChange{Node: node, VMID: k.VMID, Action: Update}
	if !k.Protected {
		kc.Protect = true
		kc.Reasons = append(kc.Reasons, "protection is off")
	}
	for _, vk := range sortedVolumeKeys(k.Lost) {
		if kc.Remount == nil {
			kc.Remount = map[VolumeKey]string{}
		}
		kc.Remount[vk] = k.Lost[vk]
		kc.Reasons = append(kc.Reasons, fmt.Sprintf("volume %s (%s) lost its mount point on the keeper (removed outside corral; PVE kept the volume): mount it again from its Notes line", vk, k.Lost[vk]))
	}
	// Adoptions interrupted after the move: the volume is the keeper's,
	// under the entry its intent names, and gets its record. One whose
	// move never happened is forgotten (the volume is where it was).
	for _, vk := range sortedVolumeKeys(k.Intents) {
		in := k.Intents[vk]
		moved := ParseMountPoint(k.Config[in.Key]).Volume
		_, srcLeft := obs.Volumes[volKey(k.Node, in.Source)]
		switch {
		case obs.damagedOwner(in.Source):
			// The source is a damaged keeper's or carrier's: nothing that
			// concerns its volumes changes until a human repairs it.
		case k.Records[vk] != "":
			kc.DropIntents = append(kc.DropIntents, vk)
		case moved != "" && VolumeOwner(moved) == k.VMID && !srcLeft:
			if kc.Remount == nil {
				kc.Remount = map[VolumeKey]string{}
			}
			kc.Remount[vk] = moved
			kc.Reasons = append(kc.Reasons, fmt.Sprintf("finish the adoption of %s as %s (%s), interrupted after the move", in.Source, vk, moved))
		case srcLeft:
			kc.DropIntents = append(kc.DropIntents, vk)
			kc.Reasons = append(kc.Reasons, fmt.Sprintf("forget the adoption of %s as %s, interrupted before the move (the volume is where it was)", in.Source, vk))
		}
	}
	if !maps.Equal(ParseKeeperRecords(k.Config["description"]), k.Records) {
		kc.Notes = true
		kc.Reasons = append(kc.Reasons, "its Notes do not list its volumes as its mount points record them (edited outside corral): write them again")
	}
	if len(kc.Reasons) == 0 {
		return nil
	}
	return kc
}

// appChange plans one app: it refuses what cannot be told apart or is
// taken, compares the container (if any) with the manifest, plans the
// volumes, and then decides between create, replace, update and no-op.
func appChange(a *App, node string, obs *Observed) (Change, []string) {
	c := Change{App: a.Name, Node: node, VMID: a.VMID, Desired: a}
	var probs []string
	cts := obs.Apps[a.Name]
	if len(cts) > 1 {
		return c, []string{manyContainers(a, cts)}
	}
	var ct *CT
	if len(cts) == 1 {
		ct = cts[0]
	}
	if !hasTemplate(obs, node, a.Template) {
		c.FetchTemplate = true
	}
	if prob := vmidTaken(a, ct, obs); prob != "" {
		probs = append(probs, prob)
	}
	if ct != nil {
		probs = append(probs, compareContainer(&c, a, ct, node)...)
	}
	keepers := obs.Keepers[node]
	probs = append(probs, planVolumes(&c, a, node, ct, keepers, obs)...)
	if ct != nil && c.Action == Replace {
		probs = append(probs, unmanagedVolumes(a.Name, ct, "replacing")...)
	}
	if ct == nil || c.Action == Replace {
		c.Desired = withVolumeTags(a, c.Volumes, obs)
	}
	if ct != nil && c.Action == Replace {
		c.Desired = keptOrigin(c.Desired, ct) // the new container keeps who declared the app
	}
	switch {
	case ct == nil:
		c.Action = Create
		c.Reasons = append(c.Reasons, "no container for this app")
		freshContainer(&c, a)
	case c.Action == Replace:
		freshContainer(&c, a)
	default:
		updateChange(&c, a, ct, keepers, obs)
	}
	planFirewallAndPool(&c, a, ct, obs)
	return c, probs
}

// manyContainers refuses an app whose tag several containers carry:
// corral cannot tell which one is the app's.
func manyContainers(a *App, cts []*CT) string {
	var ids []string
	for _, ct := range cts {
		ids = append(ids, fmt.Sprintf("CT %d on %s", ct.VMID, ct.Node))
	}
	return fmt.Sprintf("app %s: %d containers carry its tag %s%s (%s), and corral cannot tell which one is the app's (one was copied, or tagged, outside corral): "+
		"remove the tag from the ones that are not (in the web UI, or pct set VMID --tags …), or destroy them if nothing on them is needed, then plan again", a.Name, len(cts), TagAppPrefix, a.Name, strings.Join(ids, ", "))
}

// vmidTaken refuses the vmid a pins when a guest corral does not manage
// (not the app's own container ct) has it; "" if it is free.
func vmidTaken(a *App, ct *CT, obs *Observed) string {
	g, ok := obs.Others[a.VMID]
	if !ok || a.VMID == 0 || ct != nil && ct.VMID == a.VMID {
		return ""
	}
	return fmt.Sprintf("app %s: vmid %d is taken by %s %d (%s) on %s, which corral does not manage; "+
		"choose another vmid or leave it out to take the next free one. To keep that guest's data, list its volumes with adopt: <volid> "+
		"(corral moves them into its keeper while the guest is stopped), then remove the guest", a.Name, a.VMID, g.Type, g.VMID, orNone(g.Name), g.Node)
}

// compareContainer compares the app's existing container ct with a: what
// PVE cannot change in place makes c a Replace; otherwise the rootfs may
// grow, but never shrink (refused).
func compareContainer(c *Change, a *App, ct *CT, node string) []string {
	c.OldVMID, c.Digest = ct.VMID, ct.Digest
	if c.VMID == 0 {
		c.VMID = ct.VMID
	}
	root := ct.RootFS()
	c.Reasons = append(c.Reasons, replaceReasons(a, ct, root, node)...)
	if len(c.Reasons) > 0 {
		c.Action = Replace
		if a.VMID == 0 {
			c.VMID = 0 // a replace gets a fresh VMID unless the manifest pins one
		}
		return nil
	}
	have, ok := ParseSizeString(root.Size)
	if !ok {
		return nil
	}
	switch {
	case a.RootSize < have:
		return []string{fmt.Sprintf("app %s: rootfs cannot shrink from %s to %s (PVE: unable to shrink disk size); set rootfs.size to %s or more", a.Name, human.Size(have), human.Size(a.RootSize), manifest.Size(have))}
	case a.RootSize > have:
		c.RootGrow = a.RootSize
	}
	return nil
}

// replaceReasons are the differences between ct (whose root file system
// is root) and a that PVE cannot change in place.
func replaceReasons(a *App, ct *CT, root MountPoint, node string) []string {
	var r []string
	if ct.Node != node {
		r = append(r, fmt.Sprintf("node changes %s → %s", ct.Node, node))
	}
	if a.VMID != 0 && a.VMID != ct.VMID {
		r = append(r, fmt.Sprintf("vmid changes %d → %d", ct.VMID, a.VMID))
	}
	if m := ParseMarker(ct.Config["description"]); m.Template != a.Template {
		r = append(r, fmt.Sprintf("template changes %s → %s", orNone(m.Template), a.Template))
	}
	if truthy(ct.Config["unprivileged"]) != a.Unprivileged {
		r = append(r, fmt.Sprintf("unprivileged changes %v → %v (read-only after create)", truthy(ct.Config["unprivileged"]), a.Unprivileged))
	}
	if sid, _, _ := strings.Cut(root.Volume, ":"); sid != a.RootStorage {
		r = append(r, fmt.Sprintf("rootfs storage changes %s → %s", sid, a.RootStorage))
	}
	return r
}

// planVolumes adds the change of each of a's volumes to c (after the
// replace decision: a replaced container's mounts are not kept) and
// returns their refusals.
func planVolumes(c *Change, a *App, node string, ct *CT, keepers []*Keeper, obs *Observed) []string {
	var probs []string
	for _, v := range a.Volumes {
		vc, prob := volumeChange(a, v, node, ct, keepers, obs, c.Action == Replace)
		if prob != "" {
			probs = append(probs, prob)
		}
		c.Volumes = append(c.Volumes, vc)
	}
	return probs
}

// freshContainer is what a new container (created or replacing one)
// needs: a start, and all of its provisioning.
func freshContainer(c *Change, a *App) {
	c.Start = true
	c.Guest = a.GuestDigest != ""
	c.Steps, c.Restarts, _ = planSteps(a, "", true)
}

// updateChange plans an app whose container ct stays: provisioning,
// pending changes to drop, config edits, stale references, detached
// volumes and a start or restart; any of them makes c an Update.
func updateChange(c *Change, a *App, ct *CT, keepers []*Keeper, obs *Observed) {
	planGuest(c, a, ct.Config["description"])
	c.Revert = volumePending(ct)
	c.Config = configEdits(keptOrigin(keptTags(withVolumeTags(a, c.Volumes, obs), ct), ct), ct)
	c.Cleanup = cleanupKeys(ct, keepers)
	for _, key := range detachKeys(a, ct, keepers) {
		c.Volumes = append(c.Volumes, VolumeChange{Volume: Volume{Name: key.name}, Action: VolDetach, VolID: key.volid, Key: key.key})
	}
	planStart(c, ct)
	if len(c.Config) > 0 || len(c.Revert) > 0 || len(c.Cleanup) > 0 || c.RootGrow > 0 || c.Start || c.Restart || c.Guest || volumesChange(c.Volumes) {
		c.Action = Update
		c.Reasons = append(c.Reasons, updateReasons(*c, ct)...)
	}
}

// planGuest decides whether the existing container (whose description is
// desc) is provisioned again: its recorded digest differs, steps are to
// rerun, or provisioning stopped before it finished.
func planGuest(c *Change, a *App, desc string) {
	stopped := ParseMarker(desc).Stopped
	c.Guest = a.GuestDigest != "" && len(a.GuestUnknown) == 0 && (ParseMarker(desc).Provisioned != a.GuestDigest || len(a.Rerun) > 0 || stopped != nil)
	if stopped != nil && a.GuestDigest != "" {
		// Said even when a value is unread (status without the
		// secret): the app is not provisioned, whatever else holds.
		c.Reasons = append(c.Reasons, StoppedReason(stopped, a.Steps))
		c.Guest = true
	}
	if c.Guest {
		var known bool
		if c.Steps, c.Restarts, known = planSteps(a, desc, false); !known {
			c.StepsUnknown = "this container's steps were recorded only inside it (by an older corral, or the record did not fit in its description): apply compares them there and runs what changed"
		}
		if len(a.FactsUnknown) > 0 {
			c.StepsUnknown = "the steps read " + factList(a.FactsUnknown) + ", known after apply: apply compares the steps in the container then and runs what changed"
		}
	}
}

// planStart starts a stopped container, and restarts a running one whose
// config edits or volume changes take effect only at a restart.
func planStart(c *Change, ct *CT) {
	running := ct.Status == "running"
	for _, e := range c.Config {
		if e.Restart && running {
			c.Restart = true
		}
	}
	for _, vc := range c.Volumes {
		switch vc.Action {
		case VolCreate, VolAdopt, VolAttach, VolRemount, VolDetach:
			if running {
				c.Restart = true
			}
		}
	}
	if !running && !haOwned(ct) { // HA starts (or leaves stopped) its own
		c.Start = true
	}
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

func hasTemplate(obs *Observed, node, volid string) bool {
	return slices.Contains(obs.Templates[node], volid)
}

func volumesChange(vs []VolumeChange) bool {
	for _, v := range vs {
		if v.Action != VolKeep {
			return true
		}
	}
	return false
}

func updateReasons(c Change, ct *CT) []string {
	var r []string
	if len(c.Revert) > 0 {
		var keys []string
		for _, k := range c.Revert {
			if ct.Pending[k] == "" {
				k += " (delete)"
			}
			keys = append(keys, k)
		}
		r = append(r, "drop pending changes "+strings.Join(keys, ", ")+" (left by an interrupted run or made outside corral; they would apply at the next restart)")
	}
	for _, e := range c.Config {
		r = append(r, e.Key+" changes")
		if why := originReason(e); why != "" {
			r = append(r, why)
		}
	}
	if c.RootGrow > 0 {
		r = append(r, "rootfs grows to "+human.Size(c.RootGrow))
	}
	for _, v := range c.Volumes {
		if v.Action != VolKeep {
			r = append(r, fmt.Sprintf("volume %s: %s", v.Name, v.Action))
		}
	}
	if len(c.Cleanup) > 0 {
		r = append(r, "drop stale references "+strings.Join(c.Cleanup, ", "))
	}
	if ct.Status != "running" {
		r = append(r, "container is "+ct.Status)
	}
	switch {
	case !c.Guest || ParseMarker(ct.Config["description"]).Stopped != nil:
	case c.Desired != nil && len(c.Desired.FactsUnknown) > 0:
		r = append(r, "provisioning reads "+factList(c.Desired.FactsUnknown)+", known only after apply")
	default:
		r = append(r, "provisioning or health checks changed since the last apply")
	}
	return r
}

// volumeChange plans one volume of an app. The steps go from where the
// data is most surely found to where it is least: a record on another
// node's keeper, a record here (or on shared storage), an adoption
// interrupted after its move, and only then a new or adopted volume.
func volumeChange(a *App, v Volume, node string, ct *CT, keepers []*Keeper, obs *Observed, replacing bool) (VolumeChange, string) {
	key := VolumeKey{a.Name, v.Name}
	vc := VolumeChange{Volume: v}
	// A record on another node's keeper: the data is there, not here.
	if k := otherNodeKeeper(key, node, obs); k != nil {
		return vc, otherNodeRecord(a, v, node, keptRecord{k, k.Records[key]}, obs)
	}
	volid := recordedVolume(key, ct, keepers, obs)
	if volid != "" {
		return recordedVolumeChange(a, v, volid, node, ct, obs, replacing)
	}
	if moved := interruptedAdoption(key, node, keepers, obs); moved != "" {
		vc.Action, vc.Adopt = VolAdopt, moved
		return vc, ""
	}
	return newVolumeChange(a, v, node, obs)
}

// otherNodeKeeper is the first keeper (in node order) of a node other
// than node that records key on storage that is not shared, or nil: the
// volume's data is on that node, where this one cannot reach it.
func otherNodeKeeper(key VolumeKey, node string, obs *Observed) *Keeper {
	for _, n := range slices.Sorted(maps.Keys(obs.Keepers)) {
		for _, k := range obs.Keepers[n] {
			if n != node && k.Records[key] != "" && !obs.onShared(k.Records[key]) {
				return k
			}
		}
	}
	return nil
}

// recordedVolume is the volid a keeper on the node records for key, or
// the one found on shared storage, or "".
func recordedVolume(key VolumeKey, ct *CT, keepers []*Keeper, obs *Observed) string {
	for _, keeper := range keepers {
		if volid := keeper.Records[key]; volid != "" {
			return volid
		}
	}
	// On shared storage the keeper may be another node's (an app
	// recovered from an offline node), or unreadable while that node
	// is down: the container's tags then say which volume it mounts.
	return sharedRecord(key, ct, obs)
}

// interruptedAdoption is the volume of an adoption of key interrupted
// after the move, or "": the volume is already the keeper's, under the
// entry the intent names, so it must not be taken for missing.
func interruptedAdoption(key VolumeKey, node string, keepers []*Keeper, obs *Observed) string {
	for _, keeper := range keepers {
		if in, ok := keeper.Intents[key]; ok {
			moved := ParseMountPoint(keeper.Config[in.Key]).Volume
			if _, srcLeft := obs.Volumes[volKey(node, in.Source)]; moved != "" && VolumeOwner(moved) == keeper.VMID && !srcLeft {
				return moved
			}
		}
	}
	return ""
}

// newVolumeChange plans a volume no keeper records: an adoption of the
// volume the manifest names (refused unless that volume exists on node,
// keeps its storage and belongs to nothing else), or a new volume.
func newVolumeChange(a *App, v Volume, node string, obs *Observed) (VolumeChange, string) {
	vc := VolumeChange{Volume: v}
	if v.Adopt == "" {
		vc.Action = VolCreate
		return vc, ""
	}
	vc.Action = VolAdopt
	if sid, _, _ := strings.Cut(v.Adopt, ":"); v.Storage != "" && sid != v.Storage {
		return vc, fmt.Sprintf("app %s: volume %s adopts %s but says storage %s; adopting keeps the volume's storage (%s)", a.Name, v.Name, v.Adopt, v.Storage, sid)
	}
	if _, ok := obs.Volumes[volKey(node, v.Adopt)]; !ok {
		return vc, fmt.Sprintf("app %s: volume %s: adopt: %s does not exist on node %s", a.Name, v.Name, v.Adopt, node)
	}
	if prob := adoptTaken(a.Name, v, node, obs); prob != "" {
		return vc, prob
	}
	return vc, ""
}

// recordedVolumeChange plans a volume a keeper records as volid: it must
// still exist, stay on its storage and not shrink; then it is attached,
// kept or remounted as the container mounts it, or grown.
func recordedVolumeChange(a *App, v Volume, volid, node string, ct *CT, obs *Observed, replacing bool) (VolumeChange, string) {
	vc := VolumeChange{Volume: v, VolID: volid}
	size, ok := obs.Volumes[volKey(node, volid)]
	if !ok {
		return vc, fmt.Sprintf("app %s: volume %s is recorded as %s, which no longer exists on node %s: it was removed outside corral; corral will not silently create an empty one — remove the volume from the manifest or restore it", a.Name, v.Name, volid, node)
	}
	vc.OldSize = size
	if sid, _, _ := strings.Cut(volid, ":"); v.Storage != "" && sid != v.Storage {
		return vc, fmt.Sprintf("app %s: volume %s is on storage %s (%s); the manifest says %s: moving a retained volume between storages is not done implicitly — set storage: %s", a.Name, v.Name, sid, volid, v.Storage, sid)
	}
	vc.Action = VolAttach
	if v.Size > 0 && v.Size < size {
		return vc, fmt.Sprintf("app %s: volume %s cannot shrink from %s to %s (PVE: unable to shrink disk size); set size to %s or more", a.Name, v.Name, human.Size(size), human.Size(v.Size), manifest.Size(size))
	}
	if ct != nil && !replacing {
		for _, mp := range ct.Mounts() {
			if mp.Volume != volid {
				continue
			}
			vc.Key = mp.Key
			if mp.Path == v.Mount && mp.Backup == v.Backup {
				vc.Action = VolKeep
			} else {
				vc.Action = VolRemount
			}
		}
	}
	if v.Size > size {
		vc.Action = VolGrow
	}
	return vc, ""
}

// sharedRecord is the volid of key on shared storage that a keeper of
// any node records, or that the app container's tags record while no
// keeper that answers does; "" if none.
func sharedRecord(key VolumeKey, ct *CT, obs *Observed) string {
	for _, n := range slices.Sorted(maps.Keys(obs.Keepers)) {
		for _, k := range obs.Keepers[n] {
			if v := k.Records[key]; v != "" && obs.onShared(v) {
				return v
			}
		}
	}
	v, _ := taggedVolume(ct, key.Name, obs)
	return v
}

// configEdits compares the in-place keys.
func configEdits(a *App, ct *CT) []ConfigEdit {
	want := InPlaceConfig(*a)
	// The pinned host key and the provisioned digest are corral's, not the
	// manifest's: keep them.
	m := ParseMarker(ct.Config["description"])
	want["description"] = WithGuestRecord(want["description"], m.HostKey, m.Provisioned, m.Steps)
	if m.Stopped != nil {
		// Kept until provisioning finishes (markProvisioned drops it).
		want["description"] += markerStopped + m.stoppedRaw + "\n"
	}
	want["features"] = KeepRootFeatures(want["features"], ct.Config["features"])
	var out []ConfigEdit
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got := ct.Config[k]
		if sameValue(k, want[k], got) {
			continue
		}
		if k == "net0" && got != "" {
			// keep the MAC PVE generated: only what the manifest says changes
			want[k] = mergeNet(want[k], got)
		}
		out = append(out, ConfigEdit{Key: k, Old: got, New: want[k], Restart: restartKeys[k]})
	}
	return out
}

// mergeNet keeps hwaddr/type of the observed net0.
func mergeNet(want, got string) string {
	keep := props(got, nil)
	out := want
	for _, k := range []string{"hwaddr", "type"} {
		if v := keep[k]; v != "" {
			out += "," + k + "=" + v
		}
	}
	return out
}

// unmanagedVolumes finds volumes a CT owns besides its rootfs (vm-<vmid>-…
// in mpN or unusedN, e.g. added by hand). PVE frees them when the CT is
// destroyed, so corral refuses to destroy it until they are adopted or
// removed.
func unmanagedVolumes(app string, ct *CT, doing string) []string {
	var out []string
	for _, prefix := range []string{"mp", "unused"} {
		for _, k := range sortedConfigKeys(ct.Config, prefix) {
			vol := ParseMountPoint(ct.Config[k]).Volume
			if VolumeOwner(vol) != ct.VMID {
				continue
			}
			out = append(out, fmt.Sprintf("app %s: container %d holds %s (%s) that corral does not manage; %s the container would free it (PVE frees the volumes a container owns). "+
				"Keep it by listing it under volumes: with adopt: %s, or remove it by hand, then run again", app, ct.VMID, vol, k, doing, vol))
		}
	}
	return out
}

// cleanupKeys are unusedN entries of the workload that reference keeper
// volumes (left by a detach): dropping them frees nothing.
func cleanupKeys(ct *CT, keepers []*Keeper) []string {
	var out []string
	for _, k := range sortedConfigKeys(ct.Config, "unused") {
		if isKeeper(keepers, VolumeOwner(ct.Config[k])) {
			out = append(out, k)
		}
	}
	return out
}

type detachRef struct{ name, volid, key string }

// detachKeys are mount points of the CT holding this app's keeper volumes
// that the manifest no longer lists (kept in the keeper, detached).
func detachKeys(a *App, ct *CT, keepers []*Keeper) []detachRef {
	wanted := map[string]bool{}
	for _, v := range a.Volumes {
		wanted[v.Name] = true
	}
	var out []detachRef
	for _, mp := range ct.Mounts() {
		k, vol := mp.Key, mp.Volume
		for _, keeper := range keepers {
			for vk, volid := range keeper.Records {
				if volid == vol && vk.App == a.Name && !wanted[vk.Name] {
					out = append(out, detachRef{vk.Name, volid, k})
				}
			}
		}
	}
	return out
}

// warnings reports what needs a human: keeper volumes of apps not in this
// manifest, unrecorded keeper volumes, corral CTs outside the manifest,
// and Docker apps whose container lacks keyctl.
func warnings(apps []App, obs *Observed) []string {
	var w []string
	for _, a := range apps {
		if !a.NeedsKeyctl {
			continue
		}
		cts := obs.Apps[a.Name]
		if len(cts) == 1 && slices.Contains(obs.Offline, cts[0].Node) {
			continue // its config was not read: nothing to warn about
		}
		if len(cts) == 1 && HasFeature(cts[0].Config["features"], "keyctl") {
			continue
		}
		vmid := a.VMID
		if len(cts) == 1 {
			vmid = cts[0].VMID
		}
		w = append(w, fmt.Sprintf("app %s runs Docker in an unprivileged container, which needs keyctl=1; only root@pam can set it, once, on the node: %s "+
			"(apply creates the container and stops before the compose step until then)", a.Name, KeyctlCommand(vmid)))
	}
	w = append(w, ownerWarnings(apps, obs)...)
	return append(w, otherWarnings(apps, obs)...)
}

// ownerWarnings: a replace that flips unprivileged keeps the app's
// volumes, whose files are stored through the old container's id map
// (host uid 100000+ for an unprivileged one, PVE's default lxc.idmap);
// PVE moves them as blocks and shifts nothing, so the new container
// sees other owners.
func ownerWarnings(apps []App, obs *Observed) []string {
	var w []string
	for _, a := range apps {
		cts := obs.Apps[a.Name]
		if len(a.Volumes) == 0 || len(cts) != 1 || slices.Contains(obs.Offline, cts[0].Node) || truthy(cts[0].Config["unprivileged"]) == a.Unprivileged {
			continue
		}
		if a.Unprivileged {
			w = append(w, fmt.Sprintf("app %s becomes unprivileged: the files on its volumes keep the ids a privileged container wrote, which the new container sees as nobody's and cannot chown; "+
				"shift them on the node first (each id + 100000, PVE's default idmap) or keep unprivileged: false", a.Name))
		} else {
			w = append(w, fmt.Sprintf("app %s becomes privileged: the files on its volumes keep the shifted ids an unprivileged container wrote (uid + 100000), so the new container sees them owned by uids 100000 and up; "+
				"chown them back inside it (each id - 100000) or keep unprivileged: true", a.Name))
		}
	}
	return w
}

func otherWarnings(apps []App, obs *Observed) []string {
	inManifest := map[string]bool{}
	for _, a := range apps {
		inManifest[a.Name] = true
	}
	project := projectOf(apps)
	var w []string
	for _, name := range slices.Sorted(maps.Keys(obs.Apps)) {
		if inManifest[name] {
			continue
		}
		for _, ct := range obs.Apps[name] {
			// Another project's container is that project's business, and
			// this project's is pruned (removedChanges); only a container
			// without a project tag cannot be placed.
			switch {
			case project == "":
				w = append(w, fmt.Sprintf("container %d (app %s) is managed by corral but not in this manifest; it is left alone", ct.VMID, name))
			case ct.Project == "":
				w = append(w, fmt.Sprintf("container %d (app %s) is managed by corral but not in this manifest, and carries no project tag (it was made before projects, or restored as a copy by an older corral): it is left alone; "+
					"apply a manifest that lists it to tag it, or remove it with corral destroy %s -f MANIFEST", ct.VMID, name, name))
			}
		}
	}
	for _, node := range slices.Sorted(maps.Keys(obs.Keepers)) {
		for _, k := range obs.Keepers[node] {
			recorded := map[string]bool{}
			for _, volid := range k.Records {
				recorded[volid] = true
			}
			for _, in := range k.Intents {
				recorded[ParseMountPoint(k.Config[in.Key]).Volume] = true
			}
			for _, key := range sortedConfigKeys(k.Config, "unused") {
				if volid := k.Config[key]; !recorded[volid] {
					w = append(w, fmt.Sprintf("keeper %d on %s holds %s (%s) recorded for no app: orphaned, kept; inspect it with 'corral volumes'", k.VMID, node, volid, key))
				}
			}
		}
	}
	return w
}

// VolumeOwner is the VMID a volume's name says owns it (vm-<vmid>-disk-N,
// base-…, subvol-…), or 0. PVE frees a volume with its owner.
func VolumeOwner(volid string) int {
	_, name, _ := strings.Cut(volid, ":")
	// On file storages (dir, nfs, cifs) the volname is <vmid>/vm-<vmid>-…
	// (a linked clone's base-<n>-…/vm-<vmid>-…): the owner is the file's.
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	for _, p := range []string{"vm-", "base-", "subvol-"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			if n, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0]); err == nil {
				return n
			}
		}
	}
	return 0
}

// sortedConfigKeys returns keys like mp0..mpN (prefix + digits) in numeric order.
func sortedConfigKeys(conf map[string]string, prefix string) []string {
	var out []string
	for k := range conf {
		if rest, ok := strings.CutPrefix(k, prefix); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := strconv.Atoi(out[i][len(prefix):])
		b, _ := strconv.Atoi(out[j][len(prefix):])
		return a < b
	})
	return out
}

// sortedVolumeKeys returns m's keys in app/name order.
func sortedVolumeKeys[V any](m map[VolumeKey]V) []VolumeKey {
	out := make([]VolumeKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// adoptTaken refuses to adopt a volume corral already keeps for an app
// (its own under another name, or another app's), or one that an app
// container other than its owner mounts: adopting it would give one
// volume to two apps, and a destroy --delete-volumes of one would free
// the other's data.
func adoptTaken(app string, v Volume, node string, obs *Observed) string {
	// A root file system is its container's system: never adopted.
	for _, k := range obs.Keepers[node] {
		if ParseMountPoint(k.Config["rootfs"]).Volume == v.Adopt {
			return fmt.Sprintf("app %s: volume %s: adopt: %s is the root file system of keeper %d; adopt data volumes only", app, v.Name, v.Adopt, k.VMID)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(obs.Apps)) {
		for _, ct := range obs.Apps[name] {
			if ct.RootFS().Volume == v.Adopt {
				return fmt.Sprintf("app %s: volume %s: adopt: %s is the root file system of container %d (app %s); adopt data volumes only", app, v.Name, v.Adopt, ct.VMID, name)
			}
		}
	}
	for _, g := range obs.Others {
		if g.RootFS != "" && g.RootFS == v.Adopt {
			return fmt.Sprintf("app %s: volume %s: adopt: %s is the root file system of %s %d (%s); adopt data volumes only", app, v.Name, v.Adopt, g.Type, g.VMID, orNone(g.Name))
		}
	}
	for _, k := range obs.Keepers[node] {
		for vk, volid := range k.Records {
			if volid == v.Adopt {
				return fmt.Sprintf("app %s: volume %s: adopt: %s is already corral's volume %s (kept by keeper %d); one volume cannot belong to two apps: "+
					"use that app's volume, or drop adopt: to get a new volume", app, v.Name, v.Adopt, vk, k.VMID)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(obs.Apps)) {
		for _, ct := range obs.Apps[name] {
			if ct.VMID == VolumeOwner(v.Adopt) {
				continue
			}
			for key, val := range ct.Config {
				if (key == "rootfs" || isIndexedKey(key, "mp")) && ParseMountPoint(val).Volume == v.Adopt {
					return fmt.Sprintf("app %s: volume %s: adopt: %s is mounted by container %d (app %s) as %s; one volume cannot belong to two apps", app, v.Name, v.Adopt, ct.VMID, name, key)
				}
			}
		}
	}
	return ""
}

func isIndexedKey(key, prefix string) bool {
	_, ok := indexed(key, prefix)
	return ok
}

// recoveries describes the interrupted restores and the rescues, in app
// order, and the nodes they are on.
func recoveries(obs *Observed) (text, nodes []string) {
	for _, app := range slices.Sorted(maps.Keys(obs.Restores)) {
		r := obs.Restores[app]
		text = append(text, r.String(obs))
		for _, ct := range []*CT{r.New, r.Replaced} {
			if ct != nil {
				nodes = append(nodes, ct.Node)
			}
		}
	}
	for _, app := range slices.Sorted(maps.Keys(obs.VMRestores)) {
		r := obs.VMRestores[app]
		text = append(text, r.String(obs))
		nodes = append(nodes, r.Nodes()...)
	}
	for _, app := range slices.Sorted(maps.Keys(obs.Rescues)) {
		for _, r := range obs.Rescues[app] {
			text = append(text, r.String())
			nodes = append(nodes, r.Node)
		}
	}
	return text, nodes
}

// volumePending are the container's pending changes to its volumes
// (rootfs, mpN, unusedN): the plan is made against the current ones, so
// they are dropped first. Other pending changes are left alone (an
// administrator's `pct set` of a root-only feature waits for the next
// restart that way); a key the manifest sets is overwritten anyway.
func volumePending(ct *CT) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(ct.Pending)) {
		if k == "rootfs" || isIndexedKey(k, "mp") || isIndexedKey(k, "unused") {
			out = append(out, k)
		}
	}
	return out
}

// templateStorageProblem says why the storage of a's template cannot
// hold it on node, or "". Without this, PVE's answer to the download
// (POST aplinfo) is a permission error on /storage/<sid>, which points at
// the token rather than at the manifest.
func templateStorageProblem(a *App, node string, obs *Observed) string {
	storages, ok := obs.Storages[node]
	if !ok || a.Template == "" {
		return ""
	}
	sid, _, found := strings.Cut(a.Template, ":")
	if !found {
		return ""
	}
	var tmpl []string
	for id, cts := range storages {
		if slices.Contains(cts, "vztmpl") {
			tmpl = append(tmpl, id)
		}
	}
	sort.Strings(tmpl)
	cts, exists := storages[sid]
	switch {
	case !exists:
		return fmt.Sprintf("app %s: template %s: storage %s does not exist on node %s (or is disabled there, or the token holds no privilege on /storage/%s); storages holding templates (vztmpl) there: %s",
			a.Name, a.Template, sid, node, sid, orNone(strings.Join(tmpl, ", ")))
	case !slices.Contains(cts, "vztmpl"):
		return fmt.Sprintf("app %s: template %s: storage %s on node %s does not hold templates (its content is %s); storages holding templates (vztmpl) there: %s",
			a.Name, a.Template, sid, node, strings.Join(cts, ","), orNone(strings.Join(tmpl, ", ")))
	}
	return ""
}

// bridgeProblem says whether a's bridge is missing on node (a refusal:
// PVE would create the container and fail its start with "bridge 'X'
// does not exist"), or, once per node, why bridges there cannot be
// checked (a warning).
func bridgeProblem(a *App, node string, obs *Observed, warned map[string]bool) (prob, warn string) {
	if a.Bridge == "" {
		return "", ""
	}
	bridges, ok := obs.Bridges[node]
	if !ok {
		if w := obs.BridgeWarnings[node]; w != "" && !warned[node] {
			warned[node] = true
			return "", w + ": the bridges of apps there are not checked before apply"
		}
		return "", ""
	}
	if slices.Contains(bridges, a.Bridge) {
		return "", ""
	}
	return fmt.Sprintf("app %s: bridge %s does not exist on node %s (or the token lacks SDN.Use on /sdn/zones/localnetwork/%s); bridges there: %s; set network.bridge to one of them",
		a.Name, a.Bridge, node, a.Bridge, strings.Join(bridges, ", ")), ""
}

// carrierRefusals refuses app while a carrier corral cannot finish
// (Observed.BadCarriers) names it: its volumes may be in that carrier,
// where the plan would not see them, and would take them for lost.
func carrierRefusals(app string, obs *Observed) []string {
	var out []string
	for _, c := range obs.BadCarriers {
		if slices.Contains(c.Apps(), app) {
			out = append(out, c.Refusal(app))
		}
	}
	return out
}

// unknownCarrierRefusals refuses a change that would create a volume
// while a carrier that names no app at all (its Notes wiped) holds
// volumes: the volume may be one of them.
func unknownCarrierRefusals(app string, c Change, obs *Observed) []string {
	creates := false
	for _, v := range c.Volumes {
		creates = creates || v.Action == VolCreate
	}
	var out []string
	for _, car := range obs.BadCarriers {
		if creates && len(car.Apps()) == 0 && len(car.HeldVolumes()) > 0 {
			out = append(out, car.Refusal(app))
		}
	}
	return out
}
