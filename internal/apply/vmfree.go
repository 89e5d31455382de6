package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// corral volumes rm and prune, and destroy --delete-volumes
// (vmOps.freeVolumes), free a kind: vm app's retained disks from its
// keeper VM here: the disks of one keeper VM in one batch, after one fresh read of the node's
// guests and of every guest's snapshots (a keeper VM's disk that any
// other guest or any snapshot names is not freed), then one PUT, sent
// with the keeper VM's digest (a change meanwhile fails it, nothing
// freed), that turns protection off and deletes the drives with force
// (PVE frees a deleted drive's volume at once; the deletes run in
// order), then one that sets protection again and drops their Notes
// lines. A run killed between the two leaves the disks freed and
// protection off; the next rm or prune plans protection set again
// (FreePlan.Reprotect), as does the next apply of a VM app on the node.

// vmDiskFree is one retained disk a keeper VM is to free: the serial
// that finds it, the volid the plan approved, and how it is shown.
type vmDiskFree struct {
	serial, volid string
	step          stepName
}

// freeVMDisks frees the disks of p's kind vm volumes, one batch per
// keeper VM in plan order, and returns the volids freed and the errors.
func (v vmOps) freeVMDisks(ctx context.Context, vols []plan.VolumeFree) (freed []string, err error) {
	type keeperVM struct {
		node string
		vmid int
	}
	var order []keeperVM
	batch := map[keeperVM][]vmDiskFree{}
	for _, vf := range vols {
		k := keeperVM{vf.Node, vf.Keeper}
		if batch[k] == nil {
			order = append(order, k)
		}
		what := vf.VolID
		if vf.Name != "" {
			what = vf.Name + " (" + vf.VolID + ")"
		}
		batch[k] = append(batch[k], vmDiskFree{serial: vf.Serial, volid: vf.VolID, step: stepName{app: appOrKeeper(vf.App), phase: "free", detail: what}})
	}
	freed = []string{}
	var errs []error
	for _, k := range order {
		if err := ctx.Err(); err != nil {
			return freed, errors.Join(append(errs, err)...)
		}
		b := batch[k]
		steps := make([]stepName, len(b))
		for i, d := range b {
			steps[i] = d.step
		}
		for i, err := range v.r.stepsAtOnce(steps, func() []error { return v.freeBatch(ctx, k.node, k.vmid, b) }) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			freed = append(freed, b[i].volid)
		}
	}
	return freed, errors.Join(errs...)
}

// freeBatch frees disks from keeper VM keeper on node and returns each
// one's error (nil: freed, or found freed by an earlier run).
func (v vmOps) freeBatch(ctx context.Context, node string, keeper int, disks []vmDiskFree) []error {
	errs := make([]error, len(disks))
	volids := make([]string, len(disks))
	owner := map[string]int{}
	for i, d := range disks {
		volids[i], owner[d.volid] = d.volid, keeper
	}
	inUse, err := v.r.volumesInUseOwned(ctx, node, volids, owner)
	if err != nil {
		return fillErrs(errs, fmt.Errorf("not freed: %w", err))
	}
	conf, err := v.r.client.VMConfigOf(ctx, node, keeper, true)
	if err != nil {
		return fillErrs(errs, fmt.Errorf("not freed: read keeper VM %d: %w", keeper, err))
	}
	have := plan.VMVolumeDisks(conf.Values)
	del := []string{"protection"}
	var serials []string
	for i, d := range disks {
		got, ok := have[d.serial]
		switch {
		case inUse[d.volid] != nil:
			errs[i] = fmt.Errorf("not freed: %w", inUse[d.volid])
		case !ok:
			serials = append(serials, d.serial) // freed by an earlier run: its Notes line may be left
		case got.Volume != d.volid:
			errs[i] = fmt.Errorf("keeper VM %d holds the disk of serial %s as %s now, not %s; not freed: run the command again to review the new plan", keeper, d.serial, got.Volume, d.volid)
		default:
			del = append(del, got.Key)
			serials = append(serials, d.serial)
		}
	}
	if len(serials) == 0 {
		return errs
	}
	if len(del) > 1 {
		err = v.r.client.UpdateVMConfig(ctx, node, keeper, &pve.VMConfigUpdate{Digest: conf.Digest, Delete: del, Force: true})
		if err == nil || !pve.IsModified(err) {
			// Protection may be off from here on, whatever the answer.
			err = errors.Join(err, v.reprotect(ctx, node, keeper, serials...))
		}
	} else {
		err = v.reprotect(ctx, node, keeper, serials...)
	}
	if pve.IsModified(err) {
		err = fmt.Errorf("keeper VM %d changed since it was read; nothing of it was freed: run the command again: %w", keeper, err)
	}
	for i, d := range disks {
		if errs[i] == nil && slices.Contains(serials, d.serial) && err != nil {
			errs[i] = err
		}
	}
	return errs
}

// reprotectVMKeepers sets protection again on the keeper VMs ks (left
// off by a free that was killed in its window) and drops the Notes lines
// of the disks that free deleted: the serials no VM on the node holds.
func (v vmOps) reprotectVMKeepers(ctx context.Context, ks []plan.KeeperRef) error {
	var errs []error
	for _, k := range ks {
		errs = append(errs, v.r.step(plan.KeeperName, "keeper", fmt.Sprintf("set protection on keeper VM %d on %s", k.VMID, k.Node), func() error {
			gone, err := v.freedSerials(ctx, k.Node, k.VMID)
			if err != nil {
				return err
			}
			return v.reprotect(ctx, k.Node, k.VMID, gone...)
		}))
	}
	return errors.Join(errs...)
}

// freedSerials are the serials keeper's Notes name that no VM on node
// holds (pending values included): disks freed by a run that was killed
// before it dropped their lines.
func (v vmOps) freedSerials(ctx context.Context, node string, keeper int) ([]string, error) {
	conf, err := v.r.client.VMConfigOf(ctx, node, keeper, false)
	if err != nil {
		return nil, err
	}
	noted := plan.ParseVMKeeperNotes(conf.Values["description"])
	if len(noted) == 0 {
		return nil, nil
	}
	held := plan.VMVolumeDisks(conf.Values)
	res, err := v.r.client.ClusterResources(ctx, "vm")
	if err != nil {
		return nil, err
	}
	for _, g := range res {
		if g.Type != "qemu" || g.Node != node || g.VMID == keeper {
			continue
		}
		c, err := v.r.client.VMConfigOf(ctx, node, g.VMID, false)
		if pve.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read VM %d on %s for the disks it holds: %w", g.VMID, node, err)
		}
		maps.Copy(held, plan.VMVolumeDisks(c.Values))
	}
	var out []string
	for _, serial := range slices.Sorted(maps.Keys(noted)) {
		if _, ok := held[serial]; !ok {
			out = append(out, serial)
		}
	}
	return out, nil
}
