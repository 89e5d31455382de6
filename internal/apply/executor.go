package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/ui/human"
)

// Executor carries out plans against one cluster.
type Executor struct {
	Client   *pve.Client
	Observer Observer
	// Secrets holds values sent to PVE that must never be logged (root
	// passwords); they travel only in request bodies.
	Secrets map[string]string // app → password
	// LockWait bounds how long a step waits for a CT lock held by another
	// operation (a create still running after an interrupted apply).
	LockWait time.Duration
	// Guest is the work inside each app's container (by app name), and SSH
	// how corral logs in to do it.
	Guest map[string]GuestWork
	SSH   SSH
	// Parallelism bounds how many apps change at once (0: 10, as
	// Terraform's default); 1 changes them one after another. Keepers are
	// repaired or created first, one at a time.
	Parallelism int
	// FailFast starts no further app change once one failed (the ones
	// under way finish); by default the others go on.
	FailFast bool
	// Project is the manifest's project, noted in the keeper beside the
	// records of the volumes corral creates or adopts for its apps
	// ("corral-project: app=project"), so that the volumes stay this
	// project's after the app's container is gone. Apply takes it from
	// the plan's apps when it is ""; "" then notes nothing.
	Project string
	// Declared is the plan.OriginID of the manifest, noted in the keeper
	// beside Project ("corral-declared: app=ID"); taken from the plan's
	// apps when "".
	Declared string
	// Stop, once closed (the first Ctrl-C), lets the steps under way
	// finish and starts no new one: the run ends with ErrStopped at a step
	// boundary, where every run is safe to stop. Cancelling the context
	// (the second Ctrl-C) aborts the steps under way instead.
	Stop <-chan struct{}

	state runState // what its parts share (runner.go)
}

// Timings are the phase durations of the last Apply or Destroy.
func (e *Executor) Timings() []Timing {
	e.state.mu.Lock()
	defer e.state.mu.Unlock()
	return slices.Clone(e.state.timings)
}

// forEachApp runs fn for each change, up to Parallelism at once, and
// returns the failures joined in the changes' order.
func (e *Executor) forEachApp(ctx context.Context, changes []plan.Change, fn func(plan.Change) error) error {
	n := e.Parallelism
	if n <= 0 {
		n = 10
	}
	errs := make([]error, len(changes))
	// dones[i] is closed when changes[i] is finished; done is an app's
	// last change's, which the changes that read its facts wait for.
	dones := make([]*appDone, len(changes))
	done := map[string]*appDone{}
	for i, c := range changes {
		dones[i] = &appDone{ch: make(chan struct{})}
		done[c.App] = dones[i]
	}
	sem := make(chan struct{}, n)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for i, c := range changes {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			break
		}
		if (e.FailFast && failed.Load()) || e.ops().stopped() {
			break
		}
		sem <- struct{}{}
		if e.FailFast && failed.Load() {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// The apps whose facts c's guest work reads are ordered
			// first (factOrdered), so they hold their slots already.
			err := afterDeps(ctx, c, done)
			if err == nil {
				err = fn(c)
			}
			if err != nil {
				errs[i] = err
				failed.Store(true)
			}
			dones[i].err = err
			close(dones[i].ch)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ErrStopped is a run stopped on request between two steps.
var ErrStopped = errors.New("stopped on request between two steps (every change so far is complete); run the command again to go on")

// Apply executes p: keepers first, then the app changes, up to
// Parallelism at once. What must not overlap is ordered where it is
// shared: a keeper's volume operations take turns (keeper.mu), VMIDs are
// taken one at a time, and no other corral runs (the lock).
func (e *Executor) Apply(ctx context.Context, p *plan.Plan, obs *plan.Observed) error {
	e.state.mu.Lock()
	e.state.timings = nil
	e.state.mu.Unlock()
	for _, c := range p.Changes {
		if e.Project == "" && c.Desired != nil {
			e.Project = c.Desired.Project
		}
		if e.Declared == "" && c.Desired != nil && c.Desired.Origin != "" {
			e.Declared = plan.OriginID(c.Desired.Origin)
		}
	}
	// Stale copies of recovered apps first, one by one: until one is gone
	// it may be started (onboot) and mount the volumes its app uses.
	for _, c := range p.Changes {
		if c.Stale && c.Action == plan.Delete {
			if err := e.applyChange(ctx, c, nil, obs); err != nil {
				return err
			}
		}
	}
	ko := e.keeperOps()
	keepers := ko.keeperSet(obs)
	// Repairs first, one by one (re-protecting a keeper comes before any
	// volume work); new keepers are created while the apps' changes run:
	// a change waits for those of a node only when it needs a keeper
	// there with room (keeperSet.forNew). A drain onto two nodes planned
	// ten keepers, and their creates one after another held every move
	// back for two minutes.
	for _, kc := range p.Keepers {
		if kc.Action == plan.Create {
			continue
		}
		if _, err := ko.ensureKeeper(ctx, kc, keepers.byVMID(kc.Node, kc.VMID), p, obs); err != nil {
			return err
		}
	}
	created, err := ko.createKeepers(ctx, p, obs, keepers)
	if err != nil {
		return err
	}
	var changes []plan.Change
	for _, c := range p.Changes {
		if c.Action != plan.NoOp && !c.Stale {
			changes = append(changes, c)
		}
	}
	changes = interleaveMoves(changes)
	if dependsOnFacts(changes) {
		changes = factOrdered(changes)
	}
	e.state.observed = obs
	err = e.forEachApp(ctx, changes, func(c plan.Change) error { return e.applyChange(ctx, c, keepers, obs) })
	// A keeper's failure first: the changes that needed it say so.
	return errors.Join(created(), err, keepers.refreshNotes(ctx))
}

// interleaveMoves orders the moves among changes so that consecutive ones
// take their volumes out of different keepers, round robin: the
// move_volume tasks out of one keeper run one at a time, so a drain
// whose first apps all hold their volumes in the same keeper (the apps
// created first fill the first keeper) would keep that keeper busy and
// the node's others idle, then the other way round. Other changes keep
// their place before the moves; the plan's order is kept within a keeper.
func interleaveMoves(changes []plan.Change) []plan.Change {
	var out []plan.Change
	groups := map[string][]plan.Change{}
	var order []string
	for _, c := range changes {
		if c.Action != plan.Move {
			out = append(out, c)
			continue
		}
		key := c.From
		for _, v := range c.Volumes {
			if v.Action == plan.VolMove && v.VolID != "" {
				key = c.From + "/" + strconv.Itoa(plan.VolumeOwner(v.VolID))
				break
			}
		}
		if groups[key] == nil {
			order = append(order, key)
		}
		groups[key] = append(groups[key], c)
	}
	for left := true; left; {
		left = false
		for _, key := range order {
			if g := groups[key]; len(g) > 0 {
				out = append(out, g[0])
				groups[key] = g[1:]
				left = true
			}
		}
	}
	return out
}

// applyChange carries out one app's change.
func (e *Executor) applyChange(ctx context.Context, c plan.Change, keepers *keeperSet, obs *plan.Observed) error {
	if c.Kind == plan.KindVM {
		return e.applyVM(ctx, c, obs) // vm.go
	}
	r := e.ops()
	conf, err := e.checkPlannedConf(ctx, c)
	if err != nil {
		return err
	}
	if c.Action == plan.Delete {
		// An app removed from the manifest: destroyed as corral destroy
		// does, its volumes detached and kept in the keeper.
		return r.destroyCTFrom(ctx, c.App, c.Node, c.OldVMID, conf)
	}
	if c.Action == plan.Move {
		// The container and its volumes go to the target node first
		// (move.go); the rest is an update there.
		m := &mover{e.ops()}
		if err := m.moveApp(ctx, c, keepers, obs); err != nil {
			return err
		}
		var err error
		if c, err = m.afterMove(ctx, c, keepers, obs); err != nil {
			return err
		}
	}
	a := c.Desired
	if c.FetchTemplate {
		if err := r.step(c.App, "template", a.Template, func() error { return r.fetchTemplate(ctx, c.App, c.Node, a.Template) }); err != nil {
			return err
		}
	}
	if c.Recover != nil {
		// The container it stands in for cannot be read while its node
		// is down; the plan knows it references the volumes.
		ctx = skipOfflineNode(ctx, c.Recover.Node)
	}
	if c.Action == plan.Create && c.Recover == nil && keepers.creating(c.Node) {
		return e.createBesideKeeper(ctx, c, keepers, obs)
	}
	// Volumes first: a failure here changes no container.
	vols, err := e.prepareVolumes(ctx, c, keepers)
	if err != nil {
		return err
	}
	// Before the container changes at all: no volume it is to get may be
	// in another guest's hands (attach checks again right before each PUT).
	if err := r.guardAttach(ctx, c.Node, attachTarget(c), vols); err != nil {
		return fmt.Errorf("%s: %w", c.App, err)
	}
	switch c.Action {
	case plan.Create, plan.Replace:
		if c.Action == plan.Replace {
			if err := r.destroyCT(ctx, c.App, c.Node, c.OldVMID); err != nil {
				return err
			}
			c.VMID = c.Desired.VMID
		}
		vmid, err := e.createAndStart(ctx, c, vols, obs)
		if err := e.afterCreate(ctx, c, vmid, err); err != nil {
			return err
		}
		return e.applyHA(ctx, c, vmid, obs)
	case plan.Update:
		r.placed(c.App, c.Node, c.VMID)
		if c.HA != nil && c.HA.Want == nil {
			// Out of HA first: what follows (a start) is corral's.
			if err := e.applyHA(ctx, c, c.VMID, obs); err != nil {
				return err
			}
			c.HA = nil
		}
		if err := e.updateApp(ctx, c, vols, obs); err != nil {
			return err
		}
		return e.applyHA(ctx, c, c.VMID, obs)
	}
	return nil
}

// attachTarget is the container change c's volumes go to: its own for an
// update, the old one for a replace (destroyed before the new one gets
// them), none yet (0) for a create.
func attachTarget(c plan.Change) int {
	switch c.Action {
	case plan.Update:
		return c.VMID
	case plan.Replace:
		return c.OldVMID
	}
	return 0
}

// updateApp changes the app's container in place and runs its guest
// work; with snapshotBeforeChange the whole of it is protected: a
// snapshot (or backup) first, rolled back to if it fails.
func (e *Executor) updateApp(ctx context.Context, c plan.Change, vols []attachment, obs *plan.Observed) error {
	change := func() error {
		if err := e.update(ctx, c, vols, obs); err != nil {
			return err
		}
		// A protected change is judged by the health checks even when
		// the guest work itself did not change.
		if c.Guest || (c.Desired.SnapshotBeforeChange && len(e.Guest[c.App].Checks) > 0) {
			return e.guests().runGuest(ctx, c, c.VMID, false)
		}
		return nil
	}
	if c.Desired != nil && c.Desired.SnapshotBeforeChange {
		return e.Snapshots().protected(ctx, c, obs, change)
	}
	return change()
}

// editConfig sends the change's config edits and stale references to
// drop in one PUT, as a "config" step.
func (r *runner) editConfig(ctx context.Context, c plan.Change) error {
	node, vmid := c.Node, c.VMID
	if len(c.Config) > 0 || len(c.Cleanup) > 0 {
		params := &pve.ConfigUpdate{Raw: map[string]string{}}
		var keys []string
		for _, ed := range c.Config {
			keys = append(keys, ed.Key)
			if ed.New == "" {
				if ed.Old != "" {
					params.Delete = append(params.Delete, ed.Key)
				}
				continue
			}
			params.Raw[ed.Key] = ed.New // rendered by the planner
		}
		params.Delete = append(params.Delete, c.Cleanup...)
		if !params.IsZero() {
			if err := r.step(c.App, "config", strings.Join(append(keys, c.Cleanup...), ","), func() error {
				return r.putConfig(ctx, node, vmid, params)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// PlanStaleError says a container's config changed between the plan and
// the moment apply was to change it: nothing of the app was changed.
type PlanStaleError struct {
	App    string
	VMID   int
	Reason string
}

func (e *PlanStaleError) Error() string {
	return fmt.Sprintf("%s: container %d %s since it was planned; nothing of app %s was changed: run the command again to plan against what it is now",
		e.App, e.VMID, e.Reason, e.App)
}

// checkPlanned is the change's precondition, on a fresh read right before
// its first write: the container it was planned against is still there
// with the same config (digest). A change made meanwhile (the web UI,
// another tool) stops this app, never acts on what was read before.
func (e *Executor) checkPlanned(ctx context.Context, c plan.Change) error {
	_, err := e.checkPlannedConf(ctx, c)
	return err
}

// checkPlannedConf is checkPlanned, returning the container's current
// config it read (nil when it read none: the change has no container
// or no digest to check), so that what comes next with nothing written
// between (destroyCTFrom) need not read it again (issue 30).
func (e *Executor) checkPlannedConf(ctx context.Context, c plan.Change) (map[string]string, error) {
	if c.OldVMID == 0 || c.Digest == "" {
		return nil, nil
	}
	node := c.Node
	if c.Action == plan.Move {
		node = c.From
	}
	conf, _, digest, err := readCT(ctx, e.Client, node, c.OldVMID)
	switch {
	case pve.IsNotFound(err):
		return nil, &PlanStaleError{App: c.App, VMID: c.OldVMID, Reason: "was removed"}
	case err != nil:
		return nil, err
	case digest != c.Digest:
		return nil, &PlanStaleError{App: c.App, VMID: c.OldVMID, Reason: "was changed (its config digest differs)"}
	}
	return conf, nil
}

// attachment is a volume's change from the plan, ready to be attached
// to the workload: VolID is its final volid, and Action is VolKeep
// (attached as wanted) or what attach does.
type attachment struct {
	plan.VolumeChange
	fresh bool // created by this run
}

// prepareVolumes creates, adopts and grows volumes in the keeper, and
// returns every volume the app should have with its final volid.
func (e *Executor) prepareVolumes(ctx context.Context, c plan.Change, keepers *keeperSet) ([]attachment, error) {
	r := e.ops()
	var out []attachment
	for _, v := range c.Volumes {
		if v.Action == plan.VolDetach || v.Action == plan.VolFree {
			continue
		}
		key := plan.VolumeKey{App: c.App, Name: v.Name}
		volid := v.VolID
		var err error
		switch v.Action {
		case plan.VolCreate:
			err = r.step(c.App, "volume", "create "+v.Name+" ("+human.Size(v.Size)+" on "+v.Storage+")", func() error {
				k, done, err := keepers.forNew(ctx, c.Node, key, v.Storage)
				if err != nil {
					return err
				}
				defer done()
				volid, err = k.createVolume(ctx, key, v.Storage, v.Size)
				return err
			})
		case plan.VolAdopt:
			err = r.step(c.App, "volume", "adopt "+v.Adopt+" as "+v.Name, func() error {
				k := keepers.byVMID(c.Node, plan.VolumeOwner(v.Adopt)) // finishing an interrupted adoption
				if k == nil {
					var done func()
					if k, done, err = keepers.forNew(ctx, c.Node, key, v.Storage); err != nil {
						return err
					}
					defer done()
				}
				volid, err = k.adopt(ctx, key, v.Adopt)
				return err
			})
		case plan.VolGrow:
			err = r.step(c.App, "volume", "grow "+v.Name+" to "+human.Size(v.Size), func() error {
				k := keepers.holder(c.Node, key)
				if k == nil {
					return fmt.Errorf("no keeper on %s records volume %s", c.Node, key)
				}
				return k.grow(ctx, key, volid, v.Size)
			})
		}
		if err != nil {
			return nil, err
		}
		act := v.Action
		if act == plan.VolGrow && v.Key != "" {
			act = plan.VolKeep
		} else if act == plan.VolGrow {
			act = plan.VolAttach
		}
		att := attachment{VolumeChange: v, fresh: v.Action == plan.VolCreate}
		att.VolID, att.Action = volid, act
		out = append(out, att)
	}
	return out, nil
}

// createAndStart creates the CT, attaches the volumes while it is stopped
// and starts it.
func (e *Executor) createAndStart(ctx context.Context, c plan.Change, vols []attachment, obs *plan.Observed) (int, error) {
	vmid, err := e.createStep(ctx, c)
	if err != nil {
		return 0, err
	}
	return vmid, e.attachAndStart(ctx, c, vmid, vols, obs)
}

// createStep creates the app's CT, stopped and without volumes, as a
// "create" step.
func (e *Executor) createStep(ctx context.Context, c plan.Change) (int, error) {
	vmid := c.VMID
	err := e.ops().step(c.App, "create", "ct on "+c.Node, func() error {
		var err error
		vmid, err = e.create(ctx, c.App, c.Node, vmid, c.Desired)
		return err
	})
	return vmid, err
}

// attachAndStart attaches the volumes to the new, stopped CT vmid and
// starts it.
func (e *Executor) attachAndStart(ctx context.Context, c plan.Change, vmid int, vols []attachment, obs *plan.Observed) error {
	r := e.ops()
	if err := r.attach(ctx, c.App, c.Node, vmid, vols, nil); err != nil {
		return err
	}
	if err := e.tagSharedVolumes(ctx, c, vmid, vols, obs); err != nil {
		return err
	}
	// The firewall is in place before the container first starts.
	if err := r.applyPoolAndFirewall(ctx, c, vmid); err != nil {
		return err
	}
	return r.step(c.App, "start", "ct "+strconv.Itoa(vmid), func() error { return r.start(ctx, c.App, c.Node, vmid) })
}

// afterCreate runs a created app's guest work, unless its create (err)
// failed or it has none.
func (e *Executor) afterCreate(ctx context.Context, c plan.Change, vmid int, err error) error {
	if err != nil {
		return err
	}
	// Where the app now runs, for the facts of apps that wait for it.
	e.ops().placed(c.App, c.Node, vmid)
	if !c.Guest {
		return nil
	}
	return e.guests().runGuest(ctx, c, vmid, true)
}

// create posts a new CT for app and waits for the task.
func (e *Executor) create(ctx context.Context, app, node string, vmid int, a *plan.App) (int, error) {
	params := createParams(a, vmid)
	if k := e.SSH.AuthorizedKey; k != "" {
		// corral's own key, for provisioning over SSH.
		params.SSHPublicKeys += k + " corral\n"
	}
	params.Password = e.Secrets[app]
	// The create task logs the container's new SSH host keys: read them
	// when corral will log in, so the first login trusts only those.
	work := e.Guest[app]
	return e.ops().postCT(ctx, app, node, vmid, params, len(work.Steps) > 0 || len(work.Checks) > 0)
}

// createParams are the POST /lxc parameters for a (volumes are attached
// afterwards, while the CT is stopped).
func createParams(a *plan.App, vmid int) *pve.ContainerCreate {
	conf := plan.InPlaceConfig(*a)
	v := &pve.ContainerCreate{
		VMID:         vmid,
		OSTemplate:   a.Template,
		RootFS:       pve.MountPoint{Volume: a.RootStorage + ":" + plan.GiB(a.RootSize)},
		Unprivileged: pve.Ptr(a.Unprivileged),
		Config:       pve.ConfigUpdate{Raw: map[string]string{}},
	}
	// The planner renders these values; the create sends them as they are
	// compared later (plan.InPlaceConfig).
	for _, key := range []string{"hostname", "cores", "memory", "swap", "onboot", "tags", "description", "net0", "features", "nameserver"} {
		if conf[key] != "" {
			v.Config.Raw[key] = conf[key]
		}
	}
	if len(a.SSHKeys) > 0 {
		v.SSHPublicKeys = strings.Join(a.SSHKeys, "\n") + "\n"
	}
	return v
}

func isMP(k string) bool { return isIndexed(k, "mp") }

func isUnused(k string) bool { return isIndexed(k, "unused") }

func isIndexed(k, prefix string) bool {
	rest, ok := strings.CutPrefix(k, prefix)
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// update applies in-place changes, stopping the CT only when the change
// needs it.
func (e *Executor) update(ctx context.Context, c plan.Change, vols []attachment, obs *plan.Observed) error {
	r := e.ops()
	node, vmid := c.Node, c.VMID
	if c.Restart {
		if err := r.ensureStopped(ctx, c.App, node, vmid); err != nil {
			return err
		}
	}
	if len(c.Revert) > 0 {
		if err := r.step(c.App, "config", "revert pending "+strings.Join(c.Revert, ","), func() error {
			return r.putConfig(ctx, node, vmid, &pve.ConfigUpdate{Revert: c.Revert})
		}); err != nil {
			return err
		}
	}
	if err := r.editConfig(ctx, c); err != nil {
		return err
	}
	if err := r.applyPoolAndFirewall(ctx, c, vmid); err != nil {
		return err
	}
	if c.RootGrow > 0 {
		if err := r.step(c.App, "resize", "rootfs to "+human.Size(c.RootGrow), func() error {
			return r.resize(ctx, c.App, node, vmid, "rootfs", c.RootGrow)
		}); err != nil {
			return err
		}
	}
	var detach, detached []string
	for _, v := range c.Volumes {
		if v.Action == plan.VolDetach && v.Key != "" {
			detach = append(detach, v.Key)
			detached = append(detached, v.VolID)
		}
	}
	if len(detach) > 0 {
		if err := r.step(c.App, "detach", strings.Join(detach, ","), func() error {
			if err := r.putConfig(ctx, node, vmid, &pve.ConfigUpdate{Delete: detach}); err != nil {
				return err
			}
			// PVE keeps a detached volume as unusedN of the container;
			// the keeper owns it, so dropping that reference frees
			// nothing, and one apply leaves nothing for the next.
			return r.dropReferences(ctx, node, vmid, detached)
		}); err != nil {
			return err
		}
	}
	conf, err := containerConfig(ctx, e.Client, node, vmid)
	if err != nil {
		return err
	}
	if err := r.attach(ctx, c.App, node, vmid, vols, conf); err != nil {
		return err
	}
	if err := e.tagSharedVolumes(ctx, c, vmid, vols, obs); err != nil {
		return err
	}
	if c.Start || c.Restart {
		return r.step(c.App, "start", "ct "+strconv.Itoa(vmid), func() error { return r.start(ctx, c.App, node, vmid) })
	}
	return nil
}

// tagSharedVolumes writes the tags that record the container's volumes
// on shared storage (plan.VolumeTag) once a volume created by this run
// is attached: the plan could not know its volid. The tags are what
// corral can read of the container while its node is offline, to
// recover the app elsewhere (apply --recover).
func (e *Executor) tagSharedVolumes(ctx context.Context, c plan.Change, vmid int, vols []attachment, obs *plan.Observed) error {
	r := e.ops()
	if c.Desired == nil || obs == nil {
		return nil
	}
	fresh := false
	tags := plan.AppTags(*c.Desired)
	for _, v := range vols {
		if !obs.OnShared(v.VolID) {
			continue
		}
		fresh = fresh || v.fresh
		if t := plan.VolumeTag(v.Name, v.VolID); t != "" && !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	if !fresh {
		return nil
	}
	// Keep the mark of a recovered container: it is how its stale copy
	// is told apart.
	conf, err := containerConfig(ctx, e.Client, c.Node, vmid)
	if err != nil {
		return err
	}
	for _, t := range plan.ParseTags(conf["tags"]) {
		if strings.HasPrefix(t, plan.TagRecoveredPrefix) && !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	slices.Sort(tags)
	return r.step(c.App, "config", "tags (shared volumes)", func() error {
		return r.putConfig(ctx, c.Node, vmid, &pve.ConfigUpdate{Tags: tags})
	})
}

// withStartCause adds to a start task that ended "startup for container
// '<vmid>' failed" the lines its log holds just before "TASK ERROR:":
// that exit status says nothing of why, and PVE logs the container's
// stderr there (pve-container LXC.pm monitor_start, print_ct_stderr_log),
// as the emulator logs why it refused the start (its node's memory).
func withStartCause(err error) error {
	var te *pve.TaskError
	if !errors.Is(err, pve.ErrStartFailed) || !errors.As(err, &te) {
		return err
	}
	var cause []string
	for _, l := range te.Log {
		if strings.HasPrefix(l, "TASK ERROR:") {
			break
		}
		if l = strings.TrimSpace(l); l != "" {
			cause = append(cause, l)
		}
	}
	if len(cause) == 0 {
		return err
	}
	return fmt.Errorf("%w: %s", err, strings.Join(cause[max(len(cause)-3, 0):], "; "))
}

// loggedHostKey is a "done:" line of pve-container's
// rewrite_ssh_host_keys in a create task log, after "Creating SSH host
// key 'ssh_host_TYPE_key' - this may take some time ...": ssh-keygen's
// fingerprint line.
var loggedHostKey = lazyre.New(`^done: (SHA256:[0-9A-Za-z+/]{43}) `)

// loggedHostKeys are the SSH host key fingerprints a create task logged.
func loggedHostKeys(log []string) []string {
	var fps []string
	for _, line := range log {
		if m := loggedHostKey.FindStringSubmatch(line); m != nil {
			fps = append(fps, m[1])
		}
	}
	return fps
}
