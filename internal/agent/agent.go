package agent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/localfile"
	"github.com/corralhq/corral/internal/manifest"
)

// Ops is what the agent does to the cluster. The command line implements
// it with the code of corral status, apply, restart and backup, so that
// the agent takes the same lock as a human's run and changes nothing a
// human's run would not.
type Ops interface {
	// Load reads and validates the manifest.
	Load() (*manifest.File, error)
	// Observe reads the cluster and plans f against it.
	Observe(ctx context.Context, f *manifest.File) (*Observation, error)
	// Reconcile applies f under corral's lock. When another corral holds
	// the lock it fails at once with a *apply.LockHeldError: the agent
	// never waits for, nor fights, a human's run.
	Reconcile(ctx context.Context, f *manifest.File) (changed bool, err error)
	// Check runs the named health check of app once, inside its running
	// container.
	Check(ctx context.Context, f *manifest.File, app AppView, check string) error
	// Restart restarts app's container under corral's lock.
	Restart(ctx context.Context, f *manifest.File, app string) error
	// Backup backs app up as corral backup does, keep pruning included.
	Backup(ctx context.Context, f *manifest.File, app string) (*apply.BackupResult, error)
	// Archives lists the backup archives of every app.
	Archives(ctx context.Context) ([]apply.Archive, error)
}

// Mode is what the agent does about drift.
type Mode string

const (
	// Observe only reports drift (events and metrics).
	Observe Mode = "observe"
	// Reconcile applies the manifest when the cluster drifted.
	Reconcile Mode = "reconcile"
)

// Config configures an Agent.
type Config struct {
	// Path is the manifest file; a change of its content is planned at
	// once.
	Path     string
	Mode     Mode
	Interval time.Duration // between plans (default 1m)
	// HealthFailures is how many consecutive failures of a health check
	// restart the app; 0 takes the check's retries+1 from the manifest.
	HealthFailures int
	// RestartBackoff is the wait after a restart before the app may be
	// restarted again; it doubles on each restart up to RestartBackoffMax
	// and starts over once the app is healthy (defaults 1m and 1h).
	RestartBackoff, RestartBackoffMax time.Duration
	// Now is the clock (default time.Now); tests move it by hand.
	Now func() time.Time
	// Stop, once closed, ends Run after the step under way.
	Stop <-chan struct{}
	Log  *slog.Logger
	// Git, when set, is where the manifest comes from (Path is in its
	// checkout): pulled when a plan is due, a new commit planned at once.
	Git *Git
}

// Agent is corral agent's controller: one round (Tick) plans, checks
// health and takes the scheduled backups that are due; Run repeats it.
// Everything is done from one goroutine, one step at a time, so that a
// stop request always finds a step boundary soon.
type Agent struct {
	cfg     Config
	ops     Ops
	Events  *Events
	metrics *agentMetrics

	mu       sync.Mutex // guards everything below (the HTTP server reads it)
	f        *manifest.File
	sum      [32]byte // of the manifest file last read
	read     bool     // sum is set
	obs      *Observation
	obsErr   string
	lastPlan time.Time
	nextPlan time.Time
	drift    map[string]string // app → drift last reported
	// fileErr is the last failure to read the manifest file, reported once.
	fileErr string
	// reconcileErr is the last reconcile failure, reported once.
	reconcileErr string
	checks       map[checkKey]*checkState
	apps         map[string]*appState
	// manifestErr is why the manifest file last read did not load, or
	// "" (Status shows it, or fileErr while the file cannot be read).
	manifestErr string
	// invalid: the manifest file on disk did not load (the last valid
	// one is in force).
	invalid bool
	// git: the commit in force, the newest fetched, the last pull and
	// its failure (reported once).
	gitCommit, gitHead string
	gitPull            time.Time
	gitErr             string
}

type checkKey struct{ app, check string }

type checkState struct {
	next     time.Time
	failures int
	status   string
	err      string
	lastRun  time.Time
}

type appState struct {
	restarts     int
	backoff      time.Duration
	restartAfter time.Time
	// window is the start of the schedule window whose backup is done
	// (or failed: a failed scheduled backup is retried in the next
	// window, not every round).
	window      time.Time
	backupRetry time.Time
	lastBackup  *BackupView
	lastOK      time.Time
}

// New makes an agent. It reads nothing until the first Tick.
func New(cfg Config, ops Ops) *Agent {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.RestartBackoff <= 0 {
		cfg.RestartBackoff = time.Minute
	}
	if cfg.RestartBackoffMax < cfg.RestartBackoff {
		cfg.RestartBackoffMax = max(time.Hour, cfg.RestartBackoff)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Mode == "" {
		cfg.Mode = Observe
	}
	a := &Agent{cfg: cfg, ops: ops, Events: NewEvents(200, cfg.Log),
		drift: map[string]string{}, checks: map[checkKey]*checkState{}, apps: map[string]*appState{}}
	a.metrics = newMetrics(a)
	return a
}

func (a *Agent) now() time.Time { return a.cfg.Now() }

func (a *Agent) event(kind, level, app, format string, args ...any) {
	a.Events.Add(Event{Time: a.now(), Kind: kind, Level: level, App: app, Message: fmt.Sprintf(format, args...)})
}

func (a *Agent) stopped() bool {
	select {
	case <-a.cfg.Stop:
		return true
	default:
		return false
	}
}

// pollEvery is how often Run wakes up: to see a changed manifest, and
// for the health checks and backups that fall due.
const pollEvery = time.Second

// Run repeats Tick until Stop is closed or ctx is done, and returns nil:
// a stop request lets the step under way finish (the lock it holds is
// released by that step) and then ends the agent.
func (a *Agent) Run(ctx context.Context) error {
	a.event(KindLifecycle, "info", "", "agent started in %s mode (plans every %s, manifest %s)", a.cfg.Mode, a.cfg.Interval, a.cfg.Path)
	for {
		a.Tick(ctx)
		t := time.NewTimer(pollEvery)
		select {
		case <-a.cfg.Stop:
			t.Stop()
			a.event(KindLifecycle, "info", "", "agent stopped on request")
			return nil
		case <-ctx.Done():
			t.Stop()
			a.event(KindLifecycle, "info", "", "agent stopped: %v", ctx.Err())
			return nil
		case <-t.C:
		}
	}
}

// Tick does one round at the agent's clock: reload a changed manifest,
// plan when the interval is up (reconciling in reconcile mode), run the
// health checks that are due (restarting an app that failed too often)
// and take the scheduled backups that are due.
func (a *Agent) Tick(ctx context.Context) {
	if a.cfg.Git != nil && (a.manifest() == nil || !a.now().Before(a.nextPlanAt())) {
		a.pull(ctx)
	}
	changed := a.reload()
	a.gitApplied()
	if a.manifest() == nil {
		return
	}
	if changed || !a.now().Before(a.nextPlanAt()) {
		a.plan(ctx)
	}
	if a.stopped() || ctx.Err() != nil {
		return
	}
	a.health(ctx)
	if a.stopped() || ctx.Err() != nil {
		return
	}
	a.backups(ctx)
}

func (a *Agent) manifest() *manifest.File {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f
}

func (a *Agent) nextPlanAt() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nextPlan
}

// reload loads the manifest when its content changed (or was never
// loaded). An invalid manifest is reported and the last valid one kept.
func (a *Agent) reload() bool {
	data, err := a.readManifest()
	if err != nil {
		// Reported once; the last valid manifest stays in force (a file
		// being replaced by an editor or a git checkout is briefly gone).
		a.mu.Lock()
		same := a.fileErr == err.Error()
		a.fileErr = err.Error()
		head, commit := a.gitHead, a.gitCommit
		if a.cfg.Git != nil {
			// The commit fetched is not applied, and whatever it is
			// next is loaded afresh.
			a.invalid, a.read = true, false
		}
		a.mu.Unlock()
		switch {
		case same:
		case a.cfg.Git != nil:
			a.event(KindManifest, "error", "", "the manifest at git commit %s cannot be read (%s): %v", short(head), keepCommit(commit), err)
		default:
			a.event(KindManifest, "error", "", "read the manifest: %v (keeping the last valid one)", err)
		}
		return false
	}
	sum := sha256.Sum256(data)
	a.mu.Lock()
	a.fileErr = ""
	same := a.read && sum == a.sum
	a.mu.Unlock()
	if same {
		return false
	}
	f, err := a.ops.Load()
	a.mu.Lock()
	first := a.f == nil
	a.sum, a.read = sum, true // an invalid file is reported once, not every second
	if err == nil {
		a.f = f
	}
	a.mu.Unlock()
	a.mu.Lock()
	a.invalid = err != nil
	a.manifestErr = ""
	if err != nil {
		a.manifestErr = err.Error()
	}
	head, commit := a.gitHead, a.gitCommit
	a.mu.Unlock()
	if err != nil {
		if a.cfg.Git != nil {
			a.event(KindManifest, "error", "", "the manifest at git commit %s is not valid (%s): %v", short(head), keepCommit(commit), err)
			return false
		}
		a.event(KindManifest, "error", "", "the manifest is not valid, keeping the last valid one: %v", err)
		return false
	}
	if a.cfg.Git != nil && head != commit {
		a.event(KindManifest, "info", "", "manifest %s at git commit %s loaded: %d apps, planning now", a.cfg.Git.Path, short(head), len(f.Apps))
		return true
	}
	if first {
		a.event(KindManifest, "info", "", "manifest %s loaded: %d apps", a.cfg.Path, len(f.Apps))
	} else {
		a.event(KindManifest, "info", "", "manifest %s changed: planning now", a.cfg.Path)
	}
	return true
}

// keepCommit says which commit's manifest stays in force.
func keepCommit(commit string) string {
	if commit == "" {
		return "no valid manifest yet"
	}
	return "keeping commit " + short(commit)
}

// readManifest reads the manifest file to see whether it changed. From
// a Git checkout it is read as the manifest is loaded: inside the
// checkout only, so that a manifest committed as a link to a host file
// or a device is neither read nor waited on.
func (a *Agent) readManifest() ([]byte, error) {
	if a.cfg.Git != nil {
		return localfile.ReadIn(a.cfg.Git.Dir, manifest.ConfineExclude, a.cfg.Path, localfile.MaxManifest)
	}
	return localfile.Read(a.cfg.Path, localfile.MaxManifest)
}

// plan reads the cluster, reports drift and, in reconcile mode, applies.
func (a *Agent) plan(ctx context.Context) {
	f := a.manifest()
	now := a.now()
	a.mu.Lock()
	a.nextPlan = now.Add(a.cfg.Interval)
	a.mu.Unlock()
	obs, ok := a.observe(ctx, f)
	if !ok {
		return
	}
	a.reportDrift(obs)
	if a.cfg.Mode != Reconcile || obs.InSync || a.stopped() {
		return
	}
	start := time.Now()
	changed, err := a.ops.Reconcile(ctx, f)
	a.metrics.operation("reconcile", time.Since(start))
	var held *apply.LockHeldError
	switch {
	case errors.As(err, &held):
		a.metrics.reconciles.With("skipped").Inc()
		a.event(KindSkipped, "warn", "", "reconcile skipped this round: %s holds corral's lock on node %s (a human's run is never interrupted; the next round tries again)", held.Lease, held.Node)
		return
	case errors.Is(err, apply.ErrStopped):
		a.metrics.reconciles.With("stopped").Inc()
		a.event(KindReconcile, "warn", "", "reconcile stopped on request after the step under way; the next run goes on")
	case err != nil:
		a.metrics.reconciles.With("error").Inc()
		// The same failure every round is one event (and a log line each
		// round at debug level), not a flood.
		a.mu.Lock()
		same := a.reconcileErr == err.Error()
		a.reconcileErr = err.Error()
		a.mu.Unlock()
		if same {
			a.cfg.Log.Debug("reconcile failed again", "error", err)
		} else {
			a.event(KindError, "error", "", "reconcile failed: %v", err)
		}
	case changed:
		a.clearReconcileErr()
		a.metrics.reconciles.With("applied").Inc()
		a.event(KindReconcile, "info", "", "reconciled: %s", driftSummary(obs))
	default:
		a.metrics.reconciles.With("nothing").Inc()
		a.event(KindReconcile, "info", "", "another corral made the changes meanwhile; nothing left to do")
	}
	if obs, ok := a.observe(ctx, f); ok {
		a.reportDrift(obs)
	}
}

func (a *Agent) clearReconcileErr() {
	a.mu.Lock()
	a.reconcileErr = ""
	a.mu.Unlock()
}

// observe reads the cluster and keeps what it read for the API.
func (a *Agent) observe(ctx context.Context, f *manifest.File) (*Observation, bool) {
	start := time.Now()
	obs, err := a.ops.Observe(ctx, f)
	a.metrics.operation("observe", time.Since(start))
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.metrics.apiErrors.With("observe").Inc()
		msg := err.Error()
		if a.obsErr != msg {
			a.Events.Add(Event{Time: a.now(), Kind: KindError, Level: "error", Message: "read the cluster: " + msg})
		}
		a.obsErr = msg
		return nil, false
	}
	a.obs, a.obsErr, a.lastPlan = obs, "", a.now()
	return obs, true
}

// reportDrift records an event for each app whose drift changed since
// the last plan.
func (a *Agent) reportDrift(obs *Observation) {
	for _, app := range obs.Apps {
		key := app.Drift + ": " + strings.Join(app.DriftReasons, "; ")
		a.mu.Lock()
		prev, seen := a.drift[app.Name]
		a.drift[app.Name] = key
		a.mu.Unlock()
		if seen && prev == key || !seen && app.Drift == "no-op" {
			continue
		}
		if app.Drift == "no-op" {
			a.event(KindInSync, "info", app.Name, "app %s matches the manifest again", app.Name)
			continue
		}
		what := app.Drift
		if len(app.DriftReasons) > 0 {
			what += ": " + strings.Join(app.DriftReasons, "; ")
		}
		a.event(KindDrift, "warn", app.Name, "app %s drifted from the manifest (%s)", app.Name, what)
	}
}

func driftSummary(obs *Observation) string {
	var parts []string
	for _, app := range obs.Apps {
		if app.Drift != "no-op" {
			parts = append(parts, app.Name+" ("+app.Drift+")")
		}
	}
	if len(parts) == 0 {
		return "keepers repaired"
	}
	return strings.Join(parts, ", ")
}

// appView returns the last observed view of app.
func (a *Agent) appView(name string) (AppView, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.obs == nil {
		return AppView{}, false
	}
	for _, v := range a.obs.Apps {
		if v.Name == name {
			return v, true
		}
	}
	return AppView{}, false
}

func (a *Agent) app(name string) *appState {
	s, ok := a.apps[name]
	if !ok {
		s = &appState{backoff: a.cfg.RestartBackoff}
		a.apps[name] = s
	}
	return s
}

func (a *Agent) check(app, name string) *checkState {
	k := checkKey{app, name}
	s, ok := a.checks[k]
	if !ok {
		s = &checkState{status: "unknown"}
		a.checks[k] = s
	}
	return s
}

// failuresToRestart is N: how many consecutive failures of chk restart
// its app.
func (a *Agent) failuresToRestart(chk manifest.Check) int {
	if a.cfg.HealthFailures > 0 {
		return a.cfg.HealthFailures
	}
	return chk.Retries + 1
}

// health runs the checks that are due, each on its own interval, and
// restarts an app one of whose checks failed N times in a row, no sooner
// than its backoff allows.
func (a *Agent) health(ctx context.Context) {
	f := a.manifest()
	for _, m := range f.Apps {
		if len(m.Health) == 0 {
			continue
		}
		view, ok := a.appView(m.Name)
		if !ok || view.State != "running" {
			continue
		}
		var failing *manifest.Check
		for i, chk := range m.Health {
			if a.stopped() || ctx.Err() != nil {
				return
			}
			now := a.now()
			a.mu.Lock()
			cs := a.check(m.Name, chk.Name)
			due := !now.Before(cs.next)
			a.mu.Unlock()
			if due {
				a.runCheck(ctx, f, view, chk, now)
			}
			a.mu.Lock()
			if cs.failures >= a.failuresToRestart(chk) && failing == nil {
				failing = &m.Health[i]
			}
			a.mu.Unlock()
		}
		if failing != nil {
			a.restart(ctx, f, m, *failing)
		}
	}
}

func (a *Agent) runCheck(ctx context.Context, f *manifest.File, view AppView, chk manifest.Check, now time.Time) {
	interval := checkInterval(chk)
	start := time.Now()
	err := a.ops.Check(ctx, f, view, chk.Name)
	a.metrics.operation("health_check", time.Since(start))
	if ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	cs := a.check(view.Name, chk.Name)
	cs.next, cs.lastRun = now.Add(interval), now
	prev := cs.status
	if err == nil {
		cs.failures, cs.status, cs.err = 0, "healthy", ""
		as := a.app(view.Name)
		if a.appHealthyLocked(view.Name) {
			as.backoff = a.cfg.RestartBackoff
		}
	} else {
		cs.failures++
		cs.status, cs.err = "unhealthy", err.Error()
	}
	failures := cs.failures
	a.mu.Unlock()
	switch {
	case err != nil:
		a.metrics.healthFailures.With(view.Name).Inc()
		if failures == 1 {
			a.event(KindHealth, "warn", view.Name, "health check %q of app %s failed: %v", chk.Name, view.Name, err)
		}
	case prev == "unhealthy":
		a.event(KindHealth, "info", view.Name, "health check %q of app %s passes again", chk.Name, view.Name)
	}
}

// checkInterval is how often the agent runs chk: its interval.
func checkInterval(chk manifest.Check) time.Duration {
	if chk.Interval > 0 {
		return chk.Interval
	}
	return 3 * time.Second
}

// appHealthyLocked reports whether every check of app that ran passed.
func (a *Agent) appHealthyLocked(app string) bool {
	for k, cs := range a.checks {
		if k.app == app && cs.failures > 0 {
			return false
		}
	}
	return true
}

func (a *Agent) restart(ctx context.Context, f *manifest.File, m manifest.App, chk manifest.Check) {
	now := a.now()
	a.mu.Lock()
	as := a.app(m.Name)
	wait := as.restartAfter
	failures := a.check(m.Name, chk.Name).failures
	a.mu.Unlock()
	if now.Before(wait) {
		return
	}
	a.event(KindRestart, "warn", m.Name, "restarting app %s: health check %q failed %d times in a row", m.Name, chk.Name, failures)
	start := time.Now()
	err := a.ops.Restart(ctx, f, m.Name)
	a.metrics.operation("restart", time.Since(start))
	var held *apply.LockHeldError
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case errors.As(err, &held):
		as.restartAfter = now.Add(a.cfg.Interval)
		a.metrics.restarts.With(m.Name, "skipped").Inc()
		a.Events.Add(Event{Time: now, Kind: KindSkipped, Level: "warn", App: m.Name,
			Message: fmt.Sprintf("restart of app %s postponed: %s holds corral's lock on node %s", m.Name, held.Lease, held.Node)})
		return
	case err != nil:
		a.metrics.restarts.With(m.Name, "error").Inc()
		a.Events.Add(Event{Time: now, Kind: KindError, Level: "error", App: m.Name,
			Message: fmt.Sprintf("restart of app %s failed (next try in %s): %v", m.Name, as.backoff, err)})
	default:
		as.restarts++
		a.metrics.restarts.With(m.Name, "ok").Inc()
		a.Events.Add(Event{Time: now, Kind: KindRestart, Level: "info", App: m.Name,
			Message: fmt.Sprintf("app %s restarted (restart %d; no further restart for %s)", m.Name, as.restarts, as.backoff)})
	}
	as.restartAfter = now.Add(as.backoff)
	as.backoff = min(2*as.backoff, a.cfg.RestartBackoffMax)
	// The checks start counting afresh against the restarted container,
	// each after its interval (the guest needs a moment to come up).
	for _, chk := range m.Health {
		cs := a.check(m.Name, chk.Name)
		cs.failures, cs.next = 0, now.Add(checkInterval(chk))
	}
}

// backups takes each scheduled backup that is due: one per app and
// schedule window. A window whose backup exists already (an archive
// corral made in it, found on the storages) is done, so an agent
// restarted inside a window does not back up twice.
func (a *Agent) backups(ctx context.Context) {
	f := a.manifest()
	var archives []apply.Archive
	listed := false
	for _, m := range f.Apps {
		if m.Backup.Schedule == "" {
			continue
		}
		if a.stopped() || ctx.Err() != nil {
			return
		}
		now := a.now()
		sched, err := cron.ParseStandard(m.Backup.Schedule)
		if err != nil {
			continue // the manifest's validation rejects it first
		}
		w, err := WindowAt(sched, now)
		if err != nil {
			continue
		}
		a.mu.Lock()
		as := a.app(m.Name)
		done := as.window.Equal(w.Start) || now.Before(as.backupRetry)
		a.mu.Unlock()
		if done {
			continue
		}
		view, ok := a.appView(m.Name)
		if !ok || view.VMID == 0 {
			continue // no container (yet): nothing to back up
		}
		if !listed {
			start := time.Now()
			archives, err = a.ops.Archives(ctx)
			a.metrics.operation("list_backups", time.Since(start))
			if err != nil {
				a.metrics.apiErrors.With("list_backups").Inc()
				a.event(KindError, "error", "", "list the backup archives: %v", err)
				return
			}
			listed = true
		}
		if arch, ok := TakenIn(archives, m.Name, w); ok {
			a.mu.Lock()
			as.window = w.Start
			if as.lastBackup == nil || as.lastBackup.Time.Before(arch.Time) {
				as.lastBackup = &BackupView{Time: arch.Time, OK: true, Archive: arch.VolID}
				as.lastOK = arch.Time
			}
			a.mu.Unlock()
			continue
		}
		a.backup(ctx, f, m, w, now)
	}
}

func (a *Agent) backup(ctx context.Context, f *manifest.File, m manifest.App, w Window, now time.Time) {
	start := time.Now()
	res, err := a.ops.Backup(ctx, f, m.Name)
	a.metrics.operation("backup", time.Since(start))
	var held *apply.LockHeldError
	a.mu.Lock()
	as := a.app(m.Name)
	switch {
	case errors.As(err, &held):
		as.backupRetry = now.Add(a.cfg.Interval)
		a.mu.Unlock()
		a.metrics.backups.With(m.Name, "skipped").Inc()
		a.event(KindSkipped, "warn", m.Name, "scheduled backup of app %s postponed: %s holds corral's lock on node %s", m.Name, held.Lease, held.Node)
		return
	case errors.Is(err, apply.ErrStopped) || ctx.Err() != nil:
		a.mu.Unlock()
		return
	case err != nil:
		as.window = w.Start
		as.lastBackup = &BackupView{Time: now, OK: false, Error: err.Error()}
		if res != nil {
			as.lastBackup.Archive = res.Archive
		}
		a.mu.Unlock()
		a.metrics.backups.With(m.Name, "failed").Inc()
		a.event(KindBackup, "error", m.Name, "scheduled backup of app %s FAILED (the next window, from %s, tries again): %v",
			m.Name, w.End.UTC().Format(time.RFC3339), err)
	default:
		as.window = w.Start
		as.lastBackup = &BackupView{Time: now, OK: true, Archive: res.Archive, Pruned: slices.Clone(res.Pruned)}
		as.lastOK = now
		a.mu.Unlock()
		a.metrics.backups.With(m.Name, "ok").Inc()
		msg := fmt.Sprintf("scheduled backup of app %s: %s (%d bytes)", m.Name, res.Archive, res.Size)
		if res.Consistency != "" {
			msg += fmt.Sprintf(", %s: %s", res.Consistency, res.ConsistencyWhy) // a VM's (apply/vmbackup.go)
		}
		if len(res.Pruned) > 0 {
			msg += fmt.Sprintf("; pruned %s (keep %d)", strings.Join(res.Pruned, ", "), m.Backup.Keep)
		}
		a.event(KindBackup, "info", m.Name, "%s", msg)
	}
}

// Status is what the agent knows now: the last read of the cluster with
// its own findings (health, restarts, backups) added.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Status{Mode: string(a.cfg.Mode), Manifest: a.cfg.Path, LastPlan: a.lastPlan, Error: a.obsErr, ManifestError: a.manifestErr, Apps: []AppView{}, Nodes: []NodeView{}, Now: a.now()}
	if a.fileErr != "" {
		st.ManifestError = "read the manifest: " + a.fileErr
	}
	if a.f != nil {
		st.Project = a.f.Project
	}
	st.Git = a.gitView()
	if a.obs == nil {
		return st
	}
	st.InSync = a.obs.InSync
	st.Nodes = append(st.Nodes, a.obs.Nodes...)
	for _, v := range a.obs.Apps {
		v.Checks = []CheckView{}
		if a.f != nil {
			if m, ok := a.f.App(v.Name); ok {
				v.Schedule = m.Backup.Schedule
				for _, chk := range m.Health {
					cs := a.check(v.Name, chk.Name)
					v.Checks = append(v.Checks, CheckView{Name: chk.Name, Status: cs.status, Failures: cs.failures, Error: cs.err, LastRun: cs.lastRun})
				}
			}
		}
		if len(v.Checks) > 0 {
			v.Health = "healthy"
			for _, c := range v.Checks {
				switch {
				case c.Status == "unhealthy":
					v.Health = "unhealthy"
				case c.Status == "unknown" && v.Health == "healthy":
					v.Health = "unknown"
				}
			}
			if v.State != "running" {
				v.Health = "unknown"
			}
			if v.Health == "unhealthy" {
				// An app the agent is restarting for its health is not
				// "in sync", whatever its config says (issue 28).
				st.InSync = false
			}
		}
		as := a.app(v.Name)
		v.Restarts = as.restarts
		if as.lastBackup != nil {
			b := *as.lastBackup
			v.LastBackup = &b
		}
		st.Apps = append(st.Apps, v)
	}
	return st
}
