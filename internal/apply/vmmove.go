package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// A VM app's move (plan/vmmove.go) needs no carrier: its retained disks
// are the app VM's own while attached, and an offline migration copies
// them with it. Each step reads the live state first and does nothing
// when it is done already, so a run killed at any request leaves the VM
// stopped on one node or the other, every disk in exactly one VM's
// config; the next run's plan sees where the VM is and goes on from
// there (or, with the manifest back on the source node, starts it where
// it stopped). A migration task corral was killed in goes on at PVE: the
// next run waits for it before planning (settleTypes).

// moveVM carries out a VM app's Move: stop, snapshots deleted when
// asked, the retained disks gathered on the VM (and the dropped ones
// given back) on the source node, the migration, then the rest as an
// update on the target (new disks, growth, edits, start, guest work),
// which it returns for applyVM to carry out.
func moveVM(ctx context.Context, v vmOps, c plan.Change) (plan.Change, error) {
	from, vmid := c.From, c.OldVMID
	conf, err := v.r.client.VMConfigOf(ctx, from, vmid, true)
	switch {
	case pve.IsNotFound(err):
		return plan.Change{}, &PlanStaleError{App: c.App, VMID: vmid, Reason: "is no longer on node " + from}
	case err != nil:
		return plan.Change{}, err
	case c.Digest != "" && conf.Digest != c.Digest:
		return plan.Change{}, &PlanStaleError{App: c.App, VMID: vmid, Reason: "was changed (its config digest differs)"}
	}
	if err := v.stop(ctx, c.App, from, vmid); err != nil {
		return plan.Change{}, err
	}
	if c.Desired != nil && c.Desired.DeleteSnapshots {
		if err := v.dropAllSnapshots(ctx, c.App, from, vmid); err != nil {
			return plan.Change{}, err
		}
	}
	if err := v.gatherDisks(ctx, c); err != nil {
		return plan.Change{}, err
	}
	if err := v.migrateVM(ctx, c.App, from, vmid, c.Node); err != nil {
		return plan.Change{}, err
	}
	return v.afterMove(ctx, c)
}

// dropAllSnapshots deletes every snapshot of the VM, the newest first
// (a branch the VM was rolled back from included: any snapshot left
// blocks the migration).
func (v vmOps) dropAllSnapshots(ctx context.Context, app, node string, vmid int) error {
	snaps, err := v.r.client.VMSnapshots(ctx, node, vmid)
	if err != nil {
		return err
	}
	snaps = slices.DeleteFunc(snaps, func(s pve.Snapshot) bool { return s.Name == "current" })
	slices.SortStableFunc(snaps, func(a, b pve.Snapshot) int { return cmp.Compare(b.SnapTime, a.SnapTime) })
	c := plan.Change{App: app, Node: node, VMID: vmid}
	for _, s := range snaps {
		if err := v.dropSnapshot(ctx, c, s.Name); err != nil {
			return err
		}
	}
	return nil
}

// gatherDisks gives the stopped VM, on the source node, every retained
// disk the move takes (from the keeper VM there when the VM does not hold
// it) and gives back to that keeper VM the disks the manifest dropped.
func (v vmOps) gatherDisks(ctx context.Context, c plan.Change) error {
	var src plan.Change
	src.App, src.Node = c.App, c.From
	for _, vol := range c.Volumes {
		switch vol.Action {
		case plan.VolMove:
			vol.Action = plan.VolAttach
			src.Volumes = append(src.Volumes, vol)
		case plan.VolDetach:
			src.Volumes = append(src.Volumes, vol)
		}
	}
	if len(src.Volumes) == 0 {
		return nil
	}
	conf, err := v.r.client.VMConfigOf(ctx, c.From, c.OldVMID, true)
	if err != nil {
		return err
	}
	held := plan.VMVolumeDisks(conf.Values)
	var work []plan.VolumeChange
	for _, vol := range src.Volumes {
		_, on := held[vol.Serial]
		if vol.Action == plan.VolAttach && !on || vol.Action == plan.VolDetach && on {
			work = append(work, vol)
		}
	}
	if len(work) == 0 {
		return nil
	}
	keeper, err := v.keeperVM(ctx, c.App, c.From, false)
	if err != nil {
		return err
	}
	for _, vol := range work {
		if vol.Action == plan.VolAttach && keeper == 0 {
			return fmt.Errorf("volume %s of app %s (serial %s) is neither on VM %d nor on a keeper VM on %s: run corral plan to see where it is", vol.Name, c.App, vol.Serial, c.OldVMID, c.From)
		}
		if vol.Action == plan.VolDetach && keeper == 0 {
			if keeper, err = v.keeperVM(ctx, c.App, c.From, true); err != nil {
				return err
			}
		}
		from, to := keeper, c.OldVMID
		if vol.Action == plan.VolDetach {
			from, to = to, from
		}
		if err := v.reassign(ctx, c.App, c.From, vol.Serial, from, to, vol.Name); err != nil {
			return err
		}
	}
	return nil
}

// migrateVM migrates the stopped VM to node to and waits. A failed task
// shows the reasons its log gives (PVE puts them only there).
func (v vmOps) migrateVM(ctx context.Context, app, from string, vmid int, to string) error {
	return v.r.step(app, "move", fmt.Sprintf("migrate vm %d %s → %s (offline, its local disks copied)", vmid, from, to), func() error {
		var upid string
		err := v.r.locked().Do(ctx, func() (err error) {
			upid, err = v.r.client.MigrateVM(ctx, from, vmid, to)
			return err
		})
		if err != nil {
			return err
		}
		log, err := v.r.waitLog(ctx, app, upid, true)
		var te *pve.TaskError
		if errors.As(err, &te) {
			if len(log) == 0 {
				log = te.Log
			}
			if why := migrateErrors(log); why != "" {
				return fmt.Errorf("%w (%s); nothing moved: the VM and its disks are on %s; fix that and run the command again", err, why, from)
			}
		}
		return err
	})
}

// migrateErrors are the ERROR lines of a qmigrate task's log, joined.
func migrateErrors(log []string) string {
	var out []string
	for _, l := range log {
		if _, msg, ok := strings.Cut(l, "ERROR: "); ok {
			out = append(out, msg)
		}
	}
	return strings.Join(out, "; ")
}

// afterMove is the update the move ends with, on the target node: the
// disks the VM does not hold yet attached from the keeper VM there (or
// created there), the moved ones grown as planned, the config edits sent
// with the migrated config's digest, the VM started.
func (v vmOps) afterMove(ctx context.Context, c plan.Change) (plan.Change, error) {
	conf, err := v.r.client.VMConfigOf(ctx, c.Node, c.OldVMID, true)
	if err != nil {
		return c, fmt.Errorf("vm %d after its migration to %s: %w", c.OldVMID, c.Node, err)
	}
	after := c
	after.Action, after.From, after.VMID = plan.Update, "", c.OldVMID
	after.Digest, after.Restart, after.Start = conf.Digest, false, true
	after.Volumes = nil
	for _, vol := range c.Volumes {
		if vol.Action != plan.VolDetach { // given back on the source node
			after.Volumes = append(after.Volumes, vol)
		}
	}
	v.r.placed(c.App, c.Node, c.OldVMID)
	return after, nil
}
