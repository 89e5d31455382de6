package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/wait"
)

// keeper is a node's keeper CT: a protected, never-started container that
// owns every volume corral retains, so that no workload's destroy can free
// them (behaviour.md, "Consequences for the pet/cattle design"). Each
// volume is one of its mpN entries, whose mount path /corral/<app>/<name>
// records whose it is (plan.MountRecords); its Notes repeat the records
// for people and hold corral's lease (see lock.go).
//
// Every write to a keeper is a compare-and-swap: read the config and its
// digest, compute the change from what was read, PUT it with that digest,
// and start again from a fresh read if PVE answers that the config
// changed meanwhile. Nothing corral writes there is computed from an
// earlier read, so two writers never undo each other's work. (A write
// that starts from the observation's read, seededChange, is computed
// from a read whose digest it carries: PVE takes it only if nothing
// changed since, which is what a fresh read would have shown; a decision
// not to write is never taken from it.)
type keeper struct {
	ops  *keeperOps // how it is read and written
	node string
	vmid int

	mu sync.Mutex // one volume operation at a time (they toggle protection)

	// out bounds the move_volume tasks that take volumes out of the
	// keeper queued at once (carry): PVE runs them one at a time under
	// the keeper's config lock, and a task that waits for that lock
	// longer than its timeout (10 s, lock_config) fails. A few queued
	// keep the keeper busy without risking it.
	out chan struct{}

	qmu   sync.Mutex // queue
	queue []*takeReq // moves waiting for the next protection window (takeBatched)

	// seed is the config an observation read of the keeper, with PVE's
	// digest, for the first attempt of the next seededChange instead of
	// a read of its own; nil once used, or after any other change.
	seed atomic.Pointer[pve.ContainerConfig]

	smu sync.Mutex // the fields below
	// What the last read or write saw; used to pick a keeper with room.
	records  map[plan.VolumeKey]string
	intents  map[plan.VolumeKey]plan.AdoptIntent
	projects map[string]string      // the Notes' project lines: they take room too
	declared map[string]string      // and their declared lines
	volumes  int                    // unusedN and mpN entries: what the keeper's room is counted in
	reserved map[plan.VolumeKey]int // room promised to volumes being made (keeperSet.forNew)
	// notesStale: volumes were carried out since the Notes were last
	// written (keeperSet.refreshNotes).
	notesStale bool
}

// keeperState is a fresh read of a keeper's config, for one write.
type keeperState struct {
	conf    map[string]string
	records map[plan.VolumeKey]string // from the mount points
	notes   plan.KeeperNotes          // the edit may change Intents and Lease
}

func newKeeperState(conf map[string]string) *keeperState {
	recs, _ := plan.KeeperRecords(conf)
	notes := plan.ParseKeeperNotes(conf["description"])
	return &keeperState{conf: conf, records: recs, notes: notes}
}

// maxCASAttempts bounds how often a write starts again because someone
// else wrote in between; each attempt is a fresh read.
const maxCASAttempts = 50

// read is a fresh read of the keeper's config with its digest.
func (k *keeper) read(ctx context.Context) (*pve.ContainerConfig, error) {
	cc, err := k.ops.client.ContainerConfig(ctx, k.node, k.vmid, true)
	if err != nil {
		return nil, fmt.Errorf("keeper %d: %w", k.vmid, err)
	}
	return cc, nil
}

// change is one compare-and-swap write (see keeper). edit gets the fresh
// state and returns the parameters to PUT, or nil for nothing to do; the
// Notes are rendered again from the fresh records with the edit's intents
// and lease, so they always follow the mount points.
func (k *keeper) change(ctx context.Context, what string, edit func(s *keeperState) (*pve.ConfigUpdate, error)) error {
	k.seed.Store(nil) // what it writes makes the observation's read stale
	return k.cas(ctx, what, edit, nil)
}

// seededChange is change whose first attempt starts from the keeper's
// seed (the observation's read and its digest) when it has one, instead
// of a read (issue 30: the lock's lease and a free's first write each
// read the keeper the plan had just read). Only a write is taken from
// the seed, checked by PVE against its digest: an edit that fails or
// finds nothing to write on it runs again on a fresh read.
func (k *keeper) seededChange(ctx context.Context, what string, edit func(s *keeperState) (*pve.ConfigUpdate, error)) error {
	return k.cas(ctx, what, edit, k.seed.Swap(nil))
}

// seedFrom makes the observed keeper o's read k's seed (none when its
// digest is unknown) and returns k.
func (k *keeper) seedFrom(o *plan.Keeper) *keeper {
	if o != nil && o.Digest != "" && o.VMID == k.vmid {
		k.seed.Store(&pve.ContainerConfig{Digest: o.Digest, Values: maps.Clone(o.Config)})
	}
	return k
}

// cas is the compare-and-swap loop of change, its first attempt from
// seed when not nil.
func (k *keeper) cas(ctx context.Context, what string, edit func(s *keeperState) (*pve.ConfigUpdate, error), seed *pve.ContainerConfig) error {
	for attempt := 1; ; attempt++ {
		cc, seeded := seed, seed != nil
		seed = nil
		if !seeded {
			var err error
			if cc, err = k.read(ctx); err != nil {
				return err
			}
		}
		s := newKeeperState(maps.Clone(cc.Values))
		params, err := edit(s)
		if seeded && (err != nil || params == nil) {
			continue // decided on the observation's read: a fresh one decides
		}
		if err != nil {
			return err
		}
		if params == nil {
			k.remember(s)
			return nil
		}
		notes := s.notes
		notes.Records = s.records
		if d := notes.Render(); d != cc.Values["description"] {
			params.Description = &d
		}
		if seeded && params.IsZero() {
			continue
		}
		if params.IsZero() {
			k.remember(s)
			return nil
		}
		params.Digest = cc.Digest // every keeper write is a compare-and-swap
		err = k.ops.putConfig(ctx, k.node, k.vmid, params)
		if pve.IsModified(err) && attempt < maxCASAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("keeper %d: %s: %w", k.vmid, what, err)
		}
		k.remember(s)
		return nil
	}
}

// noteProject notes in s that app's volumes belong to the executor's
// project, unless the Notes already name one for volumes the keeper still
// records (a keeper is shared by every project on its node; see
// plan.KeeperNotes.Projects).
func (k *keeper) noteProject(s *keeperState, app string) {
	defer k.noteDeclared(s, app)
	if k.ops.project == "" || s.notes.Projects[app] == k.ops.project {
		return
	}
	if s.notes.Projects[app] != "" && slices.ContainsFunc(slices.Collect(maps.Keys(s.records)), func(vk plan.VolumeKey) bool { return vk.App == app }) {
		return
	}
	if s.notes.Projects == nil {
		s.notes.Projects = map[string]string{}
	}
	s.notes.Projects[app] = k.ops.project
}

// noteDeclared notes in s which manifest declared app's volumes (the
// executor's Declared), unless the Notes say they are another project's.
func (k *keeper) noteDeclared(s *keeperState, app string) {
	if k.ops.declared == "" || s.notes.Declared[app] == k.ops.declared {
		return
	}
	if p := s.notes.Projects[app]; p != "" && p != k.ops.project {
		return
	}
	if s.notes.Declared == nil {
		s.notes.Declared = map[string]string{}
	}
	s.notes.Declared[app] = k.ops.declared
}

func (k *keeper) remember(s *keeperState) {
	k.smu.Lock()
	defer k.smu.Unlock()
	k.records, k.intents, k.projects, k.declared, k.volumes = s.records, s.notes.Intents, s.notes.Projects, s.notes.Declared, plan.VolumeEntries(s.conf)
}

// setProtection sets protection=on (1) or off (0) unless it already is.
func (k *keeper) setProtection(ctx context.Context, on bool) error {
	what := "clear protection"
	if on {
		what = "set protection"
	}
	write := k.change
	if !on {
		// Clearing it starts a volume operation, the keeper's first write
		// since the plan's read as a rule.
		write = k.seededChange
	}
	return write(ctx, what, func(s *keeperState) (*pve.ConfigUpdate, error) {
		if (s.conf["protection"] == "1") == on {
			return &pve.ConfigUpdate{}, nil // the Notes may still be brought up to date
		}
		return &pve.ConfigUpdate{Protection: pve.Ptr(on)}, nil
	})
}

// unprotected runs fn with the keeper's protection cleared, which PVE
// requires to add or remove its volumes (behaviour.md §g), and sets it
// again right after, however fn ends: an error, a cancelled context
// (Ctrl-C, SIGTERM) or a panic (reprotect). Only a killed process, or a
// PVE that refuses every try, leaves it off; the latter is an error of
// its own, joined to fn's, and the next plan repairs it.
func (k *keeper) unprotected(ctx context.Context, fn func() error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.unprotectedHeld(ctx, fn)
}

// unprotectedHeld is unprotected for a caller that holds k.mu.
func (k *keeper) unprotectedHeld(ctx context.Context, fn func() error) (err error) {
	defer func() {
		if perr := k.reprotect(ctx); perr != nil {
			err = errors.Join(err, perr)
		}
	}()
	if err := k.setProtection(ctx, false); err != nil {
		return err
	}
	return fn()
}

// unprotectedEnding is unprotected for an fn whose last write can set
// the protection again itself: fn calls reprotect on that write's
// update, and once fn has returned without an error the write has
// carried it, so the separate write of reprotect (and its read) is not
// made (issue 30: a free's last write, whose deletes PVE applies before
// its sets and checks against the config as it was, protection off:
// pve-container's update_pct_config and vmconfig_apply_pending). An
// error, a panic, or an fn that never asked, still gets reprotect.
func (k *keeper) unprotectedEnding(ctx context.Context, fn func(reprotect func(u *pve.ConfigUpdate)) error) (err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	done := false
	defer func() {
		if done {
			return
		}
		if perr := k.reprotect(ctx); perr != nil {
			err = errors.Join(err, perr)
		}
	}()
	if err := k.setProtection(ctx, false); err != nil {
		return err
	}
	asked := false
	err = fn(func(u *pve.ConfigUpdate) { u.Protection, asked = pve.Ptr(true), true })
	done = err == nil && asked
	return err
}

// reprotectTries and reprotectFirstDelay bound reprotect: tries with
// doubling pauses between them (0.5 s, 1 s, 2 s, 4 s: under 8 s of
// pauses), each try at most reprotectTryTimeout.
const (
	reprotectTries      = 5
	reprotectTryTimeout = 15 * time.Second
)

// reprotectFirstDelay is a variable for the crash tests only, whose
// killed runs (a transport that fails every request after the kill, as
// a dead process sends none) would otherwise sit out the whole backoff
// before the run can be tried again (export_test.go).
var reprotectFirstDelay = 500 * time.Millisecond

// reprotect sets the keeper's protection again after a volume operation.
// It is the one write corral must not lose: a 5xx or a dropped connection
// is tried again with a backoff. The tries run on a context detached from
// ctx's cancel, so that a Ctrl-C or SIGTERM (which cancels ctx) still
// gets the keeper protected; they are bounded in number and time instead.
// If every try fails, the error says that protection is off and how to
// set it again.
func (k *keeper) reprotect(ctx context.Context) error {
	base := context.WithoutCancel(ctx)
	delay := reprotectFirstDelay
	var err error
	for try := 1; try <= reprotectTries; try++ {
		tctx, cancel := context.WithTimeout(base, reprotectTryTimeout)
		err = k.setProtection(tctx, true)
		cancel()
		if err == nil {
			return nil
		}
		if try < reprotectTries {
			_ = wait.Sleep(base, delay) // base is never cancelled
			delay *= 2
		}
	}
	return fmt.Errorf("protection is OFF on keeper %d on node %s: setting it again failed %d times (last: %w); "+
		"PVE will not stop a destroy of the keeper or the removal of its volumes until it is set: "+
		"`corral apply` sets it again, or run `pct set %d --protection 1` on node %s",
		k.vmid, k.node, reprotectTries, err, k.vmid, k.node)
}

// ensureKeeper creates the node's keeper or repairs it (protection off,
// a record's mount point removed, Notes edited).
func (ko *keeperOps) ensureKeeper(ctx context.Context, kc plan.KeeperChange, k *keeper, p *plan.Plan, obs *plan.Observed) (*keeper, error) {
	if kc.Action == plan.Create {
		return ko.createPlanned(ctx, kc, p, obs)
	}
	if k == nil {
		return nil, fmt.Errorf("keeper %d on %s is gone; run corral again", kc.VMID, kc.Node)
	}
	if _, err := k.read(ctx); pve.IsNotFound(err) {
		// A spare keeper another corral made and removed (lock.go): it
		// held nothing, so there is nothing to repair.
		return k, nil
	}
	err := ko.step(plan.KeeperName, "keeper", "repair "+strconv.Itoa(k.vmid)+": "+strings.Join(kc.Reasons, "; "), func() error {
		if len(kc.Remount) > 0 {
			return k.unprotected(ctx, func() error {
				for _, vk := range slices.SortedFunc(maps.Keys(kc.Remount), func(a, b plan.VolumeKey) int { return strings.Compare(a.String(), b.String()) }) {
					if err := k.mount(ctx, vk, kc.Remount[vk]); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if len(kc.DropIntents) > 0 {
			if err := k.change(ctx, "forget adoption intents", func(s *keeperState) (*pve.ConfigUpdate, error) {
				for _, vk := range kc.DropIntents {
					delete(s.notes.Intents, vk)
				}
				return &pve.ConfigUpdate{}, nil
			}); err != nil {
				return err
			}
		}
		if len(kc.Projects) > 0 {
			// Records made before projects: say whose they are.
			if err := k.change(ctx, "note projects", func(s *keeperState) (*pve.ConfigUpdate, error) {
				for app, project := range kc.Projects {
					if s.notes.Projects[app] == "" {
						if s.notes.Projects == nil {
							s.notes.Projects = map[string]string{}
						}
						s.notes.Projects[app] = project
					}
				}
				return &pve.ConfigUpdate{}, nil
			}); err != nil {
				return err
			}
		}
		if len(kc.Declared) > 0 {
			// Records that name no declarer (or, under an explicit
			// project, another one): say which manifest declares them.
			if err := k.change(ctx, "note declarers", func(s *keeperState) (*pve.ConfigUpdate, error) {
				if s.notes.Declared == nil {
					s.notes.Declared = map[string]string{}
				}
				maps.Copy(s.notes.Declared, kc.Declared)
				return &pve.ConfigUpdate{}, nil
			}); err != nil {
				return err
			}
		}
		// Protection and the Notes: one write does both.
		return k.setProtection(ctx, true)
	})
	return k, err
}

// createPlanned creates the keeper kc plans, or takes the one the lock is
// creating on its node (lockclaim.go). A lock's keeper whose create had
// ended when the plan was made is one of the plan's observed keepers (the
// run already has its handle): kc is another keeper, created here; taking
// the lock's again made two handles of one keeper, whose protection
// windows then crossed ("protection mode enabled"), and left the node a
// keeper short ("no keeper on node … has room").
func (ko *keeperOps) createPlanned(ctx context.Context, kc plan.KeeperChange, p *plan.Plan, obs *plan.Observed) (*keeper, error) {
	if pk := pendingIn(ctx)[kc.Node]; pk != nil && !observedKeeper(obs, kc.Node, pk.vmid) && pk.adopt() {
		return ko.adoptPending(ctx, pk)
	}
	tmpl := keeperTemplate(kc.Node, p, obs)
	if tmpl == "" {
		return nil, fmt.Errorf("keeper on %s: no container template on the node to create it from", kc.Node)
	}
	if err := ko.keeperTemplateOn(ctx, kc.Node, tmpl, obs); err != nil {
		return nil, err
	}
	var made *keeper
	err := ko.step(plan.KeeperName, "keeper", "create on "+kc.Node, func() error {
		var err error
		made, err = ko.createKeeper(ctx, kc.Node, tmpl, keeperRootStorage(kc.Node, p))
		return err
	})
	return made, err
}

// observedKeeper reports whether obs holds keeper vmid on node.
func observedKeeper(obs *plan.Observed, node string, vmid int) bool {
	for _, k := range obs.Keepers[node] {
		if k.VMID == vmid {
			return true
		}
	}
	return false
}

// createKeeper creates a keeper on node from template tmpl, protected
// from its first moment.
func (ko *keeperOps) createKeeper(ctx context.Context, node, tmpl, rootStorage string) (*keeper, error) {
	params := holderParams(tmpl, plan.KeeperName, rootStorage, plan.TagKeeper, plan.KeeperDescription(nil))
	vmid, err := ko.postCT(ctx, plan.KeeperName, node, 0, params, false)
	if err != nil {
		return nil, err
	}
	return &keeper{ops: ko, node: node, vmid: vmid, records: map[plan.VolumeKey]string{}}, nil
}

// keeperTemplateOn downloads tmpl to node unless the node has it. It
// changes obs: call it before the apps' changes run.
func (ko *keeperOps) keeperTemplateOn(ctx context.Context, node, tmpl string, obs *plan.Observed) error {
	if slices.Contains(obs.Templates[node], tmpl) {
		return nil
	}
	if err := ko.fetchTemplate(ctx, plan.KeeperName, node, tmpl); err != nil {
		return err
	}
	obs.Templates[node] = append(obs.Templates[node], tmpl)
	return nil
}

// holderParams are the create parameters of a container that only holds
// volumes and never starts (a keeper, a move's carrier): the smallest
// that PVE creates from tmpl, protected from its first moment, its Notes
// (description) written by the create itself.
func holderParams(tmpl, hostname, rootStorage, tag, description string) *pve.ContainerCreate {
	return &pve.ContainerCreate{
		OSTemplate:   tmpl,
		RootFS:       pve.MountPoint{Volume: rootStorage + ":" + plan.GiB(keeperRootSize)},
		Unprivileged: pve.Ptr(true),
		Config: pve.ConfigUpdate{
			Hostname:    &hostname,
			Cores:       pve.Ptr[int64](1),
			Memory:      pve.Ptr[int64](64),
			Swap:        pve.Ptr[int64](0),
			Features:    pve.Ptr("nesting=1"), // no systemd warning at create
			Tags:        []string{plan.TagManaged, tag},
			Description: &description,
			Protection:  pve.Ptr(true),
		},
	}
}

// keeperRootSize is the keeper's rootfs size. The keeper never starts,
// but PVE unpacks the template into its rootfs when creating it, and
// fails the create when tar runs out of space: the Debian and Ubuntu
// standard templates take 500-600M (128M, the size before, fitted only
// Alpine's). Thin and sparse storages allocate only what is written.
const keeperRootSize = 1 << 30

// keeperTemplate picks the template the keeper is made from: the first
// app's on that node (it is fetched for the app anyway).
func keeperTemplate(node string, p *plan.Plan, obs *plan.Observed) string {
	for _, c := range p.Changes {
		if c.Node == node && c.Desired != nil {
			return c.Desired.Template
		}
	}
	if t := obs.Templates[node]; len(t) > 0 {
		return t[0]
	}
	return ""
}

func keeperRootStorage(node string, p *plan.Plan) string {
	for _, c := range p.Changes {
		if c.Node == node && c.Desired != nil && c.Desired.RootStorage != "" {
			return c.Desired.RootStorage
		}
	}
	return "local-lvm"
}

// freeKey returns the lowest prefixN (mpN, unusedN) not used in conf.
func freeKey(conf map[string]string, prefix string) string {
	return prefix + strconv.Itoa(freeIndex(conf, prefix))
}

// freeIndex returns the lowest N for which prefixN is not used in conf.
func freeIndex(conf map[string]string, prefix string) int {
	for i := 0; ; i++ {
		if _, used := conf[prefix+strconv.Itoa(i)]; !used {
			return i
		}
	}
}

// createVolume allocates a formatted volume and records it in one PUT:
// mpN=STORAGE:GiB,mp=/corral/<app>/<name> makes PVE allocate and format
// vm-<keeper>-disk-N, and the mount path says whose it is. A second
// attempt (a retry, or another corral that got there first) finds the
// record and allocates nothing.
func (k *keeper) createVolume(ctx context.Context, vk plan.VolumeKey, storage string, size int64) (string, error) {
	err := k.unprotected(ctx, func() error {
		return k.change(ctx, "allocate volume "+vk.String()+" on "+storage, func(s *keeperState) (*pve.ConfigUpdate, error) {
			if s.records[vk] != "" {
				return nil, nil
			}
			k.noteProject(s, vk.App)
			u := &pve.ConfigUpdate{}
			u.SetMountPoint(freeIndex(s.conf, "mp"), pve.MountPoint{Volume: storage + ":" + plan.GiB(size), Path: plan.KeeperMountPath(vk)})
			return u, nil
		})
	})
	if err != nil {
		return "", err
	}
	// The reprotect that ended unprotected read the keeper after the
	// allocation's write and remembered its records: the volid PVE
	// allocated is there, and reading again would only repeat that read
	// (issue 30: one config read per volume created).
	k.smu.Lock()
	volid := k.records[vk]
	k.smu.Unlock()
	if volid != "" {
		return volid, nil
	}
	return k.volidOf(ctx, vk)
}

// volidOf reads the keeper's record of vk.
func (k *keeper) volidOf(ctx context.Context, vk plan.VolumeKey) (string, error) {
	cc, err := k.read(ctx)
	if err != nil {
		return "", err
	}
	s := newKeeperState(cc.Values)
	k.remember(s)
	volid := s.records[vk]
	if volid == "" {
		return "", fmt.Errorf("keeper %d: no record of volume %s after writing it", k.vmid, vk)
	}
	return volid, nil
}

// mount records volid, a volume the keeper owns, as vk: PUT
// mpN=volid,mp=/corral/<app>/<name> (PVE drops the volume's unusedN entry
// itself). The caller has cleared protection.
func (k *keeper) mount(ctx context.Context, vk plan.VolumeKey, volid string) error {
	return k.mountAll(ctx, "record volume "+vk.String(), map[plan.VolumeKey]string{vk: volid})
}

// mountAll is mount for several volumes in one write (their adoption
// intents go in the same write).
func (k *keeper) mountAll(ctx context.Context, what string, vols map[plan.VolumeKey]string) error {
	return k.change(ctx, what, func(s *keeperState) (*pve.ConfigUpdate, error) {
		mounted := plan.MountRecords(s.conf) // s.records also holds lost ones, which this mounts
		taken := maps.Clone(s.conf)
		params := &pve.ConfigUpdate{}
		for _, vk := range sortedVolumeKeys(vols) {
			volid := vols[vk]
			delete(s.notes.Intents, vk)
			if mounted[vk] == volid {
				continue
			}
			if other := mounted[vk]; other != "" {
				return nil, fmt.Errorf("keeper %d already records %s as %s; not recording %s over it", k.vmid, vk, other, volid)
			}
			for other, v := range mounted {
				if v == volid {
					return nil, fmt.Errorf("keeper %d already records %s as %s; not recording it as %s too", k.vmid, volid, other, vk)
				}
			}
			s.records[vk] = volid
			mounted[vk] = volid
			k.noteProject(s, vk.App)
			n := freeIndex(taken, "mp")
			taken[pve.MountKey(n)] = volid
			params.SetMountPoint(n, pve.MountPoint{Volume: volid, Path: plan.KeeperMountPath(vk)})
		}
		return params, nil
	})
}

// rename moves records to new names (restore --replace) in one write:
// each record's mount path changes, the volume stays where it is. Records
// of moves already done (an earlier attempt) are left alone.
func (k *keeper) rename(ctx context.Context, moves map[plan.VolumeKey]plan.VolumeKey) error {
	return k.unprotected(ctx, func() error {
		return k.change(ctx, "rename records", func(s *keeperState) (*pve.ConfigUpdate, error) {
			params := &pve.ConfigUpdate{}
			renamed := map[plan.VolumeKey]string{}
			for from, to := range moves {
				if n, ok := pve.MountIndex(plan.MountKey(s.conf, from)); ok {
					volid := plan.ParseMountPoint(s.conf[pve.MountKey(n)]).Volume
					params.SetMountPoint(n, pve.MountPoint{Volume: volid, Path: plan.KeeperMountPath(to)})
					renamed[to] = volid
					delete(s.records, from)
				}
			}
			if params.IsZero() {
				return nil, nil
			}
			for to, volid := range renamed {
				if other := s.records[to]; other != "" && other != volid {
					return nil, fmt.Errorf("keeper %d: cannot record %s as %s: that name holds %s", k.vmid, volid, to, other)
				}
				s.records[to] = volid
			}
			return params, nil
		})
	})
}

// adopt moves an existing volume (e.g. a seed-style local-lvm:vm-105-disk-1
// referenced by CT 105) into the keeper with move_volume target-vmid,
// which renames it to vm-<keeper>-disk-N: the volid changes
// (behaviour.md §d). The source CT must be stopped unless the volume is
// one of its unusedN entries. An intent line in the Notes says where the
// volume goes before it moves, so a stop between the move and the record
// leaves no anonymous volume.
func (k *keeper) adopt(ctx context.Context, vk plan.VolumeKey, volid string) (string, error) {
	owner := plan.VolumeOwner(volid)
	if owner == k.vmid {
		return volid, k.unprotected(ctx, func() error { return k.mount(ctx, vk, volid) })
	}
	res, err := k.ops.client.ClusterResources(ctx, "vm")
	if err != nil {
		return "", err
	}
	node := ""
	for _, r := range res {
		if r.VMID == owner {
			node = r.Node
		}
	}
	if node == "" {
		return "", fmt.Errorf("adopt %s: its owner CT %d does not exist; attach it to a CT once (PUT mp0=%s,mp=/mnt/adopt on a stopped CT you own) so corral can move it", volid, owner, volid)
	}
	if node != k.node {
		return "", fmt.Errorf("adopt %s: it is on node %s, the app on %s", volid, node, k.node)
	}
	conf, err := containerConfig(ctx, k.ops.client, node, owner)
	if err != nil {
		return "", err
	}
	srcKey := ""
	for key, v := range conf {
		if (isMP(key) || isUnused(key)) && plan.ParseMountPoint(v).Volume == volid {
			srcKey = key
		}
	}
	if srcKey == "" {
		return "", fmt.Errorf("adopt %s: CT %d, which owns it, does not reference it in its config (it is neither an mpN nor an unusedN there)", volid, owner)
	}
	if isMP(srcKey) {
		if err := k.ops.ensureStopped(ctx, vk.App, node, owner); err != nil {
			return "", err
		}
	}
	var newID string
	err = k.unprotected(ctx, func() (err error) {
		newID, err = k.take(ctx, vk, owner, srcKey, volid)
		return err
	})
	return newID, err
}

// take moves volid from owner's srcKey (on the keeper's node) into this keeper
// as an adoption, inside k.unprotected: the intent line in the keeper's
// Notes first (so a kill after it is finished by the next run), then
// move_volume to a free unusedN, then the record as the volume's mpN. It
// returns the volume's volid in the keeper.
func (k *keeper) take(ctx context.Context, vk plan.VolumeKey, owner int, srcKey, volid string) (string, error) {
	var target string
	if err := k.change(ctx, "note adoption of "+volid, func(s *keeperState) (*pve.ConfigUpdate, error) {
		target = freeKey(s.conf, "unused")
		if s.notes.Intents == nil {
			s.notes.Intents = map[plan.VolumeKey]plan.AdoptIntent{}
		}
		s.notes.Intents[vk] = plan.AdoptIntent{Source: volid, Key: target}
		k.noteProject(s, vk.App)
		return &pve.ConfigUpdate{}, nil
	}); err != nil {
		return "", err
	}
	if err := k.moveIn(ctx, vk.App, owner, srcKey, volid, target); err != nil {
		return "", err
	}
	cc, err := k.read(ctx)
	if err != nil {
		return "", err
	}
	newID := cc.Values[target]
	if newID == "" {
		return "", fmt.Errorf("keeper %d: %s empty after move", k.vmid, target)
	}
	return newID, k.mount(ctx, vk, newID)
}

// grow resizes a keeper volume through its mpN on the keeper (PVE resizes
// only rootfs/mpN of the owner, behaviour.md §f 5).
func (k *keeper) grow(ctx context.Context, vk plan.VolumeKey, volid string, size int64) error {
	return k.unprotected(ctx, func() error {
		cc, err := k.read(ctx)
		if err != nil {
			return err
		}
		key := plan.MountKey(cc.Values, vk)
		if key == "" || plan.ParseMountPoint(cc.Values[key]).Volume != volid {
			return fmt.Errorf("keeper %d does not record %s as %s; not resized", k.vmid, vk, volid)
		}
		return k.ops.resize(ctx, vk.App, k.node, k.vmid, key, size)
	})
}

// carryOutDepth is how many move_volume tasks out of one keeper corral
// has queued at PVE at once (keeper.out).
const carryOutDepth = 3

// takeOut waits for a turn to queue a move_volume out of the keeper; done
// gives it back.
func (k *keeper) takeOut(ctx context.Context) (done func(), err error) {
	k.smu.Lock()
	if k.out == nil {
		k.out = make(chan struct{}, carryOutDepth)
	}
	out := k.out
	k.smu.Unlock()
	select {
	case out <- struct{}{}:
		return func() { <-out }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
