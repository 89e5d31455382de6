package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	a := &destroyArgs{}
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

func runDestroy(cmd *cobra.Command, st *streams, a *destroyArgs, names []string) error {
	if err := a.lf.check(); err != nil {
		return err
	}
	if a.parallelism < 1 {
		return fmt.Errorf("--parallelism %d: want 1 or more", a.parallelism)
	}
	start := time.Now()
	a.ff.lazy = true // destroy provisions nothing: it needs no secret
	j, err := openJob(cmd.Context(), st, a.ff, a.cf)
	if err != nil {
		return err
	}
	defer j.Close()
	// Its plans and its checks read the nodes, bridges and storages once.
	j.s.client.MemoizeSetup()
	f, s, asJSON := j.f, j.s, j.asJSON
	ctx := cmd.Context()
	ex := &apply.Executor{Client: s.client, Observer: newRedactObserver(f, &ui.Progress{W: st.err}), Parallelism: a.parallelism, FailFast: a.failFast, Stop: stopOf(ctx)}
	obs, err := apply.ObserveWith(ctx, s.client, destroyObserve)
	if err != nil {
		return err
	}
	apps, err := destroyApps(f, obs, names)
	if err != nil {
		return err
	}
	p, perr := plan.Destroy(apps, obs, a.deleteVolumes)
	var refused []string
	var rerr *plan.RefusedError
	if errors.As(perr, &rerr) {
		refused = rerr.Problems
	}
	leftOut(p, f, obs, names)
	pj := ui.NewPlanJSON(p, refused)
	pj.LeftOutCommand = "corral destroy"
	redactPlan(f, &pj)
	if !asJSON {
		ui.WritePlanText(st.out, pj)
	}
	if perr != nil {
		if asJSON {
			writeJSON(st, map[string]any{"plan": pj, "destroyed": []int{}, "freed": []string{}})
		}
		return errors.New("destroy refused; nothing was changed (see the refused lines)")
	}
	if !p.HasChanges() {
		if asJSON {
			return writeJSON(st, map[string]any{"plan": pj, "destroyed": []int{}, "freed": []string{}})
		}
		return nil
	}
	if !a.autoApprove {
		if err := confirm(st, "Destroy these containers?", "the plan above (`corral destroy` prints it and asks)"); err != nil {
			return err
		}
	}
	p, freed, err := destroyUnderLock(ctx, st, s, ex, f, a, apps, obs, p, func() {
		if !asJSON {
			ui.WriteTimings(st.err, ex.Timings(), time.Since(start))
		}
	})
	if err != nil {
		return err
	}
	return reportDestroyed(st, asJSON, pj, p, freed)
}

// leftOut notes in p, when names narrow a destroy, the manifest's other
// apps that have containers (a whole destroy would remove them) and how
// many containers they have.
func leftOut(p *plan.Plan, f *manifest.File, obs *plan.Observed, names []string) {
	if len(names) == 0 || p == nil {
		return
	}
	p.Targets = slices.Clone(names)
	for _, a := range f.Apps {
		if n := len(obs.Apps[a.Name]); n > 0 && !slices.Contains(names, a.Name) {
			p.LeftOut = append(p.LeftOut, a.Name)
			p.LeftOutChanges += n
		}
	}
}

// destroyApps are the apps destroy removes: the manifest's, or only those
// named. A name the manifest does not declare is taken while a container
// of the project carries it (an app removed from the manifest, a copy
// restored with --as), or a container with no project tag (made before
// projects, or a copy restored by an older corral): this manifest takes
// it on purpose.
func destroyApps(f *manifest.File, obs *plan.Observed, names []string) ([]plan.App, error) {
	apps := plan.FromManifest(f)
	if len(names) > 0 {
		apps = slices.DeleteFunc(apps, func(a plan.App) bool { return !slices.Contains(names, a.Name) })
	}
	for _, n := range names {
		if _, ok := f.App(n); ok {
			continue
		}
		if vm := projectVM(obs, n, f.Project); vm != nil {
			apps = append(apps, *vm) // vmbackup.go: a VM copy restored --as
			continue
		}
		if !slices.ContainsFunc(obs.Apps[n], func(ct *plan.CT) bool { return ct.Project == f.Project || ct.Project == "" }) {
			return nil, fmt.Errorf("app %q is not in %s, and no container of project %s (tag %s%s) carries it; check the name (`corral status` lists the project's apps)", n, f.Path, f.Project, plan.TagProjectPrefix, f.Project)
		}
		for _, ct := range obs.Apps[n] {
			if why := plan.RemovedElsewhere(n, ct, f.Project, f.Origin, f.ProjectSet); ct.Project == f.Project && why != "" {
				return nil, errors.New(why)
			}
		}
		apps = append(apps, plan.App{Name: n, Project: f.Project})
	}
	return apps, nil
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
	ctx = lock.ctx
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
	freed, err := ex.Destroy(ctx, p, obs)
	timings()
	if err != nil {
		return nil, nil, fmt.Errorf("destroy stopped: %w\nrun `corral destroy` again to finish", redactErr(f, err))
	}
	return p, freed, nil
}

// reportDestroyed says what the destroy plan p (shown as pj) removed and
// freed.
func reportDestroyed(st *streams, asJSON bool, pj ui.PlanJSON, p *plan.Plan, freed []string) error {
	destroyed := []int{}
	for _, c := range p.Changes {
		if c.Action == plan.Delete && c.OldVMID != 0 {
			destroyed = append(destroyed, c.OldVMID)
		}
	}
	if freed == nil {
		freed = []string{}
	}
	if asJSON {
		return writeJSON(st, map[string]any{"plan": pj, "destroyed": destroyed, "freed": freed})
	}
	fmt.Fprintf(st.err, "\nDestroyed %d container(s); %d volume(s) freed; every other volume is kept in the keeper.\n", len(destroyed), len(freed))
	return nil
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
