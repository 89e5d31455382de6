package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/pvesize"
)

// Power operations: POST /nodes/{node}/lxc/{vmid}/status/{start,stop,
// shutdown,reboot} (pve-container API2/LXC/Status.pm). Only the running
// check and the skiplock check fail the request; the config lock, the
// template and quota checks and a missing config all end the task instead
// (behaviour.md "Start/stop", (h) 1). PVE takes the config flock around
// fork_worker; here the worker takes it first thing (Worker.LockConfig),
// so a flock timeout shows as a task error.

// ctPower starts, stops, shuts down and reboots CTs and applies their
// pending changes at start. Cluster embeds it. It owns the running
// shutdowns' abort channels and the count of starts and stops; it holds
// no *Cluster: the State's lock and the State, the clock, and one field
// per part it calls.
type ctPower struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	guests  powerGuests
	storage interface {
		allocVolumeLocked(node, sid string, vmid int, size int64, ct string) (*Volume, error)
		freeVolumeLocked(node, volid string) error
	}
	tasks   powerTasks
	journal interface{ markGuest(vmid int) }
	// admit is memory admission (admission.go, the Cluster's own),
	// which a start passes.
	admit func(w *Worker, node string, g *Guest) error
	// ha (haGuest) turns the power request of an HA-managed CT into a
	// request to the CRM (ha_guest.go).
	ha interface {
		haPowerRequestLocked(auth Auth, node string, vmid int, want string) (upid string, ok bool)
	}

	// shutdownAborts holds the abort channel of every running vzshutdown
	// worker by UPID, so that stop with overrule-shutdown can end it.
	shutdownAborts sync.Map // string → chan struct{}
	// runChanges counts the CT starts and stops (stateMu), for the run
	// hook (SetRunHook, Worker.Do).
	runChanges uint64
}

// powerGuests is what ctPower needs of guests: the node check and the
// guest layer's start guard and shutdown.
type powerGuests interface {
	checkNodeLocked(node string) error
	guestStartGuard(vmid int) error
	guestShutdown(vmid int, timeout time.Duration)
}

// powerTasks is what ctPower needs of taskRunner: to start a task, its
// durations and the init PIDs.
type powerTasks interface {
	spawn(auth Auth, node, typ, id string, fn func(w *Worker) error) string
	duration(typ string) time.Duration
	unscaledDuration(typ string) time.Duration
	scale(d time.Duration) time.Duration
	nextPIDLocked() int
}

// StartCT is vm_start: task vzstart. It applies pending changes, then
// marks the CT running; its sshd answers after the "bootdelay" duration.
// params: skiplock (root@pam only).
func (p *ctPower) StartCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	skiplock, err := p.checkPowerRequestLocked(auth, node, vmid, params, powerRequest{skiplock: true, refusal: "CT %d already running\n"})
	if err != nil {
		return "", err
	}
	if upid, ok := p.ha.haPowerRequestLocked(auth, node, vmid, "started"); ok {
		return upid, nil
	}
	return p.tasks.spawn(auth, node, "vzstart", strconv.Itoa(vmid), func(w *Worker) error {
		if err := w.LockConfig(vmid); err != nil {
			return err
		}
		var logs []string
		err := w.doGuest(node, vmid, func(st *State, g *Guest) error {
			if g.IsTemplate() {
				return Failf("you can't start a CT if it's a template\n")
			}
			if err := checkPowerLock(g, skiplock, true); err != nil {
				return err
			}
			if g.Running {
				return Failf("CT %d already running\n", vmid)
			}
			if err := checkQuotas(g); err != nil {
				return err
			}
			logs = p.applyPendingLocked(g).Log
			// A refused start fails now; the check below, with the mark,
			// is the one that counts when starts race.
			if err := p.admit(w, node, g); err != nil {
				return err
			}
			// update_lxc_config, after the pending changes are written.
			return checkBridges(g.Config)
		})
		for _, line := range logs {
			w.Log("%s", line)
		}
		if err != nil {
			return err
		}
		if err := p.guests.guestStartGuard(vmid); err != nil {
			return fmt.Errorf("CT %d: %w", vmid, err)
		}
		if err := w.Phase("vzstart", 1); err != nil {
			return err
		}
		return w.doGuest(node, vmid, func(st *State, g *Guest) error {
			if err := p.admit(w, node, g); err != nil {
				return err
			}
			p.markRunningLocked(g)
			return nil
		})
	}), nil
}

// StopCT is vm_stop with kill: task vzstop. params: skiplock (root@pam
// only), overrule-shutdown (abort running vzshutdown tasks of the CT first,
// PVE::GuestHelpers::abort_guest_tasks; they end "interrupted by signal").
func (p *ctPower) StopCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	skiplock, err := p.checkPowerRequestLocked(auth, node, vmid, params, powerRequest{skiplock: true, running: true, refusal: "CT %d not running\n"})
	if err != nil {
		return "", err
	}
	if upid, ok := p.ha.haPowerRequestLocked(auth, node, vmid, "stopped"); ok {
		return upid, nil
	}
	var overruled, refused []string
	if isTrue(params["overrule-shutdown"]) {
		overruled, refused = p.abortShutdownsLocked(auth, node, vmid)
	}
	return p.tasks.spawn(auth, node, "vzstop", strconv.Itoa(vmid), func(w *Worker) error {
		for _, msg := range refused {
			w.Log("%s", msg)
		}
		if len(overruled) > 0 {
			w.Log("overruled vzshutdown tasks: %s", strings.Join(overruled, ", "))
		}
		if _, err := p.lockForPower(w, node, vmid, skiplock, true); err != nil {
			return err
		}
		if err := w.Phase("vzstop", 1); err != nil {
			return err
		}
		return p.recordStopped(w, vmid)
	}), nil
}

// ShutdownCT is vm_stop without kill: task vzshutdown. The emulated guest
// always shuts down cleanly within the "vzshutdown" duration (unscaled);
// a timeout (seconds, default 60) shorter than that stops it hard with
// forceStop=1 and fails the task otherwise. The config lock is checked
// strictly: shutdown has no skiplock and does not tolerate "mounted".
func (p *ctPower) ShutdownCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if _, err := p.checkPowerRequestLocked(auth, node, vmid, params, powerRequest{running: true, refusal: "CT %d not running\n"}); err != nil {
		return "", err
	}
	if upid, ok := p.ha.haPowerRequestLocked(auth, node, vmid, "stopped"); ok {
		return upid, nil
	}
	timeout := 60 * time.Second
	if t, err := strconv.Atoi(params["timeout"]); err == nil {
		timeout = time.Duration(t) * time.Second
	}
	forceStop := isTrue(params["forceStop"])
	return p.tasks.spawn(auth, node, "vzshutdown", strconv.Itoa(vmid), func(w *Worker) error {
		abort := make(chan struct{})
		key := w.UPID()
		p.shutdownAborts.Store(key, abort)
		defer p.shutdownAborts.Delete(key)

		if _, err := p.lockForPower(w, node, vmid, false, false); err != nil {
			return err
		}
		clean := p.tasks.unscaledDuration("vzshutdown")
		wait, timedOut := clean, false
		if timeout < clean {
			wait, timedOut = timeout, true
		}
		if !timedOut {
			return p.cleanShutdown(w, vmid, p.tasks.scale(wait), timeout, abort)
		}
		if err := w.sleepOrAbort(p.tasks.scale(wait), abort); err != nil {
			return err
		}
		if !forceStop {
			return Failf("container did not stop\n")
		}
		p.guests.guestShutdown(vmid, timeout)
		return p.recordStopped(w, vmid)
	}), nil
}

// cleanShutdown is the guest's clean power-off, which takes d: on PVE a
// vzshutdown lasts as long as the guest's own shutdown (lxc-stop returns
// once the container stopped, and the task ends right after). The guest
// layer's power-off (the shutdown hook: lxc-stop of the emulator's own
// container, 0.1 to 0.4 s here) and the CT's stop in the model (whose
// run hook ends the CT's sessions) are that shutdown's last stretch, so
// they start a quarter of d before its end, not after d: the task ends
// after d, as its duration says, unless they take longer (issue 30: they
// ran after the 4 s and made every vzshutdown end 0.1 to 0.4 s past its
// duration, which cost its waiter a read or two). Once the guest is
// down an abort no longer keeps it running: the rest of d is the task's
// end.
func (p *ctPower) cleanShutdown(w *Worker, vmid int, d, timeout time.Duration, abort <-chan struct{}) error {
	end := time.Now().Add(d)
	if err := w.sleepOrAbort(d-d/4, abort); err != nil {
		return err
	}
	p.guests.guestShutdown(vmid, timeout)
	if err := p.recordStopped(w, vmid); err != nil {
		return err
	}
	return w.sleepOrAbort(time.Until(end), nil)
}

// RebootCT is vm_reboot: task vzreboot. It shuts the CT down, applies
// pending changes and starts it again. A lock other than "mounted" fails
// the task (on PVE the pre-start hook refuses a locked CT).
func (p *ctPower) RebootCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	// sic: "VM", Status.pm vm_reboot
	if _, err := p.checkPowerRequestLocked(auth, node, vmid, params, powerRequest{running: true, refusal: "VM %d not running\n"}); err != nil {
		return "", err
	}
	return p.tasks.spawn(auth, node, "vzreboot", strconv.Itoa(vmid), func(w *Worker) error {
		running, err := p.lockForPower(w, node, vmid, false, true)
		if err != nil || !running {
			return err // vm_reboot does nothing for a CT that stopped meanwhile
		}
		if err := w.Phase("vzreboot", 0.5); err != nil {
			return err
		}
		var logs []string
		err = w.doGuest(node, vmid, func(st *State, g *Guest) error {
			p.markStoppedLocked(g)
			logs = p.applyPendingLocked(g).Log
			// update_lxc_config, after the pending changes are written.
			return checkBridges(g.Config)
		})
		for _, line := range logs {
			w.Log("%s", line)
		}
		if err != nil {
			return err
		}
		if err := w.Phase("vzreboot", 0.5); err != nil {
			return err
		}
		return w.doGuest(node, vmid, func(st *State, g *Guest) error {
			p.markRunningLocked(g)
			return nil
		})
	}), nil
}

// powerRequest says what a power request checks before its task.
type powerRequest struct {
	skiplock bool   // the call takes skiplock (start, stop)
	running  bool   // the call needs the CT running (stop, shutdown, reboot)
	refusal  string // Status.pm's die when the CT is not as needed; %d is the VMID
}

// checkPowerRequestLocked makes a power request's checks in Status.pm's
// order: the node, skiplock where the call takes it (only root@pam may),
// then whether the CT runs as the call needs. It returns skiplock.
func (p *ctPower) checkPowerRequestLocked(auth Auth, node string, vmid int, params map[string]string, r powerRequest) (skiplock bool, err error) {
	if err := p.guests.checkNodeLocked(node); err != nil {
		return false, err
	}
	if r.skiplock {
		if skiplock, err = skiplockParam(auth, params); err != nil {
			return false, err
		}
	}
	if p.runningLocked(node, vmid) != r.running {
		return false, Failf(r.refusal, vmid)
	}
	return skiplock, nil
}

// lockForPower is a power task's first step: it takes CT vmid's config
// flock for the rest of the task and checks the CT's lock
// (checkPowerLock), reporting whether the CT still runs.
func (p *ctPower) lockForPower(w *Worker, node string, vmid int, skiplock, allowMounted bool) (running bool, err error) {
	if err := w.LockConfig(vmid); err != nil {
		return false, err
	}
	err = w.doGuest(node, vmid, func(st *State, g *Guest) error {
		running = g.Running
		return checkPowerLock(g, skiplock, allowMounted)
	})
	return running, err
}

// recordStopped is a stop or shutdown task's last step: the CT, unless
// destroyed meanwhile, is stopped.
func (p *ctPower) recordStopped(w *Worker, vmid int) error {
	return w.Do(func(st *State) error {
		if g := st.Guests[vmid]; g != nil {
			p.markStoppedLocked(g)
		}
		return nil
	})
}

// skiplockParam reads skiplock; only the root@pam user (never a token)
// may set it (behaviour.md (h) 1).
func skiplockParam(auth Auth, params map[string]string) (bool, error) {
	skip := isTrue(params["skiplock"])
	if skip && !auth.IsRoot() {
		return false, ParamError(map[string]string{"skiplock": "Only root may use this option."})
	}
	return skip, nil
}

// runningLocked reports whether CT vmid runs on node (check_running).
func (p *ctPower) runningLocked(node string, vmid int) bool {
	st := p.state()
	g := st.Guests[vmid]
	return g != nil && g.Node == node && g.Running
}

// checkPowerLock is check_lock as the power tasks do it: skiplock skips
// it, and start/stop/reboot tolerate the "mounted" lock.
func checkPowerLock(g *Guest, skiplock, allowMounted bool) error {
	if skiplock || (allowMounted && g.Lock() == "mounted") {
		return nil
	}
	return checkLock(g)
}

// checkQuotas refuses quota=1 on any mount point of an unprivileged CT
// (behaviour.md (e)).
func checkQuotas(g *Guest) error {
	if !isTrue(g.Config["unprivileged"]) {
		return nil
	}
	for _, mp := range mountPoints(g.Config) {
		if isTrue(mp.Props["quota"]) {
			return Failf("Quotas are not supported by unprivileged containers.\n")
		}
	}
	return nil
}

// markRunningLocked records a started CT: a new init PID, the start time,
// and when its sshd answers (unix seconds, after "bootdelay").
func (p *ctPower) markRunningLocked(g *Guest) {
	p.journal.markGuest(g.VMID)
	p.runChanges++
	now := p.clock()
	g.Running = true
	g.PID = p.tasks.nextPIDLocked()
	g.StartedAt = now.Unix()
	g.SSHReadyAt = now.Add(p.tasks.duration("bootdelay")).Unix()
}

// markStoppedLocked clears the runtime state of a stopped CT and counts
// the stop for the run hook (Worker.Do).
func (p *ctPower) markStoppedLocked(g *Guest) {
	p.journal.markGuest(g.VMID)
	p.runChanges++
	g.Running = false
	g.PID = 0
	g.StartedAt = 0
	g.SSHReadyAt = 0
}

// abortShutdownsLocked ends the running vzshutdown tasks of CT vmid the
// caller may stop: its own, or any with Sys.Modify on the node
// (abort_guest_tasks → check_worker). It returns the aborted UPIDs and the
// permission errors for the others, which PVE only warns about.
func (p *ctPower) abortShutdownsLocked(auth Auth, node string, vmid int) (aborted, refused []string) {
	st := p.state()
	id := strconv.Itoa(vmid)
	for _, t := range st.Tasks {
		if t.Status != "running" || t.Type != "vzshutdown" || t.ID != id || t.Node != node {
			continue
		}
		owner := t.User
		if t.TokenID != "" {
			owner += "!" + t.TokenID
		}
		if owner != auth.ID() && !auth.IsRoot() {
			if err := st.Access.Check(auth, "/nodes/"+node, []string{"Sys.Modify"}, false); err != nil {
				refused = append(refused, strings.TrimRight(err.(*Error).Message, "\n"))
				continue
			}
		}
		if ch, ok := p.shutdownAborts.LoadAndDelete(t.UPID); ok {
			close(ch.(chan struct{}))
			aborted = append(aborted, t.UPID)
		}
	}
	return aborted, refused
}

// sleepOrAbort waits d, or fails as a killed PVE worker does when abort
// is closed or the cluster shuts down.
func (w *Worker) sleepOrAbort(d time.Duration, abort <-chan struct{}) error {
	if d < 0 {
		d = 0
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-abort:
		return fmt.Errorf("interrupted by signal")
	case <-w.ctx.Done():
		return fmt.Errorf("received interrupt")
	}
}

// pendingOutcome is what applying a guest's pending section reports.
type pendingOutcome struct {
	// Errors maps each option that could not be applied to PVE's
	// "unable to apply pending change <opt> : <err>" (behaviour.md (e));
	// the option stays pending.
	Errors map[string]string
	// Log holds the lines PVE prints with a plain warn (not counted as
	// task warnings): apply errors and "ignore deletion" notes.
	Log []string
}

// applyPendingLocked is vmconfig_apply_pending (pve-container
// LXC/Config.pm): it applies g's [pve:pending] section to its config, as
// vm_start does before every start (behaviour.md (e)). The config helper
// (PUT config on a stopped CT) calls it too.
//
// Pending deletes go first: a deleted volume mpN becomes unusedN, a
// deleted unusedN is freed if g owns it and nothing else in g (current,
// pending or snapshots) uses it. Then every pending value is applied: an
// mpN naming STORAGE:SIZE gets a new volume, an mpN naming an existing
// volume gets its size rescanned, and the volume it replaces becomes
// unusedN. unusedN entries whose volume rootfs/mpN now use are dropped,
// as write_pct_config does. c.mu must be held; the caller saves.
func (p *ctPower) applyPendingLocked(g *Guest) pendingOutcome {
	out := pendingOutcome{Errors: map[string]string{}}
	fail := func(opt string, err error) {
		msg := fmt.Sprintf("unable to apply pending change %s : %s", opt, errText(err))
		out.Errors[opt] = msg
		out.Log = append(out.Log, strings.TrimRight(msg, "\n"))
	}

	for _, opt := range slices.Sorted(maps.Keys(g.PendingDelete)) {
		var err error
		switch {
		case strings.HasPrefix(opt, "mp") && isVolumeKey(opt):
			if mp, perr := ParseMountPoint(opt, g.Config[opt]); perr == nil && mp.Type() == "volume" && g.Config[opt] != "" {
				_, err = configAddUnused(g.Config, mp.Volume())
			}
		case strings.HasPrefix(opt, "unused") && isVolumeKey(opt):
			volid := g.Config[opt]
			if volid != "" && ClassifyMountPoint(volid) == "volume" && !volumeInUse(g, volid, true, true) {
				out.Log = append(out.Log, p.deleteMountpointVolumeLocked(g, volid)...)
			}
		}
		if err != nil {
			fail(opt, err)
			continue
		}
		delete(g.Config, opt)
		delete(g.PendingDelete, opt)
	}

	// cleanup_pending: drop no-op changes and deletes of unset options.
	for opt, val := range g.Pending {
		if cur, ok := g.Config[opt]; ok && cur == val {
			delete(g.Pending, opt)
		}
	}
	for opt := range g.PendingDelete {
		if _, ok := g.Config[opt]; !ok {
			delete(g.PendingDelete, opt)
		}
	}

	for _, opt := range slices.Sorted(maps.Keys(g.Pending)) {
		var err error
		switch {
		case strings.HasPrefix(opt, "mp") && isVolumeKey(opt):
			err = p.applyPendingMountLocked(g, opt)
		case strings.HasPrefix(opt, "net") && keyIndex(opt) >= 0:
			if n, perr := ParseNet(g.Pending[opt]); perr == nil {
				g.Pending[opt] = n.String()
			}
		}
		if err != nil {
			fail(opt, err)
			continue
		}
		g.Config[opt] = g.Pending[opt]
		delete(g.Pending, opt)
	}
	pruneUsedUnused(g.Config)
	if len(g.Pending) == 0 {
		g.Pending = nil
	}
	if len(g.PendingDelete) == 0 {
		g.PendingDelete = nil
	}
	return out
}

// applyPendingMountLocked is apply_pending_mountpoint for a stopped CT: a
// STORAGE:SIZE volume is allocated (create_disks) and the pending value
// rewritten to name it; an existing volume has its size rescanned. The
// volume the key held before becomes unusedN.
func (p *ctPower) applyPendingMountLocked(g *Guest, opt string) error {
	st := p.state()
	mp, err := ParseMountPoint(opt, g.Pending[opt])
	if err != nil {
		return Failf("%s\n", err)
	}
	if mp.Type() == "volume" {
		if sid, sizeGiB, ok := ParseNewDisk(mp.Volume()); ok {
			bytes := int64(sizeGiB*1024) * 1024 * kib
			v, err := p.storage.allocVolumeLocked(g.Node, sid, g.VMID, bytes, "rootdir")
			if err != nil {
				return err
			}
			mp.Props["volume"] = v.VolID()
			mp.Props["size"] = pvesize.Format(bytes)
		} else if v := st.Volumes[st.volKey(g.Node, mp.Volume())]; v != nil {
			mp.Props["size"] = pvesize.Format(v.Size)
		}
		// PVE warns "Could not rescan volume size - <err>" when the rescan
		// fails and keeps the given size; an unknown volume keeps it too.
	}
	return pendMountLocked(g, opt, mp)
}

// deleteMountpointVolumeLocked is delete_mountpoint_volume: free volid if
// g owns it (by name), else PVE's "isn't the owner" warning.
func (p *ctPower) deleteMountpointVolumeLocked(g *Guest, volid string) []string {
	st := p.state()
	sid, name, ok := ParseVolID(volid)
	if !ok {
		return nil
	}
	owner := VolumeOwner(name)
	if v := st.Volumes[st.volKey(g.Node, volid)]; v != nil && v.Owner != 0 {
		owner = v.Owner
	}
	if owner != g.VMID {
		return []string{fmt.Sprintf("ignore deletion of '%s', CT %d isn't the owner!", volid, g.VMID)}
	}
	if st.storage(sid) == nil {
		return []string{fmt.Sprintf("storage '%s' does not exist", sid)}
	}
	if err := p.storage.freeVolumeLocked(g.Node, volid); err != nil {
		return []string{strings.TrimRight(errText(err), "\n")}
	}
	return nil
}

// maxUnused is the number of unusedN keys (unused0..unused255).
const maxUnused = 256

// configAddUnused is add_unused_volume: record volid under the lowest free
// unusedN of conf, unless an unusedN already holds it.
func configAddUnused(conf map[string]string, volid string) (string, error) {
	key := ""
	for i := maxUnused - 1; i >= 0; i-- {
		k := "unused" + strconv.Itoa(i)
		if v, ok := conf[k]; ok && v != "" {
			if v == volid {
				return k, nil
			}
		} else {
			key = k
		}
	}
	if key == "" {
		return "", Failf("Too many unused volumes - please delete them first.\n")
	}
	conf[key] = volid
	return key, nil
}

// pruneUsedUnused drops unusedN entries whose volume rootfs or an mpN of
// conf uses (write_pct_config, LXC/Config.pm; behaviour.md (d)).
func pruneUsedUnused(conf map[string]string) {
	used := map[string]bool{}
	for _, mp := range mountPoints(conf) {
		if mp.Type() == "volume" {
			used[mp.Volume()] = true
		}
	}
	for k, v := range conf {
		if strings.HasPrefix(k, "unused") && isVolumeKey(k) && used[v] {
			delete(conf, k)
		}
	}
}

// volumeInUse is is_volume_in_use: does rootfs or an mpN of g's config
// (and, if asked, of its pending section and snapshots) use volid?
func volumeInUse(g *Guest, volid string, snapshots, pending bool) bool {
	confs := []map[string]string{g.Config}
	if pending {
		confs = append(confs, g.Pending)
	}
	if snapshots {
		for _, s := range g.Snapshots {
			confs = append(confs, s.Config)
		}
	}
	for _, conf := range confs {
		for _, mp := range mountPoints(conf) {
			if mp.Type() == "volume" && mp.Volume() == volid {
				return true
			}
		}
	}
	return false
}

// errText is an error's message as PVE would print it, newline kept.
func errText(err error) string { return PerlText(err) }
