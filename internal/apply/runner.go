package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// runner makes the PVE calls every part of an Executor shares: each
// write retried while the CT is locked (locked), each task waited for
// with its log and warnings reported, and each phase run as a named,
// timed step that a stop request ends before it starts. The concern types
// (keepers, mover, guests, restorer) embed it rather than point back at
// the whole Executor.
type runner struct {
	client   *pve.Client
	observer Observer // nil: events are dropped
	stop     <-chan struct{}
	lockWait time.Duration // see Executor.LockWait
	*runState
}

// runState is what the steps of one Executor share whichever part runs
// them: its zero value is ready for use, and it must not be copied.
type runState struct {
	sweeps   sweepGroup // the attach guard's shared reads (guard.go)
	mu       sync.Mutex // timings
	timings  []Timing
	creating sync.Mutex // NextID and the create POST, so parallel creates do not race for one VMID
	vmKeeper sync.Mutex // finding or creating a keeper VM, so parallel VM apps make one per node (vmkeeper.go)
	// createdKeys are the SSH host key fingerprints the create tasks of
	// this run logged, by VMID ([]string): the first login to a new
	// container accepts only those (see dialGuest).
	createdKeys sync.Map
	// places are where this run's changes left the apps' containers
	// (placement, by app), observed where the run began: a guest work
	// that names an app's facts reads them there (liveFact).
	places   sync.Map
	observed *plan.Observed
}

// ops is the runner over e's fields as they are now and its shared state.
func (e *Executor) ops() *runner {
	return &runner{client: e.Client, observer: e.Observer, stop: e.Stop, lockWait: e.LockWait, runState: &e.state}
}

func (r *runner) obs() Observer {
	if r.observer == nil {
		return nopObserver{}
	}
	return r.observer
}

// stopped reports whether Stop was closed.
func (r *runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// step runs fn as one named phase of app, timing it and reporting it.
func (r *runner) step(app, phase, detail string, fn func() error) error {
	if r.stopped() {
		return fmt.Errorf("%s: %s: %w", app, phase, ErrStopped)
	}
	done := r.obs().Step(app, phase, detail)
	start := time.Now()
	err := fn()
	r.mu.Lock()
	r.timings = append(r.timings, Timing{App: app, Phase: phase, Elapsed: time.Since(start)})
	r.mu.Unlock()
	done(err)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", app, phase, err)
	}
	return nil
}

// stepName names a step as the observer shows it.
type stepName struct{ app, phase, detail string }

// stepsAtOnce is step for steps that one operation carries out together
// (a batch): each is shown as started before op runs and ends with its
// own error, op's result at the same index. Asked to stop, it runs
// nothing and every step fails with ErrStopped.
func (r *runner) stepsAtOnce(steps []stepName, op func() []error) []error {
	errs := make([]error, len(steps))
	if r.stopped() {
		for j, s := range steps {
			errs[j] = fmt.Errorf("%s: %s: %w", s.app, s.phase, ErrStopped)
		}
		return errs
	}
	dones := make([]func(error), len(steps))
	for j, s := range steps {
		dones[j] = r.obs().Step(s.app, s.phase, s.detail)
	}
	start := time.Now()
	res := op()
	elapsed := time.Since(start)
	r.mu.Lock()
	seen := map[stepName]bool{} // an app waited once, however many of its steps
	for _, s := range steps {
		if k := (stepName{app: s.app, phase: s.phase}); !seen[k] {
			seen[k] = true
			r.timings = append(r.timings, Timing{App: s.app, Phase: s.phase, Elapsed: elapsed})
		}
	}
	r.mu.Unlock()
	for j, s := range steps {
		dones[j](res[j])
		if res[j] != nil {
			errs[j] = fmt.Errorf("%s: %s: %w", s.app, s.phase, res[j])
		}
	}
	return errs
}

// destroyCT stops the CT, detaches every mount point (keeper volumes
// become unusedN, which a destroy does not free since the keeper owns
// them), and destroys it.
func (r *runner) destroyCT(ctx context.Context, app, node string, vmid int) error {
	return r.destroyCTFrom(ctx, app, node, vmid, nil)
}

// destroyCTFrom is destroyCT given the CT's current config as read right
// before, with nothing written since (checkPlannedConf: the identity
// check's read); nil reads it.
func (r *runner) destroyCTFrom(ctx context.Context, app, node string, vmid int, conf map[string]string) error {
	if conf == nil {
		var err error
		conf, err = containerConfig(ctx, r.client, node, vmid)
		if pve.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	if err := r.ensureStopped(ctx, app, node, vmid); err != nil {
		return err
	}
	var mps []string
	for k := range conf {
		if isMP(k) {
			mps = append(mps, k)
		}
	}
	if len(mps) > 0 {
		if err := r.step(app, "detach", strings.Join(mps, ","), func() error {
			return r.putConfig(ctx, node, vmid, &pve.ConfigUpdate{Delete: mps})
		}); err != nil {
			return err
		}
	}
	return r.step(app, "destroy", "ct "+strconv.Itoa(vmid), func() error {
		var upid string
		err := r.locked().Do(ctx, func() (err error) {
			upid, err = r.client.DestroyContainer(ctx, node, vmid, pve.DestroyOptions{Purge: true})
			return err
		})
		if pve.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return r.wait(ctx, app, upid)
	})
}

// dropReferences deletes the unusedN entries of CT vmid that name one of
// volids, volumes the CT does not own (PVE then only drops the entry).
func (r *runner) dropReferences(ctx context.Context, node string, vmid int, volids []string) error {
	conf, err := containerConfig(ctx, r.client, node, vmid)
	if err != nil {
		return err
	}
	var keys []string
	for k, v := range conf {
		if isUnused(k) && slices.Contains(volids, v) && plan.VolumeOwner(v) != vmid {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return r.putConfig(ctx, node, vmid, &pve.ConfigUpdate{Delete: keys})
}

// putConfig is a synchronous PUT .../config, retried while another
// operation holds the CT's lock (the change has not started then).
func (r *runner) putConfig(ctx context.Context, node string, vmid int, u *pve.ConfigUpdate) error {
	return r.locked().Do(ctx, func() error {
		return r.client.UpdateContainerConfig(ctx, node, vmid, u)
	})
}

// locked is the retry policy of every call PVE may refuse with "CT is
// locked (…)" (the call was refused before any change, so repeating it is
// safe): pve.RetryLocked, bounded by LockWait when set.
func (r *runner) locked() pve.RetryPolicy {
	p := pve.RetryLocked
	if r.lockWait != 0 {
		p.MaxWait = r.lockWait
	}
	return p
}

// ensureStopped shuts the CT down (gracefully, then hard after 60 s) if it
// runs. It asks for the shutdown without reading the CT's status first:
// PVE refuses a shutdown of a CT that does not run before any task
// starts ("CT 105 not running", also under HA), which is the answer the
// read would have given (issue 30: one read less per CT stopped).
func (r *runner) ensureStopped(ctx context.Context, app, node string, vmid int) error {
	if r.stopped() {
		// No new task once a stop was asked: only whether one was needed.
		st, err := r.client.ContainerStatus(ctx, node, vmid)
		if err != nil || !st.Running() {
			return err
		}
		return fmt.Errorf("%s: stop: %w", app, ErrStopped)
	}
	var upid string
	err := r.locked().Do(ctx, func() (err error) {
		upid, err = r.client.ShutdownContainer(ctx, node, vmid, pve.ShutdownOptions{Timeout: 60, ForceStop: true})
		return err
	})
	var apiErr *pve.APIError
	if errors.As(err, &apiErr) && errors.Is(apiErr, pve.ErrNotRunning) {
		return nil
	}
	return r.step(app, "stop", "ct "+strconv.Itoa(vmid), func() error {
		if err != nil {
			return err
		}
		if err := r.wait(ctx, app, upid); err != nil {
			return err
		}
		return r.waitHAPower(ctx, upid, node, vmid, false)
	})
}

func (r *runner) start(ctx context.Context, app, node string, vmid int) error {
	var upid string
	err := r.locked().Do(ctx, func() (err error) {
		upid, err = r.client.StartContainer(ctx, node, vmid)
		return err
	})
	if err != nil {
		var apiErr *pve.APIError
		if errors.As(err, &apiErr) && errors.Is(apiErr, pve.ErrAlreadyRunning) {
			return nil
		}
		return err
	}
	if err := r.wait(ctx, app, upid); err != nil {
		return withStartCause(err)
	}
	return r.waitHAPower(ctx, upid, node, vmid, true)
}

func (r *runner) resize(ctx context.Context, app, node string, vmid int, disk string, size int64) error {
	var upid string
	err := r.locked().Do(ctx, func() (err error) {
		upid, err = r.client.ResizeContainer(ctx, node, vmid, disk, plan.GiB(size)+"G")
		return err
	})
	if err != nil {
		return err
	}
	return r.wait(ctx, app, upid)
}

// wait waits for a task, streaming its log to an observer that shows it,
// and reports its warnings.
func (r *runner) wait(ctx context.Context, app, upid string) error {
	_, err := r.waitLog(ctx, app, upid, false)
	return err
}

// waitLog is wait that also returns the task's whole log when withLog.
func (r *runner) waitLog(ctx context.Context, app, upid string, withLog bool) ([]string, error) {
	opts := pve.WaitOptions{Log: withLog}
	if wantsTaskLogs(r.obs()) {
		opts.OnLog = func(line string) { r.obs().TaskLog(app, upid, line) }
	}
	res, err := r.client.WaitTask(ctx, upid, opts)
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		r.obs().Warn(app, w)
	}
	return res.Log, nil
}

// fetchTemplate downloads a missing template from the node's appliance
// index (as the seeds' Terraform download resource did).
func (r *runner) fetchTemplate(ctx context.Context, app, node, volid string) error {
	sid, name, ok := strings.Cut(volid, ":")
	file := strings.TrimPrefix(name, "vztmpl/")
	if !ok || file == name {
		return fmt.Errorf("template %s is not on node %s and is not a vztmpl volume corral can download", volid, node)
	}
	upid, err := r.client.DownloadAppliance(ctx, node, sid, file)
	if err != nil {
		if pve.IsPermission(err) {
			return fmt.Errorf("download template %s: %w (the token needs Datastore.AllocateTemplate on /storage/%s, or upload the template once by hand)", file, err, sid)
		}
		return fmt.Errorf("download template %s: %w", file, err)
	}
	return r.wait(ctx, app, upid)
}

// postCT creates a CT with params and waits for the task. With vmid 0 it
// takes /cluster/nextid, and takes the next one if another client took
// that id meanwhile.
func (r *runner) postCT(ctx context.Context, app, node string, vmid int, params *pve.ContainerCreate, hostKeys bool) (int, error) {
	id, upid, err := r.startCT(ctx, node, vmid, params)
	if err != nil {
		return 0, err
	}
	log, err := r.waitLog(ctx, app, upid, hostKeys)
	if err != nil {
		return 0, fmt.Errorf("create ct %d: %w", id, err)
	}
	if fps := loggedHostKeys(log); len(fps) > 0 {
		r.createdKeys.Store(id, fps)
	}
	return id, nil
}

// startCT posts a container's create (with the next free VMID when vmid
// is 0) and returns its VMID and task without waiting for it.
func (r *runner) startCT(ctx context.Context, node string, vmid int, params *pve.ContainerCreate) (int, string, error) {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		// One create request at a time: parallel creates would all be
		// given the same next free VMID. The task itself runs unlocked.
		r.creating.Lock()
		id := vmid
		if id == 0 {
			var err error
			if id, err = r.client.NextID(ctx); err != nil {
				r.creating.Unlock()
				return 0, "", err
			}
		}
		params.VMID = id
		upid, err := r.client.CreateContainer(ctx, node, params)
		r.creating.Unlock()
		if vmid == 0 && attempt < attempts && pve.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("create ct %d: %w", id, err)
		}
		return id, upid, nil
	}
}

// guardUnreferenced fails with *VolumeInUseError when a guest on node
// other than those in allowed references one of volids.
func (r *runner) guardUnreferenced(ctx context.Context, node string, volids []string, allowed ...int) error {
	bad, err := r.referencedBy(ctx, node, volids, allowed, 0)
	if err != nil {
		return err
	}
	return firstInUse(volids, bad)
}

// referencedBy reads node's guests (every node's when one of volids is
// on shared storage) and returns, for each of volids that a guest other
// than those in allowed references, those references. The config of
// unread (0: none), a guest whose every reference the caller allows, is
// not read.
func (r *runner) referencedBy(ctx context.Context, node string, volids []string, allowed []int, unread int) (map[string][]Reference, error) {
	if len(volids) == 0 {
		return nil, nil
	}
	shared, err := onSharedStorage(ctx, r.client, node, volids)
	if err != nil {
		return nil, err
	}
	// A volume on shared storage can be named by a guest on any node,
	// and PVE lets two nodes mount it at once: read them all.
	refs, err := r.sweeps.do(ctx, sweepKey{node: node, all: shared, skip: skippedNode(ctx), unread: unread}, func() (map[string][]Reference, error) {
		return referencesSkip(ctx, r.client, node, shared, skippedNode(ctx), unread)
	})
	if err != nil {
		return nil, err
	}
	bad := map[string][]Reference{}
	for _, volid := range volids {
		for _, r := range refs[volid] {
			if !slices.Contains(allowed, r.VMID) {
				bad[volid] = append(bad[volid], r)
			}
		}
	}
	return bad, nil
}

// firstInUse is the *VolumeInUseError of the first of volids with
// references in refs, nil when none has.
func firstInUse(volids []string, refs map[string][]Reference) error {
	for _, volid := range volids {
		if len(refs[volid]) > 0 {
			return &VolumeInUseError{VolID: volid, Refs: refs[volid]}
		}
	}
	return nil
}

// guardSnapshots fails with *VolumeInUseError when a snapshot of any
// container that could name them keeps one of volids.
func (r *runner) guardSnapshots(ctx context.Context, node string, volids []string) error {
	refs, err := nodeSnapshotRefs(ctx, r.client, node, volids)
	if err != nil {
		return err
	}
	return firstInUse(volids, refs)
}

// volumesInUseOwned is volumesInUse for volumes of several keepers of
// node: owner gives each volume's keeper, the one guest allowed to
// reference it.
func (r *runner) volumesInUseOwned(ctx context.Context, node string, volids []string, owner map[string]int) (map[string]*VolumeInUseError, error) {
	ctx = oneListing(ctx)
	refs, err := r.referencedBy(ctx, node, volids, nil, soleOwner(volids, owner))
	if err != nil {
		return nil, err
	}
	if refs == nil {
		refs = map[string][]Reference{}
	}
	for _, volid := range volids {
		refs[volid] = slices.DeleteFunc(refs[volid], func(x Reference) bool { return x.VMID == owner[volid] })
	}
	return r.inUseWithSnapshots(ctx, node, volids, refs)
}

// soleOwner is the keeper that owns every one of volids (owner), whose
// config the check of them need not read: its references to its own
// volumes are allowed, and it can name no other volume of the check
// (issue 30: the free's check read the keeper it was freeing from). It
// is 0 when volids have two owners, or one has none: each keeper's
// config may then name another's volume, and all are read.
func soleOwner(volids []string, owner map[string]int) int {
	sole := 0
	for _, v := range volids {
		o := owner[v]
		if o == 0 || (sole != 0 && o != sole) {
			return 0
		}
		sole = o
	}
	return sole
}

// volumesInUse is guardUnreferenced and guardSnapshots for many volumes
// with one read of the guests and one of the snapshots, both from one
// listing of the cluster (oneListing): the
// *VolumeInUseError of each of volids that a guest other than allowed
// references, or a snapshot keeps.
func (r *runner) volumesInUse(ctx context.Context, node string, volids []string, allowed ...int) (map[string]*VolumeInUseError, error) {
	ctx = oneListing(ctx)
	bad, err := r.referencedBy(ctx, node, volids, allowed, 0)
	if err != nil {
		return nil, err
	}
	return r.inUseWithSnapshots(ctx, node, volids, bad)
}

// inUseWithSnapshots is the *VolumeInUseError of each of volids that refs
// (the guests that reference it) or a snapshot keeps; snapshots are read
// only for the volumes no guest references, which are refused already.
func (r *runner) inUseWithSnapshots(ctx context.Context, node string, volids []string, refs map[string][]Reference) (map[string]*VolumeInUseError, error) {
	var rest []string
	for _, volid := range volids {
		if len(refs[volid]) == 0 {
			rest = append(rest, volid)
		}
	}
	snaps, err := nodeSnapshotRefs(ctx, r.client, node, rest)
	if err != nil {
		return nil, err
	}
	out := map[string]*VolumeInUseError{}
	for _, volid := range volids {
		if all := append(refs[volid], snaps[volid]...); len(all) > 0 {
			out[volid] = &VolumeInUseError{VolID: volid, Refs: all}
		}
	}
	return out, nil
}

// attach puts every volume that is not attached as wanted on a free mpN
// (or its current key) with PUT mpN=<volid>,mp=<path>,backup=… and no size=.
func (r *runner) attach(ctx context.Context, app, node string, vmid int, vols []attachment, conf map[string]string) error {
	if err := r.guardAttach(ctx, node, vmid, vols); err != nil {
		return err
	}
	used := map[string]bool{}
	for k := range conf {
		if isMP(k) {
			used[k] = true
		}
	}
	for _, v := range vols {
		if v.Action == plan.VolKeep {
			continue
		}
		key := v.Key
		if key == "" {
			for i := 0; ; i++ {
				cand := "mp" + strconv.Itoa(i)
				if !used[cand] {
					key = cand
					break
				}
			}
		}
		used[key] = true
		n, ok := pve.MountIndex(key)
		if !ok {
			return fmt.Errorf("attach %s: %q is not a mount point key", v.VolID, key)
		}
		mp := plan.AttachMount(v.VolID, v.Mount, v.Backup)
		if err := r.step(app, "attach", key+"="+mp.String(), func() error {
			return r.putConfig(ctx, node, vmid, &pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{n: mp}})
		}); err != nil {
			return err
		}
	}
	return nil
}

// guardAttach is the attach guard (guard.go) for the volumes of vols
// that are to be attached to CT vmid (0: not created yet): only that CT
// and the volume's owner, its keeper, may reference them.
func (r *runner) guardAttach(ctx context.Context, node string, vmid int, vols []attachment) error {
	var volids []string
	allowed := []int{}
	if vmid != 0 {
		allowed = append(allowed, vmid)
	}
	for _, v := range vols {
		// A volume this run created cannot be in anyone else's hands.
		if v.Action != plan.VolKeep && !v.fresh {
			volids = append(volids, v.VolID)
			allowed = append(allowed, plan.VolumeOwner(v.VolID))
		}
	}
	return r.guardUnreferenced(ctx, node, volids, allowed...)
}
