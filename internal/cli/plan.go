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

func newPlanCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var rerun rerunFlag
	var recoverOffline bool
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
them; the exit status is about the named apps only. An app the manifest
does not declare is refused, and so is an app that needs a left-out
change to happen first (another app's interrupted restore, a change to
the container owning a volume it takes).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, names []string) error {
			ctx, cancel := readOnly(cmd.Context())
			defer cancel()
			var j *job
			err := interruptible(ctx, func() (err error) {
				j, err = openJob(ctx, st, ff, cf)
				return err
			})
			if err != nil {
				return err
			}
			defer j.Close()
			f, s, asJSON := j.f, j.s, j.asJSON
			rr, err := rerun.resolve(f)
			if err != nil {
				return err
			}
			if err := checkTargets(f, names); err != nil {
				return err
			}
			p, _, pj, err := makePlanFor(ctx, s, f, planOpts{rerun: rr, recoverOffline: recoverOffline, targets: names})
			if pj != nil {
				if asJSON {
					ui.WritePlanJSON(st.out, *pj)
				} else {
					ui.WritePlanText(st.out, *pj)
				}
			}
			if err != nil {
				return redactErr(f, err)
			}
			if !p.Converged() { // changes, or apps it could not check
				return &exitError{code: ExitChanges}
			}
			return nil
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	rerun.add(cmd.Flags())
	cmd.Flags().BoolVar(&recoverOffline, "recover", false, recoverUsage)
	return cmd
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
}

// makePlanFor observes the cluster and plans f against it as o says.
func makePlanFor(ctx context.Context, s *session, f *manifest.File, o planOpts) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error) {
	obs, err := apply.Observe(ctx, s.client)
	if err != nil {
		return nil, nil, nil, err
	}
	obs.Recover = o.recoverOffline
	apps := withRerun(plan.FromManifest(f), o.rerun)
	if o.shape != nil {
		if apps, err = o.shape.apps(apps, obs); err != nil {
			return nil, nil, nil, err
		}
	}
	p, err := plan.Make(apps, obs)
	if p != nil && o.shape != nil {
		o.shape.keep(p)
	}
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
