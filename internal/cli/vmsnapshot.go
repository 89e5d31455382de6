package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/ui"
)

// corral snapshot, snapshots and rollback of a kind: vm app (issue 34):
// the same verbs and guards as for a container, on the VM's snapshots
// (apply/vmsnapshots.go says what a VM snapshot holds and why corral
// takes none with the RAM state).

// vmVerb is a snapshot verb's work on a VM app's VM.
type vmVerb func(ctx context.Context, j *backupJob, obs *plan.Observed, vm *plan.VM) error

// withAppOrVM is withApp for the verbs that serve VM apps too: it finds
// the app's one container and calls fn, or, for a kind: vm app, its one
// VM and calls vmFn.
func withAppOrVM(cmd *cobra.Command, st *streams, ff fileFlags, cf connFlags, app string, fn func(ctx context.Context, j *backupJob, obs *plan.Observed, ct *plan.CT) error, vmFn vmVerb) error {
	j, err := openBackupJob(cmd, st, ff, cf)
	if err != nil {
		return err
	}
	defer j.Close()
	ctx := cmd.Context()
	obs, err := apply.Observe(ctx, j.s.client)
	if err != nil {
		return j.err(err)
	}
	if apply.IsVMApp(obs, app) {
		vm, err := apply.AppVM(obs, app)
		if err != nil {
			return err
		}
		return vmFn(ctx, j, obs, vm)
	}
	ct, err := apply.AppCT(obs, app)
	if err != nil {
		return err
	}
	return fn(ctx, j, obs, ct)
}

// snapshotVM is corral snapshot of a VM app: take snapshot args[1] (or
// one named for now) of its VM, without the RAM state, or with del
// remove it.
func snapshotVM(ctx context.Context, st *streams, j *backupJob, vm *plan.VM, args []string, del bool) error {
	app := args[0]
	if del {
		if len(args) != 2 {
			return errors.New("--delete needs the snapshot NAME (corral snapshots lists them)")
		}
		if err := j.ex.Snapshots().DeleteVM(ctx, vm, args[1]); err != nil {
			return j.err(err)
		}
		if j.asJSON {
			return writeJSON(st, map[string]any{"app": app, "kind": "vm", "vmid": vm.VMID, "deleted": args[1]})
		}
		ui.WriteSnapshotDeleted(st.out, app, "vm", vm.VMID, args[1])
		return nil
	}
	name := apply.SnapshotName(time.Now())
	if len(args) == 2 {
		name = args[1]
	}
	if err := j.ex.Snapshots().TakeVM(ctx, vm, name); err != nil {
		if errors.Is(err, pve.ErrSnapshotUnsupported) {
			return j.err(fmt.Errorf("app %s (vm %d) cannot be snapshotted: %w; no snapshot was taken — use `corral backup %s` instead", app, vm.VMID, err, app))
		}
		return j.err(err)
	}
	volumes := map[string]string{} // serial → the app's volume name
	if a, ok := j.app(app); ok {
		for _, v := range a.Volumes {
			volumes[plan.VMVolumeSerial(app, v.Name)] = v.Name
		}
	}
	covers := apply.VMSnapshotCovers(vm, volumes)
	retained := len(plan.VMVolumeDisks(vm.Config)) > 0
	if j.asJSON {
		return writeJSON(st, map[string]any{"app": app, "kind": "vm", "vmid": vm.VMID, "snapshot": name, "ram": false, "covers": covers})
	}
	ui.WriteVMSnapshotTaken(st.out, app, vm.VMID, name, covers, retained)
	return nil
}

// snapshotsVM is corral snapshots of a VM app.
func snapshotsVM(ctx context.Context, st *streams, j *backupJob, app string, vm *plan.VM) error {
	snaps, err := apply.ListVMSnapshots(ctx, j.s.client, vm)
	if err != nil {
		return j.err(err)
	}
	if j.asJSON {
		return writeJSON(st, map[string]any{"app": app, "kind": "vm", "vmid": vm.VMID, "snapshots": snaps})
	}
	if len(snaps) == 0 {
		ui.WriteNoSnapshots(st.out, app, "vm", vm.VMID)
		return nil
	}
	return ui.WriteSnapshots(st.out, snaps)
}

// rollbackVMApp is corral rollback of a VM app: confirm, then under
// corral's lock check and roll its VM back to args[1], which PVE does
// with the VM stopped; it is started again if it ran (or with start).
func rollbackVMApp(ctx context.Context, st *streams, j *backupJob, obs *plan.Observed, vm *plan.VM, args []string, lf lockFlags, start, autoApprove bool) error {
	app, name := args[0], args[1]
	if !autoApprove {
		if err := confirm(st, ui.RollbackQuestion(app, "vm", vm.VMID, name)); err != nil {
			return err
		}
	}
	lock, err := lockNodes(ctx, st, j.ex, obs, []string{vm.Node}, "rollback", lf, nil)
	if err != nil {
		return j.err(err)
	}
	defer lock.release()
	ctx = lock.ctx
	fresh, err := apply.Observe(ctx, j.s.client)
	if err != nil {
		return j.err(err)
	}
	if vm, err = apply.AppVM(fresh, app); err != nil {
		return err
	}
	if err := j.ex.Snapshots().CheckVMRollback(ctx, vm, name); err != nil {
		return j.err(err)
	}
	if err := j.ex.Snapshots().RollbackVM(ctx, vm, name, start || vm.Status == "running"); err != nil {
		return j.err(err)
	}
	if j.asJSON {
		return writeJSON(st, map[string]any{"app": app, "kind": "vm", "vmid": vm.VMID, "snapshot": name})
	}
	ui.WriteRolledBack(st.out, app, "vm", vm.VMID, name)
	return nil
}

// vmSnapshotHelp is what the snapshot verbs' help says of a VM app.
var vmSnapshotHelp = strings.TrimSpace(`
For a kind: vm app the snapshot is of its VM: every disk (the root disk and
the retained volumes it holds) and its config, never the RAM state (PVE's
default, vmstate off): a rollback boots the VM from its disks as they were,
as after a power cut, and costs no RAM-sized state volume (take one with the
RAM by hand, qm snapshot VMID NAME --vmstate 1, if you need it). A running
VM with the guest agent has its filesystems frozen meanwhile. PVE snapshots
VM disks on LVM-thin, ZFS, Ceph RBD or btrfs, or qcow2 files. While a
snapshot holds a retained volume, PVE will not move that disk to another VM,
so the volume cannot go back to the keeper VM: apply refuses a replace or
destroy of the app, or a volume dropped from the manifest, before the VM
stops, until the snapshot is removed (corral snapshot APP NAME --delete).`)
