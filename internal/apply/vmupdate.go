package apply

import (
	"context"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// update edits the VM's config in place with the plan's digest (a change
// made meanwhile fails the write, nothing is lost), grows its disk, and
// restarts or starts it as planned, then waits for its address.
func (v vmOps) update(ctx context.Context, c plan.Change) error {
	if len(c.Config) > 0 {
		u := &pve.VMConfigUpdate{Set: map[string]string{}, Digest: c.Digest}
		var keys []string
		for _, e := range c.Config {
			keys = append(keys, e.Key)
			switch {
			case e.Key == "sshkeys" && v.corralKey != "":
				// The app's keys and corral's own (the plan compares
				// the app's only).
				u.Set[e.Key] = pve.EncodeSSHKeys(withCorralKey(c.Desired.SSHKeys, v.corralKey))
			case e.New == "":
				u.Delete = append(u.Delete, e.Key)
			default:
				u.Set[e.Key] = e.New
			}
		}
		err := v.r.step(c.App, "config", strings.Join(keys, ","), func() error {
			return v.r.locked().Do(ctx, func() error { return v.r.client.UpdateVMConfig(ctx, c.Node, c.VMID, u) })
		})
		if pve.IsModified(err) {
			return &PlanStaleError{App: c.App, VMID: c.VMID, Reason: "was changed (PVE refused the write: its config digest differs)"}
		}
		if err != nil {
			return err
		}
	}
	if err := v.r.applyPoolAndFirewall(ctx, plan.Change{App: c.App, Kind: c.Kind, Node: c.Node, Firewall: c.Firewall}, c.VMID); err != nil {
		return err
	}
	if c.RootGrow > 0 {
		if err := v.grow(ctx, c.App, c.Node, c.VMID, c.RootGrow); err != nil {
			return err
		}
	}
	if c.Restart {
		if err := v.stop(ctx, c.App, c.Node, c.VMID); err != nil {
			return err
		}
	}
	// The retained disks move while the VM is stopped (the plan restarts
	// a running VM for it), after the config edits that carry the digest.
	if err := v.attachVolumes(ctx, c, c.VMID); err != nil { // vmvolumes.go
		return err
	}
	if c.Restart || c.Start {
		if err := v.start(ctx, c.App, c.Node, c.VMID); err != nil {
			return err
		}
		v.r.placed(c.App, c.Node, c.VMID)
		return v.address(ctx, c.App, c.Node, c.VMID, c.Desired)
	}
	return nil
}

// guardDetach refuses, before anything changes (updateVM calls it before
// snapshotBeforeChange's own snapshot), an update that detaches a
// retained disk a snapshot of the VM holds (guardSnapshotDisks).
func (v vmOps) guardDetach(ctx context.Context, c plan.Change) error {
	if !hasVolume(c, plan.VolDetach) {
		return nil
	}
	conf, err := v.r.client.VMConfigOf(ctx, c.Node, c.VMID, false)
	if err != nil {
		return err
	}
	return v.guardSnapshotDisks(ctx, c, c.VMID, detachedDisks(c, conf.Values, false))
}
