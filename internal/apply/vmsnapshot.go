package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// snapshotBeforeChange for kind: vm apps (issue 34). The changes that
// count as risky are those of a container: an in-place update (config
// edits, a disk grown, a restart), never a create or a replace, whose
// old VM goes anyway. The snapshot holds the disks and the config but
// not the RAM (PVE's default, vmstate=0): a rollback boots the VM afresh
// from the disks as they were, which is what a rollback after a failed
// change wants, costs no RAM-sized state volume, and needs no pause of
// the guest. The guest agent freezes the filesystems while it is taken.

// updateVM is the update of a VM app's change and then its guest work,
// both protected by a snapshot when the app asks for
// snapshotBeforeChange (as a container's change and provisioning are).
func (v vmOps) updateVM(ctx context.Context, c plan.Change, guestWork func() error) error {
	if err := v.guardDetach(ctx, c); err != nil { // vmupdate.go
		return err
	}
	change := func() error {
		if err := v.update(ctx, c); err != nil {
			return err
		}
		return guestWork()
	}
	if c.Desired == nil || !c.Desired.SnapshotBeforeChange {
		return change()
	}
	name := "corral_pre_" + time.Now().UTC().Format("20060102_150405")
	if err := v.snapshotAsPlanned(ctx, &c, name); err != nil {
		return err
	}
	err := change()
	if err == nil {
		return v.dropSnapshot(ctx, c, name)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w; interrupted: snapshot %s of vm %d is kept, roll back with `qm rollback %d %s`", err, name, c.VMID, c.VMID, name)
	}
	v.r.obs().Warn(c.App, fmt.Sprintf("the change failed (%v); rolling back to snapshot %s", err, name))
	if rbErr := v.rollback(ctx, c, name); rbErr != nil {
		return fmt.Errorf("%s: the change failed: %w; and the rollback to snapshot %s failed too: %w; roll back by hand with `qm rollback %d %s`",
			c.App, err, name, rbErr, c.VMID, name)
	}
	if derr := v.dropSnapshot(ctx, c, name); derr != nil {
		v.r.obs().Warn(c.App, fmt.Sprintf("snapshot %s could not be removed after the rollback: %v", name, derr))
	}
	return &RolledBackError{App: c.App, Snapshot: name, Err: err}
}

// snapshotAsPlanned takes snapshot name of the change's VM when its
// config is still the one planned. A snapshot rewrites the config file
// (its section, parent:), so the update that follows is sent with the
// digest as read after it, checked against the plan's before it.
func (v vmOps) snapshotAsPlanned(ctx context.Context, c *plan.Change, name string) error {
	conf, err := v.r.client.VMConfigOf(ctx, c.Node, c.VMID, false)
	if err != nil {
		return err
	}
	if c.Digest != "" && conf.Digest != c.Digest {
		return &PlanStaleError{App: c.App, VMID: c.VMID, Reason: "was changed (its config digest differs)"}
	}
	if err := v.snapshot(ctx, *c, name); err != nil {
		return fmt.Errorf("%w; nothing was changed (snapshotBeforeChange could not protect the change: the VM's disks must be on a storage that snapshots, such as LVM-thin, ZFS or Ceph, or be qcow2 files)", err)
	}
	if c.Digest == "" {
		return nil
	}
	conf, err = v.r.client.VMConfigOf(ctx, c.Node, c.VMID, false)
	if err != nil {
		return err
	}
	c.Digest = conf.Digest
	return nil
}

// snapshot takes snapshot name of the change's VM, without its RAM.
func (v vmOps) snapshot(ctx context.Context, c plan.Change, name string) error {
	return takeVMSnapshot(ctx, v.r, c.App, c.Node, c.VMID, name, "corral: "+c.App+" before an in-place change")
}

// rollback rolls the VM back to name and starts it: the app ran before
// the change (a change starts a stopped VM app too).
func (v vmOps) rollback(ctx context.Context, c plan.Change, name string) error {
	return rollbackVM(ctx, v.r, c.App, c.Node, c.VMID, name, true)
}

// dropSnapshot removes snapshot name: a snapshot left behind pins the
// disks' old blocks and blocks a move. One already gone is no error.
func (v vmOps) dropSnapshot(ctx context.Context, c plan.Change, name string) error {
	return deleteVMSnapshot(ctx, v.r, c.App, c.Node, c.VMID, name, true)
}

// takeVMSnapshot takes snapshot name of VM vmid, without its RAM (no
// vmstate), as a step of app, retried while the VM is locked.
func takeVMSnapshot(ctx context.Context, r *runner, app, node string, vmid int, name, description string) error {
	return r.step(app, "snapshot", fmt.Sprintf("%s of vm %d (disks and config, no RAM state)", name, vmid), func() error {
		var upid string
		err := r.locked().Do(ctx, func() (err error) {
			upid, err = r.client.CreateVMSnapshot(ctx, node, vmid, name, description)
			return err
		})
		if err == nil {
			err = r.wait(ctx, app, upid)
		}
		return explainVMSnapErr(err, vmid, "VM.Snapshot")
	})
}

// rollbackVM rolls VM vmid back to snapshot name, which stops it first
// when it runs; with start PVE starts it again afterwards.
func rollbackVM(ctx context.Context, r *runner, app, node string, vmid int, name string, start bool) error {
	return r.step(app, "rollback", fmt.Sprintf("vm %d to %s", vmid, name), func() error {
		var upid string
		err := r.locked().Do(ctx, func() (err error) {
			upid, err = r.client.RollbackVMSnapshot(ctx, node, vmid, name, start)
			return err
		})
		if err == nil {
			err = r.wait(ctx, app, upid)
		}
		return explainVMSnapErr(err, vmid, "VM.Snapshot.Rollback")
	})
}

// deleteVMSnapshot removes snapshot name of VM vmid; with missingOK one
// that is not there is no error.
func deleteVMSnapshot(ctx context.Context, r *runner, app, node string, vmid int, name string, missingOK bool) error {
	return r.step(app, "snapshot", fmt.Sprintf("remove %s of vm %d", name, vmid), func() error {
		var upid string
		err := r.locked().Do(ctx, func() (err error) {
			upid, err = r.client.DeleteVMSnapshot(ctx, node, vmid, name)
			return err
		})
		if pve.IsNotFound(err) && missingOK {
			return nil
		}
		if err == nil {
			err = r.wait(ctx, app, upid)
		}
		return explainVMSnapErr(err, vmid, "VM.Snapshot")
	})
}

// explainVMSnapErr is explainSnapErr for a VM: what cannot snapshot is
// a disk.
func explainVMSnapErr(err error, vmid int, priv string) error {
	if errors.Is(err, pve.ErrSnapshotUnsupported) {
		return fmt.Errorf("%w: a disk of vm %d is on a storage that cannot snapshot (a raw file on a dir or NFS storage, say); PVE snapshots VM disks on LVM-thin, ZFS, Ceph RBD or btrfs, or qcow2 files", err, vmid)
	}
	return explainSnapErr(err, vmid, priv)
}
