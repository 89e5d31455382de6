package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

// planArgs are corral plan's flags and arguments.
type planArgs struct {
	ff             fileFlags
	cf             connFlags
	rerun          rerunFlag
	recoverOffline bool
	// out is the file --out writes the plan to ("": none).
	out   string
	names []string
}

func newPlanCmd(st *streams) *cobra.Command {
	a := &planArgs{}
	cmd := &cobra.Command{
		Use:         "plan [APP...]",
		Annotations: jsonForm(),
		Short:       "Show what apply would change, read from the live cluster",
		Long: `plan compares the manifest with the live cluster (there is no state file)
and prints what apply would do. Exit status: 0 no changes, 2 changes
present (or apps it could not check because their node is offline, named
in the plan), 1 error.

Naming apps (corral plan web db) narrows the plan to them and what they
need: the keeper work on their nodes, an interrupted restore of theirs.
The plan says how many changes to other apps it left out, and names
them; the exit status is about the named apps only. Another app's
refused plan does not stop it: a warning names it. An app the manifest
does not declare is refused, and so is an app that needs a left-out
change to happen first (another app's interrupted restore, a change to
the container owning a volume it takes).

--out FILE also saves the plan (mode 0600, written atomically), for
'corral apply FILE' to carry out exactly that plan, without asking: it
refuses, naming what changed, when a plan made then differs, or a
container, the manifest or a secret it reads changed since. The file
holds no secret value (docs/saved-plan.md has its format). Use a name
with a dot or a slash (web.plan, ./web): app names have neither.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, names []string) error {
			a.names = names
			return runPlan(cmd.Context(), st, a)
		},
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	a.rerun.add(cmd.Flags())
	cmd.Flags().BoolVar(&a.recoverOffline, "recover", false, recoverUsage)
	cmd.Flags().StringVar(&a.out, "out", "", "also save the plan to `FILE`, for corral apply FILE (a name with a dot or a slash)")
	return cmd
}

// check refuses an --out that cannot work, before anything is read.
func (a *planArgs) check() error {
	if a.ff.output == "ut" || strings.HasPrefix(a.ff.output, "ut=") {
		// Terraform's one-dash -out reaches the flag parser as -o ut.
		return errors.New("-out: write --out FILE (two dashes; -o is --output)")
	}
	if a.out != "" && !isPlanPath(a.out) {
		return fmt.Errorf("--out %s: a plan file's name needs a dot or a slash (%s.plan, ./%s), so that `corral apply` cannot take it for an app", a.out, a.out, a.out)
	}
	return nil
}

func runPlan(ctx context.Context, st *streams, a *planArgs) error {
	if err := a.check(); err != nil {
		return err
	}
	ctx, cancel := readOnly(ctx)
	defer cancel()
	j, err := openJobInterruptible(ctx, st, a.ff, a.cf)
	if err != nil {
		return err
	}
	defer j.Close()
	f, s, asJSON := j.f, j.s, j.asJSON
	rr, err := a.rerun.resolve(f)
	if err != nil {
		return err
	}
	if err := checkTargets(f, a.names); err != nil {
		return err
	}
	o := planOpts{rerun: rr, recoverOffline: a.recoverOffline, targets: a.names}
	p, _, pj, err := makePlanFor(ctx, s, f, o)
	if pj != nil {
		ui.WritePlan(st.out, *pj, asJSON)
	}
	if err != nil {
		return redactErr(f, err)
	}
	if a.out != "" {
		if err := savePlan(st, f, o, a.rerun, p, pj, a.out); err != nil {
			return err
		}
	}
	if !p.Converged() { // changes, or apps it could not check
		return &exitError{code: ExitChanges}
	}
	return nil
}

// openJobInterruptible is openJob, stopped at once by ctx (readOnly's:
// nothing changes before the plan is made); see interruptible.
func openJobInterruptible(ctx context.Context, st *streams, ff fileFlags, cf connFlags) (*job, error) {
	return interruptible(ctx, func() (*job, error) { return openJob(ctx, st, ff, cf) })
}

// savePlan writes the plan (p, pj as shown) made with o to path, and says
// so on stderr.
func savePlan(st *streams, f *manifest.File, o planOpts, rerun []string, p *plan.Plan, pj *ui.PlanJSON, path string) error {
	if len(p.Recover) > 0 {
		return fmt.Errorf("--out %s: not saved: an interrupted restore is finished (or rolled back), or an app's rescue ended, first, and the plan after it cannot be known now: run `corral apply` to finish it, then `corral plan --out %s` again", path, path)
	}
	sp, err := newSavedPlan(f, o, rerun, p, pj)
	if err != nil {
		return err
	}
	if err := sp.write(path); err != nil {
		return err
	}
	ui.WritePlanSaved(st.err, path)
	return nil
}

// makePlan observes the cluster and plans the manifest against it. A plan
// the planner refuses still comes back as data (pj) so it can be shown;
// pj has the manifest's secret values redacted, p has them in full.
func makePlan(ctx context.Context, s *session, f *manifest.File) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error) {
	return makePlanFor(ctx, s, f, planOpts{})
}

// makePlanShaped is makePlan, with --rerun and --recover, for a command that changes only part of
// the manifest's apps in its own way (corral move, corral drain): shape
// sets their node before planning, and keeps only their changes.
func makePlanShaped(ctx context.Context, s *session, f *manifest.File, rerun map[string][]string, recoverOffline bool, shape *planShape) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error) {
	return makePlanFor(ctx, s, f, planOpts{rerun: rerun, recoverOffline: recoverOffline, shape: shape})
}

// planOpts are what a plan is made with besides the manifest.
type planOpts struct {
	// rerun: steps to run again although unchanged (--rerun), by app.
	rerun map[string][]string
	// recoverOffline (--recover): the consent to build apps whose node
	// is offline anew on another node.
	recoverOffline bool
	// shape narrows the plan to a move or a drain (nil: the manifest).
	shape *planShape
	// targets narrow the plan to the apps named on the command line and
	// what they need (plan.Target); nil: every app.
	targets []string
	// haUnchanged (the final check of an apply): the plan carried out
	// under the lock saw no container under HA and changed nothing of
	// HA (haQuiet), so HA is not read again.
	haUnchanged bool
}

// makePlanFor observes the cluster and plans f against it as o says.
func makePlanFor(ctx context.Context, s *session, f *manifest.File, o planOpts) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error) {
	// The bridges and templates are read only for a plan with changes
	// (plan.ErrSetupUnread): a no-op plan needs neither (issue 30).
	obs, err := apply.ObserveWith(ctx, s.client, apply.ObserveOptions{NoHA: !asksHA(f), HAUnchanged: o.haUnchanged, DeferSetup: true})
	if err != nil {
		return nil, nil, nil, err
	}
	obs.Recover = o.recoverOffline
	apps := withRerun(plan.FromManifest(f), o.rerun)
	if err := apply.ObserveApps(ctx, s.client, obs, apps); err != nil {
		return nil, nil, nil, err
	}
	if o.shape != nil {
		if apps, err = o.shape.apps(apps, obs); err != nil {
			return nil, nil, nil, err
		}
	}
	p, err := plan.Make(apps, obs)
	if errors.Is(err, plan.ErrSetupUnread) {
		if err := apply.ObserveSetup(ctx, s.client, obs); err != nil {
			return nil, nil, nil, err
		}
		p, err = plan.Make(apps, obs)
	}
	if p != nil && o.shape != nil {
		o.shape.keep(p)
	}
	err = leaveOutRefused(p, err, o.targets)
	var refused *plan.RefusedError
	if errors.As(err, &refused) {
		if p == nil {
			p = &plan.Plan{}
		}
		pj := ui.NewPlanJSON(p, refused.Problems)
		redactPlan(f, &pj)
		return nil, obs, &pj, errors.New("the plan was refused; nothing was changed (see the refused lines above)")
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if err := plan.Target(p, obs, o.targets); err != nil {
		return nil, nil, nil, fmt.Errorf("plan %s: %w", strings.Join(o.targets, " "), redactErr(f, err))
	}
	pj := ui.NewPlanJSON(p, nil)
	redactPlan(f, &pj)
	return p, obs, &pj, nil
}

// leaveOutRefused is the error of a plan (p, err from plan.Make) narrowed
// to targets: the refusals of other apps are left out
// (plan.TargetRefused), each said in a warning of p; the others still
// refuse it.
func leaveOutRefused(p *plan.Plan, err error, targets []string) error {
	var refused *plan.RefusedError
	if len(targets) == 0 || p == nil || !errors.As(err, &refused) {
		return err
	}
	kept, other := plan.TargetRefused(refused.Problems, targets)
	for _, prob := range other {
		p.Warnings = append(p.Warnings, "left out, and refused by a plan of every app: "+prob)
	}
	if len(kept) > 0 {
		return &plan.RefusedError{Problems: kept}
	}
	return nil
}

// checkTargets refuses app names the manifest does not declare, before
// anything is read from the cluster.
func checkTargets(f *manifest.File, names []string) error {
	var unknown []string
	for _, n := range names {
		if _, ok := f.App(n); !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	var known []string
	for _, a := range f.Apps {
		known = append(known, a.Name)
	}
	return fmt.Errorf("app %s: not in %s (its apps: %s); check the name, or add the app to the manifest (`corral destroy APP` removes an app that is no longer in it)",
		strings.Join(unknown, ", "), f.Path, strings.Join(known, ", "))
}

// asksHA says whether an app of f has ha:, so its plans need the
// cluster's HA rules even when no container is an HA resource yet.
func asksHA(f *manifest.File) bool {
	for _, a := range f.Apps {
		if a.HA != nil {
			return true
		}
	}
	return false
}

// haQuiet says that carrying out p, planned on obs, cannot have changed
// the cluster's HA resources as corral sees them: obs read them and
// found no app's container among them, and p changes nothing of HA. The
// final check then need not read them again (issue 30).
func haQuiet(p *plan.Plan, obs *plan.Observed) bool {
	if p == nil || obs == nil || obs.HAUnread != "" {
		return false
	}
	for _, c := range p.Changes {
		if c.HA != nil {
			return false
		}
	}
	for _, cts := range obs.Apps {
		for _, ct := range cts {
			if ct.HA != nil {
				return false
			}
		}
	}
	return true
}
