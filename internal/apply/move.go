package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// mover carries out the moves and drains of a plan (plan.Move): the
// container, its carrier and the volumes it carries, from one node to
// another. It holds nothing but the runner; the keepers of the run come
// with each call, since a move takes out of one and hands to another.
type mover struct {
	*runner
}

// A move takes an app's container and its retained volumes to another
// node (plan.Move). PVE copies a local volume between nodes only by
// migrating the container that owns it, and hands a volume from one
// container to another only on one node (behaviour.md (i.2), (i.4)),
// so the volumes travel in a carrier (plan.Carrier):
//
//  1. the app's container is stopped, its snapshots deleted (with
//     consent), and the keeper volumes detached from it;
//  2. a protected carrier is created on the source node, its Notes naming
//     the move (the intent record exists before any volume moves);
//  3. each volume goes from the source keeper to the carrier
//     (move_volume … target-volume=unusedN), a "corral-carrying" line
//     written first;
//  4. the carrier migrates to the target node (PVE copies the volumes it
//     owns; on shared storage nothing is copied);
//  5. the app's container migrates (stopped);
//  6. the target node's keeper adopts each volume (its own intent line,
//     move_volume, then the record);
//  7. stale copies of a failed migration are freed, then the carrier,
//     holding nothing but its rootfs, is destroyed;
//  8. the result is verified: every volume recorded on the target node
//     with its size, nothing left of the carrier on either node.
//
// Then the change goes on as an update on the target node (attach,
// start, guest work). moveApp decides each step from fresh reads, so
// the same code starts a move, finishes one that was killed at any API
// call, or (a carrier still on the node the app should be on) rolls it
// back: the volumes then return to that node's keeper.
func (m *mover) moveApp(ctx context.Context, c plan.Change, keepers *keeperSet, obs *plan.Observed) error {
	app, to := c.App, c.Node
	res, err := m.client.ClusterResources(ctx, "vm")
	if err != nil {
		return err
	}
	ct, car, leftovers, err := m.findMove(ctx, app, c.VMID, res)
	if err != nil {
		return err
	}
	if err := m.dropLeftovers(ctx, app, leftovers, obs); err != nil {
		return err
	}
	sizes := map[plan.VolumeKey]int64{}
	if car == nil {
		var done bool
		if car, done, err = m.startMove(ctx, c, keepers, obs, ct, sizes); err != nil || done {
			return err
		}
	} else if err := m.resumeMove(ctx, c, ct, car); err != nil {
		return err
	}
	// 3. Into the carrier, while it is on a node the app leaves.
	if car.node != to {
		if err := m.carryAway(ctx, keepers, car, app, to); err != nil {
			return err
		}
	}
	// 5. The app's container.
	if ct != nil && ct.Node != to {
		if err := m.migrateApp(ctx, c, ct, to); err != nil {
			return err
		}
	}
	// 6. The target node's keeper takes each volume.
	notes, err := m.handOverCarried(ctx, keepers, car, to)
	if err != nil {
		return err
	}
	// 7. What a failed or killed migration left, of the carrier or of
	// the app's container, on the nodes the move went to or came from (a
	// rollback retargets the move, so the nodes it was headed for are in
	// the Notes too); then the carrier goes. The copies are freed while
	// the carrier still exists: its VMID is then its own in the whole
	// cluster, so a volume named for it on another node can only be such
	// a copy (freed after the destroy, it could already be a parallel
	// move's new carrier's), and a run killed between the two finds the
	// carrier, and so the copies, again.
	if err := m.freeMoveCopies(ctx, app, car, notes, ct, obs); err != nil {
		return err
	}
	if err := m.step(app, "move", fmt.Sprintf("destroy carrier %d on %s", car.vmid, car.node), func() error {
		return m.destroyCarrier(ctx, app, car)
	}); err != nil {
		return err
	}
	// 8. Verify.
	return m.step(app, "move", "verify volumes on "+to, func() error {
		return m.verifyMove(ctx, keepers, app, to, sortedVolumeKeys(notes.Carrying), sizes, car.vmid)
	})
}

// dropLeftovers destroys the empty carriers of runs killed right after
// creating them: nothing was handed to them (no carrying line, no
// volume), so they go.
func (m *mover) dropLeftovers(ctx context.Context, app string, leftovers []*carrierRef, obs *plan.Observed) error {
	for _, l := range leftovers {
		if err := m.step(app, "move", fmt.Sprintf("destroy carrier %d on %s (empty, left by an interrupted run)", l.vmid, l.node), func() error {
			return m.dropCarrier(ctx, app, l, obs)
		}); err != nil {
			return err
		}
	}
	return nil
}

// startMove begins a move no carrier records yet (steps 1 and 2): the
// container must be ready to leave, and the carrier is created on its
// node, sizes noting each volume's for the final check. done is true
// when nothing is left to do: the container is already there, or it has
// no retained volume and simply migrated.
func (m *mover) startMove(ctx context.Context, c plan.Change, keepers *keeperSet, obs *plan.Observed, ct *resource, sizes map[plan.VolumeKey]int64) (car *carrierRef, done bool, err error) {
	app, to := c.App, c.Node
	if ct == nil {
		return nil, false, fmt.Errorf("%s: no container and no carrier: nothing to move", app)
	}
	if ct.Node == to {
		return nil, true, nil
	}
	from := ct.Node
	if err := m.readyToLeave(ctx, c, ct); err != nil {
		return nil, false, err
	}
	recs, err := m.appRecords(ctx, keepers, from, app)
	if err != nil {
		return nil, false, err
	}
	if len(recs) == 0 {
		return nil, true, m.migrateApp(ctx, c, ct, to)
	}
	for vk, volid := range recs {
		sizes[vk] = obs.Volumes[from+"/"+volid]
	}
	if err := m.step(app, "move", "create carrier on "+from, func() error {
		car, err = m.createCarrier(ctx, app, from, to, c, obs)
		return err
	}); err != nil {
		return nil, false, err
	}
	return car, false, nil
}

// resumeMove takes up a move a carrier records: the container, if still
// there, must be ready to leave, and a move now headed elsewhere is
// retargeted, the old target kept in the Notes (a migration there may
// have left copies).
func (m *mover) resumeMove(ctx context.Context, c plan.Change, ct *resource, car *carrierRef) error {
	if ct != nil {
		if err := m.readyToLeave(ctx, c, ct); err != nil {
			return err
		}
	}
	to := c.Node
	if car.notes.To == to {
		return nil
	}
	return m.carrierChange(ctx, car, "retarget the move to "+to, func(n *plan.CarrierNotes) {
		if !slices.Contains(n.Was, n.To) {
			n.Was = append(n.Was, n.To) // a migration there may have left copies
		}
		n.To = to
	})
}

// carryAway hands app's volumes on the carrier's node to the carrier
// (step 3), then migrates the carrier with what it holds to the target
// node (step 4).
func (m *mover) carryAway(ctx context.Context, keepers *keeperSet, car *carrierRef, app, to string) error {
	recs, err := m.appRecords(ctx, keepers, car.node, app)
	if err != nil {
		return err
	}
	if err := m.carry(ctx, keepers, car, recs); err != nil {
		return err
	}
	if err := m.step(app, "move", fmt.Sprintf("migrate carrier %d %s → %s", car.vmid, car.node, to), func() error {
		return m.migrate(ctx, app, car.node, car.vmid, to)
	}); err != nil {
		return err
	}
	car.node = to
	return nil
}

// handOverCarried hands every volume the carrier's Notes say it carries
// to a keeper on the target node (step 6), from a fresh read of the
// carrier, and returns those Notes.
func (m *mover) handOverCarried(ctx context.Context, keepers *keeperSet, car *carrierRef, to string) (plan.CarrierNotes, error) {
	conf, err := containerConfig(ctx, m.client, car.node, car.vmid)
	if err != nil {
		return plan.CarrierNotes{}, err
	}
	notes, _ := plan.ParseCarrierNotes(conf["description"])
	held := (&plan.Carrier{VMID: car.vmid, Config: conf, Notes: notes}).Holds()
	vols := map[plan.VolumeKey]string{}
	for vk := range notes.Carrying {
		vols[vk] = held[vk]
	}
	return notes, m.handOver(ctx, keepers, to, vols, car.vmid)
}

// freeMoveCopies frees the stale copies of the carrier car (on the
// move's nodes but its own, where destroyCarrier's
// destroy-unreferenced-disks frees them) and of the app's container ct
// (on the move's nodes but the one it is on).
func (m *mover) freeMoveCopies(ctx context.Context, app string, car *carrierRef, notes plan.CarrierNotes, ct *resource, obs *plan.Observed) error {
	nodes := slices.Compact(slices.Sorted(slices.Values(append([]string{notes.From, notes.To, car.node}, notes.Was...))))
	stale := []staleOf{{car.vmid, slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == car.node })}}
	if ct != nil {
		stale = append(stale, staleOf{ct.VMID, slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == car.node })})
	}
	for _, s := range stale {
		if err := m.freeStaleCopies(ctx, app, s.vmid, s.nodes, obs); err != nil {
			return err
		}
	}
	return nil
}

// dropCarrier frees the stale copies of an empty carrier and destroys it.
func (m *mover) dropCarrier(ctx context.Context, app string, car *carrierRef, obs *plan.Observed) error {
	if err := m.freeMoveCopies(ctx, app, car, car.notes, nil, obs); err != nil {
		return err
	}
	return m.destroyCarrier(ctx, app, car)
}

// carrierRef is a carrier found by moveApp.
type carrierRef struct {
	vmid  int
	node  string
	notes plan.CarrierNotes
}

// findMove finds app's container and its carrier (nil when no move is
// under way), from a fresh list. It reads the configs of the carriers
// tagged for app (plan.TagMovingPrefix) and of those of older corral
// versions, which name no app in their tags; not the others'. A carrier
// that may hold app's volumes but whose move corral cannot finish (its
// Notes edited, or a second carrier holding volumes: plan.GroupCarriers)
// is an error naming it and the fix: its volumes must never be taken for
// gone. leftovers are app's other carriers, empty (a run killed right
// after creating one): moveApp destroys them. planned is the VMID the plan
// recognized as app's container (0: none): one whose app tag was edited
// away is still it (the plan found it by the volumes it mounts, and the
// change checks its digest), and the update after the move puts the tag
// back.
func (m *mover) findMove(ctx context.Context, app string, planned int, res []resource) (ct *resource, car *carrierRef, leftovers []*carrierRef, err error) {
	var cars []*plan.Carrier
	for i, r := range res {
		if r.Type != "lxc" {
			continue
		}
		tags := plan.ParseTags(r.Tags)
		if !slices.Contains(tags, plan.TagManaged) {
			continue
		}
		if slices.Contains(tags, plan.TagCarrier) {
			if of := tagged(tags, plan.TagMovingPrefix); of != "" && of != app {
				continue // another app's
			}
			conf, err := containerConfig(ctx, m.client, r.Node, r.VMID)
			if pve.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, nil, nil, err
			}
			cars = append(cars, plan.ReadCarrier(r.VMID, r.Node, tags, conf))
			continue
		}
		if appOf(tags) == app && !slices.Contains(tags, plan.TagKeeper) {
			ct = &res[i]
		}
	}
	if ct == nil && planned != 0 {
		for i, r := range res {
			if r.Type == "lxc" && r.VMID == planned && appOf(plan.ParseTags(r.Tags)) == "" {
				ct = &res[i]
			}
		}
	}
	moves, left, bad := plan.GroupCarriers(cars)
	for _, c := range bad {
		if slices.Contains(c.Apps(), app) {
			return nil, nil, nil, errors.New(c.Refusal(app))
		}
	}
	if c := moves[app]; c != nil {
		car = &carrierRef{vmid: c.VMID, node: c.Node, notes: c.Notes}
	}
	for _, c := range left {
		if c.Notes.App == app {
			leftovers = append(leftovers, &carrierRef{vmid: c.VMID, node: c.Node, notes: c.Notes})
		}
	}
	return ct, car, leftovers, nil
}

// readyToLeave stops the app's container, deletes its snapshots (with
// consent) and detaches every volume it does not own, so that PVE's
// migration finds only its own volumes, and the keeper's volumes are in
// no other guest's hands when they move.
func (m *mover) readyToLeave(ctx context.Context, c plan.Change, ct *resource) error {
	app, node, vmid := c.App, ct.Node, ct.VMID
	if err := m.ensureStopped(ctx, app, node, vmid); err != nil {
		return err
	}
	snaps, err := m.client.Snapshots(ctx, node, vmid)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range snaps {
		if s.Name != "current" {
			names = append(names, s.Name)
		}
	}
	if len(names) > 0 {
		if c.Desired == nil || !c.Desired.DeleteSnapshots {
			return fmt.Errorf("%s: container %d has snapshots (%s): PVE migrates no container with snapshots on LVM-thin (non-migratable snapshot exists); delete them, or move with --delete-snapshots", app, vmid, strings.Join(names, ", "))
		}
		slices.Reverse(names) // newest first
		for _, name := range names {
			if err := m.step(app, "snapshot", "delete "+name+" (--delete-snapshots)", func() error {
				var upid string
				err := m.locked().Do(ctx, func() (err error) {
					upid, err = m.client.DeleteSnapshot(ctx, node, vmid, name, false)
					return err
				})
				if err != nil {
					return err
				}
				return m.wait(ctx, app, upid)
			}); err != nil {
				return err
			}
		}
	}
	conf, err := containerConfig(ctx, m.client, node, vmid)
	if err != nil {
		return err
	}
	var mps, foreign []string
	for k, v := range conf {
		volid := plan.ParseMountPoint(v).Volume
		if isMP(k) && volid != "" && plan.VolumeOwner(volid) != vmid {
			mps = append(mps, k)
			foreign = append(foreign, volid)
		}
		if isUnused(k) && plan.VolumeOwner(v) != vmid {
			foreign = append(foreign, v)
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	slices.Sort(mps)
	return m.step(app, "detach", "before the move: "+strings.Join(foreign, ","), func() error {
		if len(mps) > 0 {
			if err := m.putConfig(ctx, node, vmid, &pve.ConfigUpdate{Delete: mps}); err != nil {
				return err
			}
		}
		return m.dropReferences(ctx, node, vmid, foreign)
	})
}

// appRecords reads, fresh, the records of app on node's keepers.
func (m *mover) appRecords(ctx context.Context, keepers *keeperSet, node, app string) (map[plan.VolumeKey]string, error) {
	out := map[plan.VolumeKey]string{}
	err := keepers.readEach(ctx, node, func(_ *keeper, cc *pve.ContainerConfig) error {
		for vk, volid := range plan.MountRecords(cc.Values) {
			if vk.App == app {
				out[vk] = volid
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// migrateApp migrates the app's container to node to; moveApp made it
// ready to leave (readyToLeave) first, once per run.
func (m *mover) migrateApp(ctx context.Context, c plan.Change, ct *resource, to string) error {
	return m.step(c.App, "move", fmt.Sprintf("migrate ct %d %s → %s", ct.VMID, ct.Node, to), func() error {
		return m.migrate(ctx, c.App, ct.Node, ct.VMID, to)
	})
}

// staleCopy is phase1_cleanup's line for a copy a failed migration left
// on the target (behaviour.md (i.2)).
var staleCopy = lazyre.New(`found stale volume copy '([^']+)' on node '([^']+)'`)

// migrate migrates a stopped CT and waits. A failed migration leaves the
// copies it made on the target, referenced by nothing: they are freed at
// once, so a retry finds no name taken and nothing is left behind.
func (m *mover) migrate(ctx context.Context, app, node string, vmid int, to string) error {
	var upid string
	err := m.locked().Do(ctx, func() (err error) {
		upid, err = m.client.Migrate(ctx, node, vmid, pve.MigrateOptions{Target: to})
		return err
	})
	if err != nil {
		return err
	}
	_, err = m.waitLog(ctx, app, upid, true)
	var te *pve.TaskError
	if errors.As(err, &te) {
		log := te.Log
		if full, _ := m.client.WaitTask(ctx, upid, pve.WaitOptions{Log: true}); full != nil {
			log = full.Log
		}
		var freed []string
		for _, line := range log {
			if cp := staleCopy.FindStringSubmatch(line); cp != nil && plan.VolumeOwner(cp[1]) == vmid {
				sid, _, _ := strings.Cut(cp[1], ":")
				if dupid, derr := m.client.DeleteVolume(ctx, cp[2], sid, cp[1]); derr == nil {
					if m.wait(ctx, app, dupid) == nil {
						freed = append(freed, cp[1]+" on "+cp[2])
					}
				}
			}
		}
		if len(freed) > 0 {
			return fmt.Errorf("%w (the stale copies it left were freed: %s); run the command again once the cause is fixed", err, strings.Join(freed, ", "))
		}
	}
	return err
}

// staleOf is a guest whose stale copies freeStaleCopies looks for.
type staleOf struct {
	vmid  int
	nodes []string
}

// freeStaleCopies frees the volumes named for vmid (vm-<vmid>-disk-N) on
// nodes that are provably what a failed or killed migration of that
// guest left (behaviour.md (i.2): PVE leaves its copies on the target,
// referenced by nothing, and says so only in the task log, which a
// killed corral never read): on a storage of the node's own (a shared
// one holds the real volumes), on a node where no guest has that VMID
// (a guest's volumes exist before its config names them while it is
// created), while no guest with that VMID is being migrated, and named
// by no guest config on the node. VMIDs are taken under m.creating, so
// none of this run's creates can take vmid meanwhile.
func (m *mover) freeStaleCopies(ctx context.Context, app string, vmid int, nodes []string, obs *plan.Observed) error {
	// A first look, without the lock: nearly always nothing is left.
	found, err := m.staleCandidates(ctx, vmid, nodes, obs)
	if err != nil || len(found) == 0 {
		return err
	}
	m.creating.Lock()
	defer m.creating.Unlock()
	if found, err = m.staleCandidates(ctx, vmid, nodes, obs); err != nil {
		return err
	}
	for _, node := range slices.Sorted(maps.Keys(found)) {
		refs, err := NodeReferences(ctx, m.client, node)
		if err != nil {
			return err
		}
		for _, volid := range found[node] {
			if len(refs[volid]) > 0 {
				continue // someone's: not ours to free
			}
			sid, _, _ := strings.Cut(volid, ":")
			if err := m.step(app, "move", fmt.Sprintf("free %s on %s (a stale copy of a failed migration of %d)", volid, node, vmid), func() error {
				upid, err := m.client.DeleteVolume(ctx, node, sid, volid)
				if err != nil {
					return err
				}
				return m.wait(ctx, app, upid)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// staleCandidates lists, by node, the volumes named for vmid on the
// nodes' own storages, leaving out nodes where a guest has that VMID, and
// everything while a guest with that VMID migrates.
func (m *mover) staleCandidates(ctx context.Context, vmid int, nodes []string, obs *plan.Observed) (map[string][]string, error) {
	found := map[string][]string{}
	for _, node := range nodes {
		if slices.Contains(obs.Offline, node) {
			continue
		}
		for _, sid := range slices.Sorted(maps.Keys(obs.Storages[node])) {
			content := obs.Storages[node][sid]
			if obs.SharedStorages[sid] || !(slices.Contains(content, "images") || slices.Contains(content, "rootdir")) {
				continue
			}
			vols, err := m.client.StorageContent(ctx, node, sid, "", vmid)
			if err != nil {
				return nil, err
			}
			for _, v := range vols {
				if plan.VolumeOwner(v.VolID) == vmid {
					found[node] = append(found[node], v.VolID)
				}
			}
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	res, err := m.client.ClusterResources(ctx, "vm")
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		if r.VMID != vmid {
			continue
		}
		if r.Lock == "migrate" {
			return nil, nil // its migration runs: its copies are not stale yet
		}
		delete(found, r.Node)
	}
	return found, nil
}

// createCarrier creates the carrier on node from: protected, and its
// Notes name the move, in the create request itself.
func (m *mover) createCarrier(ctx context.Context, app, from, to string, c plan.Change, obs *plan.Observed) (*carrierRef, error) {
	tmpl := ""
	if c.Desired != nil && slices.Contains(obs.Templates[from], c.Desired.Template) {
		tmpl = c.Desired.Template
	} else if t := obs.Templates[from]; len(t) > 0 {
		tmpl = t[0]
	}
	if tmpl == "" {
		return nil, fmt.Errorf("no container template on node %s to create the carrier from", from)
	}
	root := "local-lvm"
	if c.Desired != nil && c.Desired.RootStorage != "" {
		root = c.Desired.RootStorage
	}
	notes := plan.CarrierNotes{App: app, From: from, To: to}
	params := holderParams(tmpl, plan.CarrierName, root, plan.TagCarrier, notes.Render())
	// Tagged with its app too, so that findMove reads only this app's
	// carriers.
	params.Config.Tags = []string{plan.TagManaged, plan.TagCarrier, plan.TagMovingPrefix + app}
	vmid, err := m.postCT(ctx, app, from, 0, params, false)
	if err != nil {
		return nil, err
	}
	return &carrierRef{vmid: vmid, node: from, notes: notes}, nil
}

// carrierChange is a compare-and-swap write of the carrier's Notes.
func (m *mover) carrierChange(ctx context.Context, car *carrierRef, what string, edit func(n *plan.CarrierNotes)) error {
	for attempt := 1; ; attempt++ {
		cc, err := m.client.ContainerConfig(ctx, car.node, car.vmid, true)
		if err != nil {
			return fmt.Errorf("carrier %d: %w", car.vmid, err)
		}
		n, ok := plan.ParseCarrierNotes(cc.Values["description"])
		if !ok {
			return fmt.Errorf("carrier %d: its Notes no longer name the move (edited outside corral)", car.vmid)
		}
		edit(&n)
		d := n.Render()
		if d == cc.Values["description"] {
			car.notes = n
			return nil
		}
		err = m.putConfig(ctx, car.node, car.vmid, &pve.ConfigUpdate{Description: &d, Digest: cc.Digest})
		if pve.IsModified(err) && attempt < maxCASAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("carrier %d: %s: %w", car.vmid, what, err)
		}
		car.notes = n
		return nil
	}
}

// carry hands the volumes recs (key → volid, each recorded by a keeper
// on the carrier's node) to the carrier: one write of the carrier's Notes
// with a carrying line for each first, then per volume move_volume from
// the keeper's mpN to the carrier's unusedN (the keepers' Notes follow at
// the end of the run: keeperSet.refreshNotes). A
// line written by an earlier, killed attempt is reused when its entry is
// still free.
func (m *mover) carry(ctx context.Context, keepers *keeperSet, car *carrierRef, recs map[plan.VolumeKey]string) error {
	if len(recs) == 0 {
		return nil
	}
	vks := sortedVolumeKeys(recs)
	byVol := map[plan.VolumeKey]*keeper{}
	var names []string
	for _, vk := range vks {
		volid := recs[vk]
		k := keepers.byVMID(car.node, plan.VolumeOwner(volid))
		if k == nil {
			return fmt.Errorf("volume %s (%s): no keeper %d on %s", vk, volid, plan.VolumeOwner(volid), car.node)
		}
		byVol[vk] = k
		names = append(names, vk.Name)
	}
	app := vks[0].App
	return m.step(app, "move", fmt.Sprintf("volumes %s: keeper → carrier %d", strings.Join(names, ", "), car.vmid), func() error {
		// No turn on the keeper: handing a volume away needs no change
		// of its protection (PVE checks it only on the receiving side),
		// and its config changes are serialised by PVE; the Notes are
		// written with a compare-and-swap.
		targets, err := m.noteCarrying(ctx, car, vks, recs, names)
		if err != nil {
			return err
		}
		for _, vk := range vks {
			if err := m.moveOut(ctx, byVol[vk], car, vk, recs[vk], targets[vk]); err != nil {
				return err
			}
		}
		return nil
	})
}

// noteCarrying picks the carrier's unusedN entry for each volume of vks
// and writes a carrying line for those the Notes do not name yet, before
// any moves: the intent is on record first. A line of an earlier, killed
// attempt keeps its entry while that is still free.
func (m *mover) noteCarrying(ctx context.Context, car *carrierRef, vks []plan.VolumeKey, recs map[plan.VolumeKey]string, names []string) (map[plan.VolumeKey]string, error) {
	cc, err := m.client.ContainerConfig(ctx, car.node, car.vmid, true)
	if err != nil {
		return nil, err
	}
	targets := map[plan.VolumeKey]string{}
	taken := maps.Clone(cc.Values)
	for _, in := range car.notes.Carrying {
		taken[in.Key] = "x"
	}
	var fresh []plan.VolumeKey
	for _, vk := range vks {
		if in, ok := car.notes.Carrying[vk]; ok && cc.Values[in.Key] == "" {
			targets[vk] = in.Key
			continue
		}
		targets[vk] = freeKey(taken, "unused")
		taken[targets[vk]] = recs[vk]
		fresh = append(fresh, vk)
	}
	if len(fresh) > 0 {
		if err := m.carrierChange(ctx, car, "note "+strings.Join(names, ", "), func(n *plan.CarrierNotes) {
			for _, vk := range fresh {
				n.Carrying[vk] = plan.AdoptIntent{Source: recs[vk], Key: targets[vk]}
			}
		}); err != nil {
			return nil, err
		}
	}
	return targets, nil
}

// moveOut moves volume vk (volid) out of keeper k into the carrier's
// entry target, in its turn among the keeper's move_volume tasks
// (keeper.takeOut).
func (m *mover) moveOut(ctx context.Context, k *keeper, car *carrierRef, vk plan.VolumeKey, volid, target string) error {
	done, err := k.takeOut(ctx)
	if err != nil {
		return err
	}
	defer done()
	// Read the keeper when its turn comes, not before the wait:
	// move_volume names a mount point, and an edit meanwhile (the
	// web UI) may have put another volume there.
	kc, err := k.read(ctx)
	if err != nil {
		return err
	}
	srcKey := plan.MountKey(kc.Values, vk)
	if srcKey == "" || plan.ParseMountPoint(kc.Values[srcKey]).Volume != volid {
		return fmt.Errorf("keeper %d no longer records %s as %s", k.vmid, vk, volid)
	}
	var upid string
	err = m.locked().Do(ctx, func() (err error) {
		upid, err = m.client.MoveVolume(ctx, car.node, k.vmid, &pve.VolumeMove{
			Volume: srcKey, TargetVMID: car.vmid, TargetVolume: target,
		})
		return err
	})
	if err == nil {
		// The keeper's Notes follow its mount points again at the
		// end of the run (keeperSet.refreshNotes), also when a
		// later move of this carry fails.
		k.smu.Lock()
		k.notesStale = true
		k.smu.Unlock()
		err = m.wait(ctx, vk.App, upid)
	}
	if err != nil {
		return fmt.Errorf("move %s to carrier %d: %w", volid, car.vmid, err)
	}
	return nil
}

// handOver gives the volumes the carrier holds (vols: key → volid, ""
// when an earlier, killed run already moved it) to keepers on node and
// records them there: one keeper turn for all of them (one protection
// window), each with its adoption intent, its move_volume and its record.
func (m *mover) handOver(ctx context.Context, keepers *keeperSet, node string, vols map[plan.VolumeKey]string, carrier int) error {
	todo := maps.Clone(vols)
	if err := m.recordMoved(ctx, keepers, node, todo); err != nil {
		return err
	}
	if len(todo) == 0 {
		return nil
	}
	for _, vk := range sortedVolumeKeys(todo) {
		if todo[vk] == "" {
			return fmt.Errorf("volume %s: neither carrier %d nor a keeper on %s holds it; run corral again (a task may still be running), or see docs/moving.md", vk, carrier, node)
		}
	}
	// Group by the keeper that has room for each.
	byKeeper := map[*keeper][]plan.VolumeKey{}
	var order []*keeper
	for _, vk := range sortedVolumeKeys(todo) {
		sid, _, _ := strings.Cut(todo[vk], ":")
		k, done, err := keepers.forNew(ctx, node, vk, sid)
		if err != nil {
			return err
		}
		defer done()
		if byKeeper[k] == nil {
			order = append(order, k)
		}
		byKeeper[k] = append(byKeeper[k], vk)
	}
	srcKeys, err := m.unusedKeys(ctx, node, carrier)
	if err != nil {
		return err
	}
	for _, k := range order {
		vks := byKeeper[k]
		var names []string
		r := &takeReq{owner: carrier}
		for _, vk := range vks {
			names = append(names, vk.Name)
			if srcKeys[todo[vk]] == "" {
				return fmt.Errorf("CT %d does not hold %s as an unusedN entry", carrier, todo[vk])
			}
			r.vols = append(r.vols, takeVol{vk: vk, volid: todo[vk], srcKey: srcKeys[todo[vk]]})
		}
		app := vks[0].App
		if err := m.step(app, "move", fmt.Sprintf("volumes %s: carrier %d → keeper %d on %s", strings.Join(names, ", "), carrier, k.vmid, node), func() error {
			return k.takeBatched(ctx, r)
		}); err != nil {
			return err
		}
	}
	return nil
}

// recordMoved deletes from todo the volumes a keeper on node already
// records, and records those moved into a keeper that noted the adoption
// (a run killed between the move and the record).
func (m *mover) recordMoved(ctx context.Context, keepers *keeperSet, node string, todo map[plan.VolumeKey]string) error {
	return keepers.readEach(ctx, node, func(k *keeper, cc *pve.ContainerConfig) error {
		s := newKeeperState(cc.Values)
		k.remember(s)
		recs := plan.MountRecords(cc.Values)
		for _, vk := range sortedVolumeKeys(todo) {
			if recs[vk] != "" {
				delete(todo, vk)
				continue
			}
			if in, ok := s.notes.Intents[vk]; ok && todo[vk] == "" {
				if moved := cc.Values[in.Key]; moved != "" && plan.VolumeOwner(moved) == k.vmid {
					if err := m.step(vk.App, "move", "volume "+vk.Name+": record in keeper "+strconv.Itoa(k.vmid), func() error {
						return k.unprotected(ctx, func() error { return k.mount(ctx, vk, moved) })
					}); err != nil {
						return err
					}
					delete(todo, vk)
				}
			}
		}
		return nil
	})
}

// unusedKeys is where CT carrier on node holds each volume (volid →
// unusedN), read once: only this move changes it.
func (m *mover) unusedKeys(ctx context.Context, node string, carrier int) (map[string]string, error) {
	conf, err := containerConfig(ctx, m.client, node, carrier)
	if err != nil {
		return nil, err
	}
	srcKeys := map[string]string{}
	for key, v := range conf {
		if isUnused(key) {
			srcKeys[v] = key
		}
	}
	return srcKeys, nil
}

// destroyCarrier destroys the carrier once it holds nothing but its
// rootfs. destroy-unreferenced-disks frees any copy of a failed
// migration still named for it on its node.
func (m *mover) destroyCarrier(ctx context.Context, app string, car *carrierRef) error {
	conf, err := containerConfig(ctx, m.client, car.node, car.vmid)
	if pve.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for k, v := range conf {
		if isMP(k) || isUnused(k) {
			return fmt.Errorf("carrier %d still holds %s (%s); not destroyed", car.vmid, v, k)
		}
	}
	if conf["protection"] == "1" {
		if err := m.putConfig(ctx, car.node, car.vmid, &pve.ConfigUpdate{Protection: pve.Ptr(false)}); err != nil {
			return err
		}
	}
	yes := true
	var upid string
	err = m.locked().Do(ctx, func() (err error) {
		upid, err = m.client.DestroyContainer(ctx, car.node, car.vmid, pve.DestroyOptions{Purge: true, DestroyUnreferencedDisks: &yes})
		return err
	})
	if pve.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return m.wait(ctx, app, upid)
}

// verifyMove checks the end of a move from the API: every moved volume is
// recorded by a keeper on node and exists there (with the size it had,
// when known), and no copy named for the carrier is left on node.
func (m *mover) verifyMove(ctx context.Context, keepers *keeperSet, app, node string, vks []plan.VolumeKey, sizes map[plan.VolumeKey]int64, carrier int) error {
	recs, err := m.appRecords(ctx, keepers, node, app)
	if err != nil {
		return err
	}
	var problems []string
	storages := map[string]bool{}
	for _, vk := range vks {
		volid := recs[vk]
		if volid == "" {
			problems = append(problems, fmt.Sprintf("volume %s is not recorded on %s", vk, node))
			continue
		}
		sid, _, _ := strings.Cut(volid, ":")
		storages[sid] = true
		vols, err := m.client.StorageContent(ctx, node, sid, "", plan.VolumeOwner(volid))
		if err != nil {
			return err
		}
		found := false
		for _, v := range vols {
			if v.VolID == volid {
				found = true
				if want := sizes[vk]; want > 0 && v.Size != want {
					problems = append(problems, fmt.Sprintf("volume %s (%s) is %d bytes on %s, it was %d", vk, volid, v.Size, node, want))
				}
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("volume %s (%s) does not exist on %s", vk, volid, node))
		}
	}
	// Stale copies can only be on the node the carrier migrated to (a
	// successful migration frees the source's; a failed one leaves its
	// copies on the target). The carrier's VMID is free again and may
	// already be another move's carrier (parallel moves; /cluster/nextid
	// gives the lowest free id), even one being created, whose volumes
	// exist before its config names them: a node where a guest has that
	// VMID is that guest's business (PVE: a new guest adopts them).
	res, err := m.client.ClusterResources(ctx, "vm")
	if err != nil {
		return err
	}
	taken := false
	for _, r := range res {
		taken = taken || (r.VMID == carrier && r.Node == node)
	}
	for sid := range storages {
		if taken {
			break
		}
		vols, err := m.client.StorageContent(ctx, node, sid, "", carrier)
		if err != nil {
			return err
		}
		for _, v := range vols {
			if plan.VolumeOwner(v.VolID) == carrier {
				problems = append(problems, fmt.Sprintf("stale copy %s left on %s", v.VolID, node))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("after the move: %s", strings.Join(problems, "; "))
	}
	return nil
}

// afterMove turns a finished move into the update that follows it on
// the target node: the moved volumes are attached under their new volids
// (a keeper adoption renames them), the container is started.
func (m *mover) afterMove(ctx context.Context, c plan.Change, keepers *keeperSet, obs *plan.Observed) (plan.Change, error) {
	recs, err := m.appRecords(ctx, keepers, c.Node, c.App)
	if err != nil {
		return c, err
	}
	if c.VMID == 0 {
		res, err := m.client.ClusterResources(ctx, "vm")
		if err != nil {
			return c, err
		}
		ct, _, _, err := m.findMove(ctx, c.App, 0, res)
		if err != nil {
			return c, err
		}
		if ct == nil {
			return c, fmt.Errorf("%s: its volumes are on %s, but its container is gone; run corral apply to create it there", c.App, c.Node)
		}
		c.VMID = ct.VMID
	}
	c.Action, c.From, c.Digest, c.OldVMID = plan.Update, "", "", c.VMID
	c.Start, c.Restart = true, false
	var vols []plan.VolumeChange
	for _, v := range c.Volumes {
		if v.Action == plan.VolDetach {
			continue
		}
		if v.Action == plan.VolMove {
			volid := recs[plan.VolumeKey{App: c.App, Name: v.Name}]
			if volid == "" {
				return c, fmt.Errorf("%s: volume %s is not recorded on %s after the move", c.App, v.Name, c.Node)
			}
			v.VolID, v.Key, v.Action = volid, "", plan.VolAttach
			if v.Size > v.OldSize && v.OldSize > 0 {
				v.Action = plan.VolGrow
			}
			if v.Mount == "" && c.Desired != nil { // an interrupted move's plan names only the volume
				for _, dv := range c.Desired.Volumes {
					if dv.Name == v.Name {
						v.Mount, v.Backup = dv.Mount, dv.Backup
					}
				}
			}
		}
		vols = append(vols, v)
	}
	c.Volumes = vols
	return c, m.moveTags(ctx, &c, obs)
}

// moveTags sets the tags edit of a moved app: its tags, with those that
// record its shared volumes (plan.VolumeTag) naming the volids the move
// gave them, and the corral-recovered mark kept.
func (m *mover) moveTags(ctx context.Context, c *plan.Change, obs *plan.Observed) error {
	if c.Desired == nil {
		return nil
	}
	conf, err := containerConfig(ctx, m.client, c.Node, c.VMID)
	if err != nil {
		return err
	}
	want := plan.AppTags(*c.Desired)
	for _, v := range c.Volumes {
		if v.VolID != "" && obs != nil && obs.OnShared(v.VolID) {
			if t := plan.VolumeTag(v.Name, v.VolID); t != "" {
				want = append(want, t)
			}
		}
	}
	for _, t := range plan.ParseTags(conf["tags"]) {
		if strings.HasPrefix(t, plan.TagRecoveredPrefix) {
			want = append(want, t)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	have := plan.ParseTags(conf["tags"])
	slices.Sort(have)
	c.Config = slices.DeleteFunc(c.Config, func(ed plan.ConfigEdit) bool { return ed.Key == "tags" })
	if !slices.Equal(want, have) {
		c.Config = append(c.Config, plan.ConfigEdit{Key: "tags", Old: conf["tags"], New: strings.Join(want, ";")})
	}
	return nil
}
