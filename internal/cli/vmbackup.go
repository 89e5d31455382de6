package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/ui"
)

// runRestoreVM is corral restore for a VM app's archive (issue 34): the
// plan of the restore, the confirmation, then under the lock of the node
// it restores on, the restore planned again on a fresh read and done.
func runRestoreVM(cmd *cobra.Command, st *streams, j *backupJob, a *restoreArgs, opts apply.RestoreOptions) error {
	if !cmd.Flags().Changed("storage") {
		opts.Storage = "" // the archived disks' storage, unless the manifest's VM names one
		for _, name := range []string{opts.App, a.as} {
			if m, ok := j.app(name); ok && m.VM != nil {
				opts.Storage = m.VM.DiskStorage
			}
		}
	}
	ctx := cmd.Context()
	obs, err := apply.Observe(ctx, j.s.client)
	if err != nil {
		return j.err(err)
	}
	rp, err := j.ex.PlanVMRestore(ctx, obs, opts)
	if err != nil {
		return j.err(err)
	}
	ui.WriteVMRestorePlan(st.err, rp)
	if !a.autoApprove {
		if err := confirm(st, ui.RestoreQuestion()); err != nil {
			return err
		}
	}
	lock, err := lockNodes(ctx, st, j.ex, obs, restoreLockNodes(rp.Node, obs), "restore", a.lf, nil)
	if err != nil {
		return j.err(err)
	}
	defer lock.release()
	ctx = lock.ctx
	if obs, err = apply.Observe(ctx, j.s.client); err != nil {
		return j.err(err)
	}
	if obs.Interrupted() {
		// An earlier restore was interrupted: finish or undo it first.
		if err := j.ex.Recover(ctx, obs); err != nil {
			return j.err(err)
		}
		if obs, err = apply.Observe(ctx, j.s.client); err != nil {
			return j.err(err)
		}
	}
	if rp, err = j.ex.PlanVMRestore(ctx, obs, opts); err != nil {
		return j.err(err)
	}
	res, err := j.ex.RestoreVM(ctx, rp)
	if err != nil {
		return j.err(fmt.Errorf("restore stopped: %w", err))
	}
	if j.asJSON {
		return writeJSON(st, res)
	}
	ui.WriteVMRestored(st.out, res)
	return nil
}
