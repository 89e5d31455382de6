package cli

import (
	"context"
	"errors"

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
		Use:         "plan",
		Annotations: jsonForm(),
		Short:       "Show what apply would change, read from the live cluster",
		Long: `plan compares the manifest with the live cluster (there is no state file)
and prints what apply would do. Exit status: 0 no changes, 2 changes
present (or apps it could not check because their node is offline, named
in the plan), 1 error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			p, _, pj, err := makePlanRerun(ctx, s, f, rr, recoverOffline)
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
	return makePlanRerun(ctx, s, f, nil, false)
}

// makePlanRerun is makePlan with steps to run again although unchanged
// (--rerun), by app, and with recoverOffline (--recover) the consent to
// build apps whose node is offline anew on another node.
func makePlanRerun(ctx context.Context, s *session, f *manifest.File, rerun map[string][]string, recoverOffline bool) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error) {
	return makePlanShaped(ctx, s, f, rerun, recoverOffline, nil)
}

// makePlanShaped is makePlanRerun for a command that changes only part of
// the manifest's apps in its own way (corral move, corral drain): shape
// sets their node before planning, and keeps only their changes.
func makePlanShaped(ctx context.Context, s *session, f *manifest.File, rerun map[string][]string, recoverOffline bool, shape *planShape) (*plan.Plan, *plan.Observed, *ui.PlanJSON, error) {
	obs, err := apply.Observe(ctx, s.client)
	if err != nil {
		return nil, nil, nil, err
	}
	obs.Recover = recoverOffline
	apps := withRerun(plan.FromManifest(f), rerun)
	if shape != nil {
		if apps, err = shape.apps(apps, obs); err != nil {
			return nil, nil, nil, err
		}
	}
	p, err := plan.Make(apps, obs)
	if p != nil && shape != nil {
		shape.keep(p)
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
	pj := ui.NewPlanJSON(p, nil)
	redactPlan(f, &pj)
	return p, obs, &pj, nil
}
