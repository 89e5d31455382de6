package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

type applyArgs struct {
	ff           fileFlags
	cf           connFlags
	lf           lockFlags
	parallelism  int
	failFast     bool
	autoApprove  bool
	verbose      bool
	lockWait     time.Duration
	trustHostKey bool
	noPreflight  bool
	rerun        rerunFlag
	// shape narrows the plan to a move or a drain (nil: the manifest).
	shape *planShape
	// recoverOffline: --recover, build apps whose node is offline anew
	// on another node (shared storage only).
	recoverOffline bool
	// targets are the apps named on the command line (corral apply
	// APP…): only they and what they need are changed (plan.Target).
	targets []string
	// saved is the plan file named on the command line (corral apply
	// FILE, at savedPath): apply carries out exactly that plan, or
	// refuses.
	saved     *savedPlan
	savedPath string
}

func newApplyCmd(st *streams) *cobra.Command {
	a := &applyArgs{}
	cmd := &cobra.Command{
		Use:         "apply [APP... | FILE]",
		Annotations: jsonForm(),
		Short:       "Make the cluster match the manifest",
		Long: `apply plans like 'corral plan', shows the plan, asks for confirmation
(or takes --auto-approve) and carries it out. Retained volumes are never
freed: a container that must be replaced is destroyed only after its
volumes are safe in the node's keeper container.

Progress goes to stderr; with -o json, stdout carries one JSON event per
line (plan, step_start, step_end, task_log, warning, summary).

Interrupting apply (Ctrl-C) stops after the current step; running apply
again picks up where it stopped.

--recover starts an app whose node is offline on another node, when every
volume of it is on shared storage: a new container (new VMID) that mounts
the same volumes. Proxmox VE HA would move the container itself, but it
needs Sys.Console and fencing; corral has neither, so YOU must make sure
the offline node stays down (powered off or fenced) until the next apply
after its return, which removes the stale copy first: if that node comes
back and starts its copy (onboot), both containers mount the same volumes.

Naming apps (corral apply web db) changes only them and what they need
(the keeper work on their nodes), as 'corral plan web db' shows; the
other apps are left as they are, and the plan says how many of their
changes it left out. "Apply complete" then means a fresh plan of the
named apps is empty. The preflight checks the named apps only, and
another app's refused plan does not stop them (a warning names it). An
app the manifest does not declare is refused, and so is an app that
needs a left-out change to happen first.

'corral apply FILE' carries out a plan saved by 'corral plan --out FILE'
(an argument with a dot or a slash is a plan file: app names have
neither), without asking, with that plan's manifest, app names, --rerun
and --recover. It plans again first, and again under the lock, and
refuses (changing nothing, and naming what differs) unless both plans
are the saved one, the containers it was planned against are unchanged,
and so are the manifest and the secrets it reads.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.takeArgs(cmd.Flags(), args); err != nil {
				return err
			}
			return runApply(cmd, st, a)
		},
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	a.lf.add(cmd.Flags())
	cmd.Flags().IntVar(&a.parallelism, "parallelism", 10, "how many apps to change at once (1: one after another)")
	cmd.Flags().BoolVar(&a.failFast, "fail-fast", false, "start no further app once one failed (by default the others go on)")
	cmd.Flags().BoolVar(&a.autoApprove, "auto-approve", false, "apply without asking (needed when stdin is not a terminal)")
	cmd.Flags().BoolVarP(&a.verbose, "verbose", "v", false, "show every Proxmox task log line")
	cmd.Flags().DurationVar(&a.lockWait, "lock-wait", 2*time.Minute, "how long to wait for a container locked by another operation")
	cmd.Flags().BoolVar(&a.noPreflight, "skip-preflight", false, "do not run doctor's checks (privileges, storages, template, space) before changing anything")
	a.rerun.add(cmd.Flags())
	cmd.Flags().BoolVar(&a.recoverOffline, "recover", false, recoverUsage)
	cmd.Flags().BoolVar(&a.trustHostKey, "trust-host-key", false, "accept a container's SSH host key when corral has none pinned (it pins one when it creates a container)")
	return cmd
}

// recoverUsage is the --recover flag's help, for plan and apply.
const recoverUsage = "start apps whose node is offline on another node, as new containers with the same volumes (every volume must be on shared storage; the offline node must stay down until the next apply removes its stale copy)"

// applyRun is one corral apply under way: what runApply's steps share.
type applyRun struct {
	st     *streams
	a      *applyArgs
	f      *manifest.File
	s      *session
	ex     *apply.Executor
	events *ui.JSONEvents // nil: text
	// makePlan plans as this apply does (its --rerun steps, --recover,
	// move or drain shape, named apps).
	makePlan planFunc
}

func runApply(cmd *cobra.Command, st *streams, a *applyArgs) error {
	if err := a.check(); err != nil {
		return err
	}
	start := time.Now()
	ctx := cmd.Context()
	// Until the plan is made nothing changes, so the first Ctrl-C or
	// SIGTERM stops reading the manifest, the preflight and the first
	// plan at once (rctx); from the lock on, it lets the step under way
	// finish (ctx).
	rctx, rcancel := readOnly(ctx)
	defer rcancel()
	j, err := openJobInterruptible(rctx, st, a.ff, a.cf)
	if err != nil {
		return err
	}
	defer j.Close()
	// The preflight, the plan shown, the plan under the lock and the
	// final check read the nodes, bridges and storages once (issue 30).
	j.s.client.MemoizeSetup()
	r, err := newApplyRun(ctx, st, a, j)
	if err != nil {
		return err
	}
	p, obs, pj, err := r.firstPlan(ctx, rctx)
	if err != nil || !p.HasChanges() {
		return err
	}
	if err := approve(st, a.autoApprove, ui.ApplyQuestion()); err != nil {
		return err
	}
	changed, err := applyUnderLock(ctx, st, r.s, r.f, r.ex, a, r.makePlan, p, obs, pj, r.showPlan)
	if !changed {
		return err
	}
	return r.finish(time.Since(start), err)
}

// check refuses flag values apply cannot work with.
func (a *applyArgs) check() error {
	if err := a.lf.check(); err != nil {
		return err
	}
	if a.parallelism < 1 {
		return fmt.Errorf("--parallelism %d: want 1 or more", a.parallelism)
	}
	if a.lockWait < 0 {
		return fmt.Errorf("--lock-wait %s: want 0 or more", a.lockWait)
	}
	return nil
}

// takeArgs sorts apply's arguments: app names, or one saved plan file
// (isPlanPath), whose manifest, app names, --rerun and --recover it
// takes.
func (a *applyArgs) takeArgs(fs *pflag.FlagSet, args []string) error {
	var files []string
	for _, arg := range args {
		if isPlanPath(arg) {
			files = append(files, arg)
		} else {
			a.targets = append(a.targets, arg)
		}
	}
	if len(files) == 0 {
		return nil
	}
	if len(files) > 1 || len(a.targets) > 0 {
		return errPlanAndApps
	}
	sp, err := readSavedPlan(files[0])
	if err != nil {
		return err
	}
	for _, flag := range []string{"file", "rerun", "recover"} {
		if fs.Changed(flag) {
			return fmt.Errorf("apply %s: --%s: a saved plan carries its own manifest, app names, --rerun and --recover; leave the flag out", files[0], flag)
		}
	}
	a.ff.path, a.ff.overrides, a.targets, a.rerun, a.recoverOffline = sp.Manifest, sp.Overrides, sp.Targets, sp.Rerun, sp.Recover
	a.autoApprove, a.saved, a.savedPath = true, sp, files[0]
	return nil
}

// newApplyRun checks the named apps and the --rerun steps against the
// manifest j read, sets up the executor and its observer, and refuses an
// embedded emulator that will start no container (guestsRefused).
func newApplyRun(ctx context.Context, st *streams, a *applyArgs, j *job) (*applyRun, error) {
	f, s := j.f, j.s
	rerun, err := a.rerun.resolve(f)
	if err != nil {
		return nil, err
	}
	if err := checkTargets(f, a.targets); err != nil {
		return nil, err
	}
	if a.saved != nil {
		diffs, err := a.saved.staleManifest(f)
		if err != nil {
			return nil, err
		}
		if len(diffs) > 0 {
			return nil, staleError(a.savedPath, diffs)
		}
	}
	o := planOpts{rerun: rerun, recoverOffline: a.recoverOffline, shape: a.shape, targets: a.targets}
	r := &applyRun{st: st, a: a, f: f, s: s, makePlan: func(ctx context.Context, s *session, f *manifest.File) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error) {
		return makePlanFor(ctx, s, f, o)
	}}
	r.ex = &apply.Executor{Client: s.client, Secrets: secrets(f), LockWait: a.lockWait, Guest: plan.GuestWorks(f, rerun), Parallelism: a.parallelism, FailFast: a.failFast, Stop: stopOf(ctx), Project: f.Project}
	var observer apply.Observer = &ui.Progress{W: st.err, TaskLogs: a.verbose}
	if j.asJSON {
		r.events = &ui.JSONEvents{W: st.out}
		observer = r.events
	}
	r.ex.Observer = newRedactObserver(f, observer)
	if err := s.guestsRefused(); err != nil {
		return nil, err
	}
	return r, nil
}

// preflight runs the same checks as corral doctor (unless
// --skip-preflight), on the named apps only when apps are named: a 403
// halfway through an apply is the most common failure in this field, so
// find it before anything changes. firstPlan runs it once the first plan
// has changes, or failed (then its findings say why better than the
// plan's error), before that plan is shown; a plan without changes
// changes nothing and needs none of it (issue 30).
func (r *applyRun) preflight(ctx context.Context) error {
	if r.a.noPreflight {
		return nil
	}
	if err := doctor.Preflight(ctx, r.s.client, onlyApps(r.f, r.a.targets)); err != nil {
		var blocked *doctor.BlockedError
		if errors.As(err, &blocked) { // says preflight and what to do itself
			return fmt.Errorf("%w\n(--skip-preflight skips these checks)", redactErr(r.f, err))
		}
		return fmt.Errorf("preflight: %w\nnothing was changed; `corral doctor` explains, --skip-preflight skips these checks", redactErr(r.f, err))
	}
	return nil
}

// onlyApps is f with only the apps named (f itself when none are): what
// a targeted apply checks before it changes anything.
func onlyApps(f *manifest.File, names []string) *manifest.File {
	if len(names) == 0 {
		return f
	}
	g := *f
	g.Apps = slices.DeleteFunc(slices.Clone(f.Apps), func(a manifest.App) bool { return !slices.Contains(names, a.Name) })
	return &g
}

// showPlan prints a plan: a plan event under -o json, text otherwise.
func (r *applyRun) showPlan(pj *ui.PlanJSON) {
	if pj == nil {
		return
	}
	if r.events != nil {
		r.events.Emit("plan", map[string]any{"plan": pj})
	} else {
		ui.WritePlanText(r.st.out, *pj)
	}
}

// firstPlan plans, runs the preflight when the plan has changes (or
// failed), and shows the plan, to be approved; once approved,
// applyUnderLock locks the nodes it changes and plans again under the
// lock. A plan without changes ends the run here (p.HasChanges is false;
// the error says whether apps could not be checked).
func (r *applyRun) firstPlan(ctx, rctx context.Context) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error) {
	// The preflight lists the guests and the token's permissions again
	// right after the first plan: it takes that plan's answers (issue
	// 30). The hand-over ends once the preflight has run.
	r.s.client.HandOverReads(!r.a.noPreflight)
	defer r.s.client.HandOverReads(false)
	p, obs, pj, err := r.makePlan(rctx, r.s, r.f)
	if err != nil || p.HasChanges() {
		if perr := r.preflight(rctx); perr != nil {
			return nil, nil, nil, perr
		}
	}
	r.showPlan(pj)
	if err != nil {
		return nil, nil, nil, redactErr(r.f, err)
	}
	if !p.HasChanges() {
		// Another corral holding the lock on a node of these apps may be
		// changing them right now (a shutdown under way is not yet in the
		// config this plan read): "no changes" is said only once it is
		// done, from a plan made under the lock.
		if leased := leasedNodes(p, obs); len(leased) > 0 {
			lock, err := lockNodes(ctx, r.st, r.ex, obs, leased, "apply", r.a.lf, p)
			if err != nil {
				return nil, nil, nil, redactErr(r.f, err)
			}
			p, obs, pj, err = r.makePlan(lock.ctx, r.s, r.f)
			lock.release()
			if err != nil {
				r.showPlan(pj)
				return nil, nil, nil, redactErr(r.f, err)
			}
			if p.HasChanges() {
				if err := r.preflight(rctx); err != nil {
					return nil, nil, nil, err
				}
				r.showPlan(pj)
			}
		}
	}
	if err := r.a.checkSaved(p, pj, false); err != nil {
		return nil, nil, nil, err
	}
	if p.HasChanges() {
		return p, obs, pj, nil
	}
	if r.events != nil {
		r.events.Emit("summary", map[string]any{"changed": false, "complete": p.Converged()})
	}
	if len(p.Unchecked) > 0 {
		return p, obs, pj, uncheckedError(p)
	}
	return p, obs, pj, nil
}

// finish reports how an apply that changed the cluster ended (err from
// applyUnderLock), after total: the summary event or the timings, and
// "Apply complete" only when a fresh plan was empty.
func (r *applyRun) finish(total time.Duration, err error) error {
	if r.events != nil {
		ev := map[string]any{"changed": true, "ok": err == nil, "complete": err == nil, "elapsed_ms": total.Milliseconds(), "timings": timingsJSON(r.ex.Timings())}
		if err != nil {
			ev["error"] = r.f.Redact(err.Error())
		}
		r.events.Emit("summary", ev)
	} else {
		ui.WriteTimings(r.st.err, r.ex.Timings(), total)
	}
	var incomplete *IncompleteError
	if errors.As(err, &incomplete) {
		return err
	}
	if err != nil {
		return fmt.Errorf("apply stopped: %w\nrun `corral apply` again to resume; `corral plan` shows what is left", redactErr(r.f, err))
	}
	if r.events == nil {
		ui.WriteApplyComplete(r.st.err, total)
	}
	return nil
}

// checkSaved refuses a plan made now (p, pj; underLock: under corral's
// lock) that is not the saved plan apply was given (nil when none was).
func (a *applyArgs) checkSaved(p *plan.Plan, pj *ui.PlanJSON, underLock bool) error {
	if a.saved == nil {
		return nil
	}
	if diffs := a.saved.stalePlan(p, pj, underLock); len(diffs) > 0 {
		return staleError(a.savedPath, diffs)
	}
	return nil
}

// leasedNodes are the nodes of p's apps (their containers, and the
// keepers recording their volumes) on which a corral holds the lock.
func leasedNodes(p *plan.Plan, obs *plan.Observed) []string {
	var out []string
	for _, c := range p.Changes {
		for _, node := range []string{c.Node, c.From} {
			if node == "" || slices.Contains(out, node) {
				continue
			}
			for _, k := range obs.Keepers[node] {
				if k.Lease != nil {
					out = append(out, node)
					break
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// planFunc observes the cluster and plans f against it (makePlan).
type planFunc func(ctx context.Context, s *session, f *manifest.File) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error)

// secrets maps each app with a root password to it, for the executor.
func secrets(f *manifest.File) map[string]string {
	out := map[string]string{}
	for _, a := range f.Apps {
		if !a.Password.IsZero() {
			out[a.Name] = a.Password.Reveal()
		}
	}
	return out
}

func timingsJSON(ts []apply.Timing) []map[string]any {
	out := []map[string]any{}
	for _, t := range ts {
		out = append(out, map[string]any{"app": t.App, "phase": t.Phase, "elapsed_ms": t.Elapsed.Milliseconds()})
	}
	return out
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// sameChanges reports whether two plans change the apps the same way
// (keeper work aside: taking the lock may have made a keeper).
func sameChanges(a, b *ui.PlanJSON) bool { return sameJSON(a.Changes, b.Changes) }

// applyUnderLock carries out an approved plan: it takes corral's lock on
// the nodes p changes, plans again under it (finishing an interrupted
// restore first), and applies that plan. corral apply and corral agent's
// reconcile mode both come here, so they exclude each other through the
// same lock. changed is false when nothing was applied: an error before
// any change, or another corral made the changes meanwhile.
// makePlan is how it plans again (corral apply's --rerun steps
// included).
//
// Once the plan is carried out it plans again on fresh reads, still under
// the lock (convergeUnderLock): the run succeeds only when that plan is
// empty.
func applyUnderLock(ctx context.Context, st *streams, s *session, f *manifest.File, ex *apply.Executor, a *applyArgs,
	makePlan planFunc, p *plan.Plan, obs *plan.Observed, pj *ui.PlanJSON, showPlan func(*ui.PlanJSON)) (changed bool, err error) {
	var lock *held
	defer func() { lock.release() }()
	base := ctx
	var nodes []string
	recovered := false
	for attempt := 0; ; attempt++ {
		nodes = p.Nodes()
		if lock, err = lockNodes(base, st, ex, obs, nodes, "apply", a.lf, p); err != nil {
			return false, redactErr(f, err)
		}
		ctx = lock.ctx
		approved := pj
		// Corral's guests are where the approved plan saw them, or the
		// plan reads the tasks of the nodes it finds them on too.
		p, obs, pj, err = makePlan(apply.ExpectGuestsOn(ctx, apply.GuestNodes(obs)), s, f)
		if err == nil {
			if err := a.checkSaved(p, pj, true); err != nil {
				return false, err
			}
		}
		if err == nil && obs.Interrupted() {
			// An interrupted restore first, then the plan for what it left.
			if err := ex.Recover(ctx, obs); err != nil {
				return false, redactErr(f, err)
			}
			recovered = true
			p, obs, pj, err = makePlan(ctx, s, f)
		}
		if err != nil {
			showPlan(pj)
			return false, redactErr(f, err)
		}
		if !p.HasChanges() {
			if recovered {
				// The restore it finished was the change.
				return true, convergeUnderLock(ctx, st, s, f, ex, a, nodes, nil, nil, showPlan)
			}
			ui.WriteChangedMeanwhile(st.err)
			return false, nil
		}
		if !sameChanges(approved, pj) {
			showPlan(pj)
			if !a.autoApprove {
				return false, errors.New("the cluster changed between the plan you approved and now (shown above); nothing was changed: run apply again to review the new plan")
			}
		}
		if subset(p.Nodes(), nodes) || attempt == 3 {
			break
		}
		lock.release()
		lock = nil
	}
	if ex.SSH, err = sshConfig(s, a.trustHostKey); err != nil {
		return false, err
	}
	return true, convergeUnderLock(ctx, st, s, f, ex, a, nodes, p, obs, showPlan)
}

// maxFinishRounds bounds how many plans one apply carries out when each
// finishes interrupted work that kept the next one back.
const maxFinishRounds = 3

// convergeUnderLock carries out p (when not nil), then plans again on
// fresh reads, as `corral plan` would, under the lock still held on
// nodes. An empty plan is the only success. A plan that finished work an
// interrupted run left (a move, a restore) is followed by the manifest's
// other changes in the same run, shown first (and confirmed, without
// --auto-approve). Anything else left is an IncompleteError.
func convergeUnderLock(ctx context.Context, st *streams, s *session, f *manifest.File, ex *apply.Executor, a *applyArgs,
	nodes []string, p *plan.Plan, obs *plan.Observed, showPlan func(*ui.PlanJSON)) error {
	for round := 1; ; round++ {
		if p != nil {
			if err := ex.Apply(ctx, p, obs); err != nil {
				return err
			}
		}
		// No --rerun here: the steps it named have just run.
		next, nobs, npj, err := makePlanFor(expectAfter(ctx, p, obs), s, f, planOpts{recoverOffline: a.recoverOffline, shape: a.shape, targets: a.targets, haUnchanged: haQuiet(p, obs)})
		if err != nil {
			showPlan(npj)
			return &IncompleteError{Why: "planning again on fresh reads after the changes failed: " + redactErr(f, err).Error()}
		}
		if !next.HasChanges() {
			if len(next.Unchecked) > 0 {
				return uncheckedError(next)
			}
			return nil
		}
		finished := p == nil || p.FinishesInterrupted()
		switch {
		case !finished:
			showPlan(npj)
			return &IncompleteError{Why: "every step succeeded, but a fresh plan still shows the changes above; corral should have made them: run corral apply again, and report it if they come back"}
		case round == maxFinishRounds:
			showPlan(npj)
			return &IncompleteError{Why: fmt.Sprintf("after %d rounds of finishing interrupted work a fresh plan still shows the changes above: run corral apply again", round)}
		case !subset(next.Nodes(), nodes):
			showPlan(npj)
			return &IncompleteError{Why: "the interrupted work is finished; the manifest's other changes (above) need nodes this run did not lock: run corral apply again"}
		}
		ui.WriteInterruptedWorkFinished(st.err)
		showPlan(npj)
		if !a.autoApprove {
			if err := confirm(st, ui.ApplyMoreQuestion()); err != nil {
				return &IncompleteError{Why: "the changes above were not approved"}
			}
		}
		p, obs = next, nobs
	}
}

// expectAfter is ctx telling the final check where corral's guests are
// once p, planned on obs, is carried out: where obs saw them and on the
// nodes p changes (apply.ExpectGuestsOn). With no plan carried out (an
// interrupted restore finished), ctx as it is.
func expectAfter(ctx context.Context, p *plan.Plan, obs *plan.Observed) context.Context {
	if p == nil {
		return ctx
	}
	nodes := apply.GuestNodes(obs)
	for _, n := range p.Nodes() {
		if !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	return apply.ExpectGuestsOn(ctx, nodes)
}

// IncompleteError is an apply whose steps ran but after which a fresh plan
// is not empty: it never ends in "Apply complete" or exit 0.
type IncompleteError struct{ Why string }

func (e *IncompleteError) Error() string { return "apply incomplete: " + e.Why }

// uncheckedError is the IncompleteError of a plan that left apps alone
// because their node is offline.
func uncheckedError(p *plan.Plan) error {
	var why []string
	for _, u := range p.Unchecked {
		why = append(why, u.String())
	}
	return &IncompleteError{Why: "corral could not check every app, so it cannot say the cluster matches the manifest: " + strings.Join(why, "; ") + "; run corral apply again once the node is back (or see corral apply --recover)"}
}
