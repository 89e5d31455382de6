package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxTasks bounds the task list kept in the state (PVE rotates its index too).
const maxTasks = 2000

// FormatUPID renders PVE's task id (pve-common PVE::UPID::encode):
// UPID:<node>:<pid %08X>:<pstart %08X>:<starttime %08X>:<type>:<id>:<user>:
func FormatUPID(node string, pid, pstart int, start int64, typ, id, user string) string {
	return fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", node, pid, pstart, start, typ, id, user)
}

// Worker is the handle a task's code runs with: it logs, sleeps on the
// scaled clock and takes the cluster lock for each state change.
type Worker struct {
	c    *Cluster
	t    *Task
	ctx  context.Context
	held []func()
	// subject is the CT a task working on several (vzdump) is at, 0 when
	// its id names the CT.
	subject int
	// flocked are the CTs whose config flock the task holds: the ones it
	// may change.
	flocked []int
}

// Log appends a line to the task log.
func (w *Worker) Log(format string, args ...any) {
	w.c.mu.Lock()
	w.logLocked(format, args...)
	w.c.mu.Unlock()
}

func (w *Worker) logLocked(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.c.markTask(w.t)
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		w.t.Log = append(w.t.Log, line)
	}
}

// Warn logs a "WARN: " line and counts it, so the task ends "WARNINGS: n".
func (w *Worker) Warn(format string, args ...any) {
	w.c.mu.Lock()
	w.t.Warnings++
	w.logLocked("WARN: "+format, args...)
	w.c.mu.Unlock()
}

// errInterrupt is how a PVE worker dies when the daemon stops it
// (fork_worker's INT/TERM handler): the emulator's shutdown.
var errInterrupt = errors.New("received interrupt")

// Sleep waits d (already scaled by the caller via Cluster.duration) or
// until the cluster shuts down.
func (w *Worker) Sleep(d time.Duration) error {
	if w.ctx.Err() != nil {
		return errInterrupt
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-w.ctx.Done():
		return errInterrupt
	}
}

// Phase sleeps the given fraction of the task type's scaled duration.
func (w *Worker) Phase(typ string, fraction float64) error {
	return w.Sleep(time.Duration(float64(w.c.duration(typ)) * fraction))
}

// LockConfig takes the guest's config flock for the rest of the task.
func (w *Worker) LockConfig(vmid int) error {
	release, err := w.c.locks.acquire(w.ctx, vmid, configLockTimeout)
	if err != nil {
		return err
	}
	w.held = append(w.held, release)
	w.flocked = append(w.flocked, vmid)
	return nil
}

// Do runs fn with the cluster mutex held and saves the state afterwards,
// so each step of a worker is atomic and durable.
// A step that started or stopped a CT runs the run hook before it
// returns.
func (w *Worker) Do(fn func(st *State) error) error {
	hook, err := w.do(fn)
	if hook != nil {
		hook()
	}
	return err
}

// do is Do under the cluster lock (released by defer, as fn may panic
// into runWorker's recover); it returns the run hook when fn started or
// stopped a CT.
func (w *Worker) do(fn func(st *State) error) (hook func(), err error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if err := w.ctx.Err(); err != nil {
		return nil, errInterrupt
	}
	changes := w.c.ctPower.runChanges // the starts and stops so far
	w.markSubject()
	err = fn(w.c.st)
	if serr := w.c.saveLocked(); serr != nil && err == nil {
		err = serr
	}
	if w.c.ctPower.runChanges != changes {
		hook = w.c.guests.runHook
	}
	return hook, err
}

// cleanup is Do for the clean-up after a failed step: it runs even when
// the cluster is shutting down, as PVE's eval blocks clean up after the
// worker's "received interrupt", so a stopped emulator leaves no
// half-made guest or stale lock behind. The error is the state save's.
func (w *Worker) cleanup(fn func(st *State)) error {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.markSubject()
	fn(w.c.st)
	return w.c.saveLocked()
}

// markSubject marks the CTs a task works on as changed by the step about
// to run (journal.go): those whose config flock it holds, the one a
// vzdump is at, and the one its id names (every CT task's id is the
// VMID).
func (w *Worker) markSubject() {
	for _, vmid := range w.flocked {
		w.c.markGuest(vmid)
	}
	if w.subject != 0 {
		w.c.markGuest(w.subject)
	}
	if vmid, err := strconv.Atoi(w.t.ID); err == nil {
		w.c.markGuest(vmid)
	}
}

// doGuest is Do for a step on CT vmid of node: fn gets the guest, and a CT
// that is gone (or on another node) fails the step with PVE's message
// for a missing config.
func (w *Worker) doGuest(node string, vmid int, fn func(st *State, g *Guest) error) error {
	return w.Do(func(st *State) error {
		w.c.markGuest(vmid)
		g, err := w.c.guestLocked(node, vmid)
		if err != nil {
			return err
		}
		return fn(st, g)
	})
}

// UPID is the running task's id.
func (w *Worker) UPID() string { return w.t.UPID }

// TaskHook may fail a task on purpose (fault injection). It is called at the
// start of every worker; a non-nil error ends the task with that error.
type TaskHook func(typ, id string) error

// taskRunner runs the cluster's workers and answers for its task list:
// fork_worker (spawn), a task's end (finish), the list, the waits and
// the task durations. It alone writes the State's Tasks and NextPID. The
// list stays in the State (it is saved with it), under the one lock the
// parts share; the runner reaches the rest of the cluster only through
// the fields below. Cluster embeds it, so its methods are the Cluster's
// (c.spawn, c.Task).
type taskRunner struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	// durations and timeScale are Options.Durations and TimeScale.
	durations map[string]time.Duration
	timeScale float64
	// ctx is the cluster's life (a worker's too); wg counts the workers
	// for Close.
	ctx     context.Context
	wg      *sync.WaitGroup
	log     *slog.Logger
	journal taskJournal
	// cluster is handed to each Worker: a task's steps act on every
	// part (its guest, volumes, locks), so a Worker holds the Cluster.
	// The runner itself never calls through it.
	cluster *Cluster
	hook    TaskHook // SetTaskHook; stateMu
}

// taskJournal is what taskRunner needs of persistence: to mark a task
// changed and to save.
type taskJournal interface {
	markTask(t *Task)
	saveLocked() error
}

// SetTaskHook installs h (nil removes it).
func (r *taskRunner) SetTaskHook(h TaskHook) {
	r.stateMu.Lock()
	r.hook = h
	r.stateMu.Unlock()
}

// duration is how long a task of type typ runs at the cluster's time
// scale.
func (r *taskRunner) duration(typ string) time.Duration {
	d, ok := r.durations[typ]
	if !ok {
		d = defaultDurations[typ]
	}
	return time.Duration(float64(d) * r.timeScale)
}

// unscaledDuration is the task type's duration at time scale 1.
func (r *taskRunner) unscaledDuration(typ string) time.Duration {
	if d, ok := r.durations[typ]; ok {
		return d
	}
	return defaultDurations[typ]
}

// scale applies the cluster's time scale to d.
func (r *taskRunner) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * r.timeScale)
}

// spawn registers a task and runs fn in a worker goroutine. c.mu must be
// held by the caller (the synchronous part of the API call); the UPID is
// returned at once, as fork_worker does.
func (r *taskRunner) spawn(auth Auth, node, typ, id string, fn func(w *Worker) error) string {
	now := r.clock()
	pid := r.nextPIDLocked()
	user, token := auth.UserID, ""
	if auth.TokenID != "" {
		_, token, _ = strings.Cut(auth.TokenID, "!")
	}
	t := &Task{
		Node: node, Type: typ, ID: id, User: user, TokenID: token,
		PID: pid, PStart: int(now.Unix()%100000000) + pid - pidBase, StartTime: now.Unix(),
		Status: "running", listed: true, BeganNS: time.Now().UnixNano(),
	}
	t.UPID = FormatUPID(node, t.PID, t.PStart, t.StartTime, typ, id, auth.ID())
	st := r.state()
	st.Tasks = append(st.Tasks, t)
	if len(st.Tasks) > maxTasks {
		for _, old := range st.Tasks[:len(st.Tasks)-maxTasks] {
			old.listed = false
		}
		st.Tasks = slices.Delete(st.Tasks, 0, len(st.Tasks)-maxTasks)
	}
	r.journal.markTask(t)
	hook := r.hook
	w := &Worker{c: r.cluster, t: t, ctx: r.ctx}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		start := time.Now()
		var err error
		if hook != nil {
			err = hook(typ, id)
		}
		if err == nil {
			err = runWorker(w, fn)
		}
		for i := len(w.held) - 1; i >= 0; i-- {
			w.held[i]()
		}
		r.finish(t, err, time.Since(start))
	}()
	return t.UPID
}

// detachedWorker is a Worker outside any task, for a synchronous call
// into steps written for a task (a volume free that logs what lvremove
// prints): its lines collect in a Task no list holds.
func (r *taskRunner) detachedWorker() *Worker {
	return &Worker{c: r.cluster, t: &Task{}, ctx: r.ctx}
}

func runWorker(w *Worker, fn func(w *Worker) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	return fn(w)
}

// pidBase is the first of the emulator's process ids.
const pidBase = 100000

// nextPIDLocked is a new process id, for a task's worker or a started
// CT's init (stateMu held for writing).
func (r *taskRunner) nextPIDLocked() int {
	st := r.state()
	st.NextPID++
	return pidBase + st.NextPID
}

// finish records the task's end: exitstatus OK, WARNINGS: n, or the error
// text, and the closing TASK line (pve-common PVE::UPID read_status).
func (r *taskRunner) finish(t *Task, err error, busy time.Duration) {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	r.journal.markTask(t)
	t.Status = "stopped"
	t.Busy = busy
	t.EndedNS = time.Now().UnixNano()
	t.EndTime = r.clock().Unix()
	switch {
	case err != nil:
		msg := TaskMessage(err)
		t.ExitStatus = msg
		t.Log = append(t.Log, "TASK ERROR: "+msg)
	case t.Warnings > 0:
		t.ExitStatus = fmt.Sprintf("WARNINGS: %d", t.Warnings)
		t.Log = append(t.Log, "TASK "+t.ExitStatus)
	default:
		t.ExitStatus = "OK"
		t.Log = append(t.Log, "TASK OK")
	}
	if serr := r.journal.saveLocked(); serr != nil {
		r.log.Error("save state after task", "upid", t.UPID, "err", serr)
	}
}

// recoverTasks marks tasks whose worker died with the previous process as
// stopped with PVE's "unexpected status", so they are never lost or
// shown running forever.
func (r *taskRunner) recoverTasks(st *State) {
	for _, t := range st.Tasks {
		if t.Status == "running" {
			t.Status = "stopped"
			t.ExitStatus = "unexpected status"
			t.Log = append(t.Log, "TASK ERROR: unexpected status")
		}
	}
}

// Task returns a copy of the task, or an error as GET .../status gives
// for an unknown one (400 {upid: "no such task"}).
func (r *taskRunner) Task(node, upid string) (Task, error) {
	st := r.state()
	r.stateMu.RLock()
	defer r.stateMu.RUnlock()
	for i := len(st.Tasks) - 1; i >= 0; i-- {
		t := st.Tasks[i]
		if t.UPID == upid && t.Node == node {
			cp := *t
			cp.Log = slices.Clone(t.Log)
			return cp, nil
		}
	}
	return Task{}, ParamError(map[string]string{"upid": "no such task"})
}

// Tasks returns copies of the node's tasks, newest first, without logs.
func (r *taskRunner) Tasks(node string) []Task {
	st := r.state()
	r.stateMu.RLock()
	defer r.stateMu.RUnlock()
	var out []Task
	for i := len(st.Tasks) - 1; i >= 0; i-- {
		t := st.Tasks[i]
		if node != "" && t.Node != node {
			continue
		}
		cp := *t
		cp.Log = nil
		out = append(out, cp)
	}
	return out
}

// WaitTask blocks until the task stops or ctx ends (for tests and the
// admin API; clients poll over HTTP).
func (r *taskRunner) WaitTask(ctx context.Context, node, upid string) (Task, error) {
	for {
		t, err := r.Task(node, upid)
		if err != nil || t.Status == "stopped" {
			return t, err
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TaskDuration is how long a task of type typ works at this cluster's
// time scale.
func (r *taskRunner) TaskDuration(typ string) time.Duration { return r.duration(typ) }
