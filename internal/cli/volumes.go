package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

// freeArgs are the flags of corral volumes rm and prune.
type freeArgs struct {
	ff          fileFlags
	cf          connFlags
	lf          lockFlags
	autoApprove bool
}

func (a *freeArgs) add(cmd *cobra.Command) {
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	a.lf.add(cmd.Flags())
	cmd.Flags().BoolVar(&a.autoApprove, "auto-approve", false, "free without asking (needed when stdin is not a terminal)")
}

func newVolumesRmCmd(st *streams) *cobra.Command {
	a := &freeArgs{}
	cmd := &cobra.Command{
		Use:         "rm VOLID...",
		Annotations: jsonForm(),
		Short:       "Free volumes the keepers hold, for good",
		Long: `rm frees the named volumes: each is deleted from its keeper and its
record dropped, after a plan and a confirmation (--auto-approve). Its data
cannot be recovered.

A kind: vm app's retained disk is freed from its keeper VM, the same way
and with the same checks.

rm refuses, and frees nothing, when a volume is not held by a keeper,
when any guest other than its keeper references it (a container's
rootfs, mpN or unusedN, a VM's drive, or a pending change) or a snapshot
of any container or VM keeps it (remove the snapshot first), when an app of the manifest
declares it (the next apply would make an empty one in its place), or
when it is another project's. corral volumes lists the volumes.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFree(cmd, st, a, "volumes rm", func(project string, apps []plan.App, obs *plan.Observed, refs map[string][]string) (*plan.FreePlan, error) {
				return plan.FreeVolumes(project, apps, obs, args, refs)
			})
		},
	}
	a.add(cmd)
	cmd.ValidArgsFunction = completeVolumeIDs
	return cmd
}

func newVolumesPruneCmd(st *streams) *cobra.Command {
	a := &freeArgs{}
	cmd := &cobra.Command{
		Use:         "prune",
		Annotations: jsonForm(),
		Short:       "Free the volumes of this project that no app of the manifest declares",
		Long: `prune frees every volume a keeper records for this project (the
manifest's project:) that no app of the manifest declares: the volumes of
apps removed from the manifest, of volumes removed from an app, and the
*-replaced-* copies restore --replace keeps; kind: vm apps' retained
disks on the keeper VMs as well. Other projects' volumes are
never pruned; nor are volumes recorded for no app or before projects
existed (prune names them; corral volumes rm frees them).

prune shows its plan and asks first (--auto-approve), and refuses, freeing
nothing, while any guest other than the keeper references one of the
volumes (run corral apply first: it detaches what the manifest no longer
lists) or a snapshot of any container keeps one (remove the snapshot
first: a rollback to it needs the volume).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFree(cmd, st, a, "volumes prune", plan.Prune)
		},
	}
	a.add(cmd)
	return cmd
}

// freePlanner plans a volumes rm or prune.
type freePlanner func(project string, apps []plan.App, obs *plan.Observed, refs map[string][]string) (*plan.FreePlan, error)

// runFree is corral volumes rm and prune: plan, show, confirm, then under
// corral's lock plan again and free exactly what was approved.
func runFree(cmd *cobra.Command, st *streams, a *freeArgs, command string, planner freePlanner) error {
	start := time.Now()
	if err := a.lf.check(); err != nil {
		return err
	}
	a.ff.lazy = true // freeing volumes needs no provisioning value
	j, err := openJob(cmd.Context(), st, a.ff, a.cf)
	if err != nil {
		return err
	}
	defer j.Close()
	r := &freeRun{ctx: cmd.Context(), st: st, j: j, command: command, planner: planner, apps: plan.FromManifest(j.f)}
	p, obs, perr := r.plan()
	var rerr *plan.RefusedError
	if perr != nil && !errors.As(perr, &rerr) {
		return perr
	}
	var refused []string
	if rerr != nil {
		refused = rerr.Problems
	}
	pj := ui.NewFreePlanJSON(p, refused)
	if !j.asJSON {
		ui.WriteFreePlanText(st.out, pj)
	}
	if rerr != nil {
		r.done(pj, []string{})
		return fmt.Errorf("%s refused; nothing was changed (see the refused lines)", command)
	}
	if len(p.Volumes) == 0 && len(p.Reprotect) == 0 {
		return r.done(pj, []string{})
	}
	if !a.autoApprove {
		if err := confirm(st, ui.FreeQuestion(command)); err != nil {
			return err
		}
	}
	return r.free(p, obs, a.lf, pj, start)
}

// freeRun is one corral volumes rm or prune once its job is open: what
// planning it again under the lock needs.
type freeRun struct {
	ctx     context.Context // the lock's, once free holds it
	st      *streams
	j       *job
	command string
	planner freePlanner
	apps    []plan.App
}

// plan reads the cluster and plans what to free: the volumes' references
// from guests first, then, for the volumes that would be freed, from
// snapshots (which keep volumes too), planned again with those.
func (r *freeRun) plan() (*plan.FreePlan, *plan.Observed, error) {
	ctx, c, project := r.ctx, r.j.s.client, r.j.f.Project
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	refs, err := apply.VolumeRefs(ctx, c, obs)
	if err != nil {
		return nil, nil, err
	}
	p, err := r.planner(project, r.apps, obs, refs)
	if err != nil || len(p.Volumes) == 0 {
		return p, obs, err
	}
	snaps, err := apply.SnapshotRefs(ctx, c, p.Volumes)
	if err != nil || len(snaps) == 0 {
		return p, obs, err
	}
	for k, v := range snaps {
		refs[k] = append(refs[k], v...)
	}
	p, err = r.planner(project, r.apps, obs, refs)
	return p, obs, err
}

// done writes -o json's answer: the plan shown and what was freed.
func (r *freeRun) done(pj ui.FreePlanJSON, freed []string) error {
	if r.j.asJSON {
		return writeJSON(r.st, map[string]any{"plan": pj, "freed": freed})
	}
	return nil
}

// free takes corral's lock on the nodes of p (the plan the user
// approved), plans again under it and frees only what was approved: a
// cluster that changed since is refused, with nothing changed.
func (r *freeRun) free(p *plan.FreePlan, obs *plan.Observed, lf lockFlags, pj ui.FreePlanJSON, start time.Time) error {
	f, st, command := r.j.f, r.st, r.command
	ex := &apply.Executor{Client: r.j.s.client, Observer: newRedactObserver(f, &ui.Progress{W: st.err}), Stop: stopOf(r.ctx)}
	lock, err := lockNodes(r.ctx, st, ex, obs, p.Nodes(), command, lf, nil)
	if err != nil {
		return redactErr(f, err)
	}
	defer lock.release()
	r.ctx = lock.ctx
	approved := p.VolIDs()
	p, obs, err = r.plan()
	if err != nil {
		return fmt.Errorf("%s refused after the cluster changed; nothing was changed: %w", command, err)
	}
	if !slices.Equal(p.VolIDs(), approved) {
		return fmt.Errorf("the cluster changed between the plan you approved and now (it would free %v, you approved %v); nothing was changed: run %s again to review the new plan", p.VolIDs(), approved, command)
	}
	freed, err := ex.FreeVolumes(r.ctx, p, obs)
	if !r.j.asJSON {
		ui.WriteTimings(st.err, ex.Timings(), time.Since(start))
	}
	if err != nil {
		return fmt.Errorf("%s stopped after freeing %d volume(s): %w\nrun it again to finish", command, len(freed), redactErr(f, err))
	}
	if !r.j.asJSON {
		ui.WriteFreed(st.err, len(freed))
	}
	return r.done(pj, freed)
}
