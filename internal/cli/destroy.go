package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

type destroyArgs struct {
	ff            fileFlags
	cf            connFlags
	lf            lockFlags
	parallelism   int
	failFast      bool
	autoApprove   bool
	deleteVolumes bool
}

func newDestroyCmd(st *streams) *cobra.Command {
	a := &destroyArgs{ff: fileFlags{lazy: true}} // destroy provisions nothing: it needs no secret
	cmd := &cobra.Command{
		Use:         "destroy [APP...]",
		Annotations: jsonForm(),
		Short:       "Remove the apps' containers; their volumes stay in the keeper",
		Long: `destroy stops and removes the containers of the manifest's apps (or only
of the apps named). Their volumes are detached first and stay in the node's
keeper container, so the next apply finds the same data.

An app removed from the manifest can be named too, while a container of
this project (tag corral-project-<project>) carries it; apply would
destroy it the same way. So can a copy made by restore --as with this
manifest (apply leaves copies alone), and a container with no project tag.

Volumes are freed only with --delete-volumes, and then only those whose
manifest entry says reclaim: delete. Retained volumes are never freed;
corral volumes rm and corral volumes prune free volumes on purpose.`,
		RunE: func(cmd *cobra.Command, args []string) error { return runDestroy(cmd, st, a, args) },
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	a.lf.add(cmd.Flags())
	cmd.Flags().IntVar(&a.parallelism, "parallelism", 10, "how many apps to change at once (1: one after another)")
	cmd.Flags().BoolVar(&a.failFast, "fail-fast", false, "start no further app once one failed (by default the others go on)")
	cmd.Flags().BoolVar(&a.autoApprove, "auto-approve", false, "destroy without asking (needed when stdin is not a terminal)")
	cmd.Flags().BoolVar(&a.deleteVolumes, "delete-volumes", false, "also free volumes marked reclaim: delete (retained volumes are never freed)")
	return cmd
}

// check refuses flags that cannot work, before anything is read.
func (a *destroyArgs) check() error {
	if err := a.lf.check(); err != nil {
		return err
	}
	if a.parallelism < 1 {
		return fmt.Errorf("--parallelism %d: want 1 or more", a.parallelism)
	}
	return nil
}

func runDestroy(cmd *cobra.Command, st *streams, a *destroyArgs, names []string) error {
	if err := a.check(); err != nil {
		return err
	}
	start, ctx := time.Now(), cmd.Context()
	j, err := openJob(ctx, st, a.ff, a.cf)
	if err != nil {
		return err
	}
	defer j.Close()
	// Its plans and its checks read the nodes, bridges and storages once.
	j.s.client.MemoizeSetup()
	obs, err := apply.ObserveWith(ctx, j.s.client, destroyObserve)
	if err != nil {
		return err
	}
	apps, err := plan.DestroyTargets(j.f, obs, names)
	if err != nil {
		return err
	}
	p, perr := plan.Destroy(apps, obs, a.deleteVolumes)
	p.NoteLeftOut(j.f, obs, names)
	rep := ui.DestroyReport{Out: st.out, Err: st.err, JSON: j.asJSON, Plan: ui.NewPlanJSON(p, plan.Problems(perr))}
	rep.Plan.LeftOutCommand = "corral destroy"
	redactPlan(j.f, &rep.Plan)
	rep.WritePlan()
	if perr != nil {
		rep.WriteUnchanged()
		return errors.New("destroy refused; nothing was changed (see the refused lines)")
	}
	if !p.HasChanges() {
		return rep.WriteUnchanged()
	}
	if err := approve(st, a.autoApprove, ui.DestroyQuestion()); err != nil {
		return err
	}
	ex := &apply.Executor{Client: j.s.client, Observer: newRedactObserver(j.f, &ui.Progress{W: st.err}), Parallelism: a.parallelism, FailFast: a.failFast, Stop: stopOf(ctx)}
	p, freed, err := destroyUnderLock(ctx, st, j.s, ex, j.f, a, apps, obs, p, func() { rep.WriteTimings(ex.Timings(), time.Since(start)) })
	if err != nil {
		return err
	}
	return rep.WriteDone(p.Destroyed(), freed)
}

// destroyUnderLock plans the destroy again under corral's lock on the
// nodes p changes, so that what is destroyed is read while no other
// corral can change it (finishing an interrupted restore first), and
// carries that plan out, then calls timings. It returns the plan carried
// out and the volumes freed.
func destroyUnderLock(ctx context.Context, st *streams, s *session, ex *apply.Executor, f *manifest.File, a *destroyArgs,
	apps []plan.App, obs *plan.Observed, p *plan.Plan, timings func()) (*plan.Plan, []string, error) {
	lock, err := lockNodes(ctx, st, ex, obs, p.Nodes(), "destroy", a.lf, nil)
	if err != nil {
		return nil, nil, redactErr(f, err)
	}
	defer lock.release()
	// The snapshot guard of ex.Destroy takes the listing of the plan
	// made here, with nothing written between (apply.KeepListing).
	ctx = apply.KeepListing(lock.ctx)
	if obs, err = apply.ObserveWith(ctx, s.client, destroyObserve); err != nil {
		return nil, nil, err
	}
	if obs.Interrupted() {
		// Finishing a move or a restore may create a container.
		if err := apply.ObserveSetup(ctx, s.client, obs); err != nil {
			return nil, nil, err
		}
		if err := ex.Recover(ctx, obs); err != nil {
			return nil, nil, redactErr(f, err)
		}
		if obs, err = apply.ObserveWith(ctx, s.client, destroyObserve); err != nil {
			return nil, nil, err
		}
	}
	if p, err = plan.Destroy(apps, obs, a.deleteVolumes); err != nil {
		return nil, nil, fmt.Errorf("destroy refused after the cluster changed; nothing was changed: %w", redactErr(f, err))
	}
	// Its last keeper write, a free's, also releases the lease where
	// that keeper holds it: nothing is written after it (issue 30).
	freed, err := ex.Destroy(apply.EndLeaseInLastWrite(ctx, lock.lock), p, obs)
	timings()
	if err != nil {
		return nil, nil, fmt.Errorf("destroy stopped: %w\nrun `corral destroy` again to finish", redactErr(f, err))
	}
	return p, freed, nil
}

// writeJSON prints v as indented JSON on stdout.
func writeJSON(st *streams, v any) error {
	enc := json.NewEncoder(st.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// destroyObserve is how destroy reads the cluster: the HA rules only
// when a container is an HA resource, since a destroy adds nothing to
// HA and takes a container out of the rules that list it; and no
// bridge, template or storage list, which only a create or a move is
// checked against (the storages the keepers' records name are read:
// a freed volume's size comes from there). The lock reads the setup if
// it must create a keeper, and so does destroy before it finishes an
// interrupted operation (issue 30).
var destroyObserve = apply.ObserveOptions{NoHA: true, DeferSetup: true}
