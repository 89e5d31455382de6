package apply

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/wait"
)

// The keeper VM of a node (plan/vmkeeper.go): a protected VM that never
// starts and owns the kind: vm apps' retained disks while no app VM
// holds them. PVE reassigns a disk into and out of a protected VM
// (move_disk checks no protection), so attach and detach need no
// protection window; only freeing a disk does (update_vm_api's
// check_protection), and that window is closed again however it ends.

// vmKeeper files a keeper VM of the /cluster/resources listing under
// Observed.VMKeepers (one on an offline node stays among the others).
func (o *observation) vmKeeper(ctx context.Context, r resource) error {
	obs := o.obs
	if slices.Contains(obs.Offline, r.Node) {
		return nil
	}
	conf, err := o.c.VMConfigOf(ctx, r.Node, r.VMID, true)
	if pve.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	delete(obs.Others, r.VMID)
	if obs.VMKeepers == nil {
		obs.VMKeepers = map[string][]*plan.VMKeeper{}
	}
	ks := append(obs.VMKeepers[r.Node], &plan.VMKeeper{VMID: r.VMID, Node: r.Node, Config: conf.Values, Digest: conf.Digest})
	slices.SortFunc(ks, func(a, b *plan.VMKeeper) int { return a.VMID - b.VMID })
	obs.VMKeepers[r.Node] = ks
	return nil
}

// keeperVM is node's keeper VM, found live or, with create, created
// (protected from its first moment; 0 without create), with protection
// set again if it was off. It holds
// the runner's vmKeeper lock, so parallel apps on a node make one; a
// node with several is refused, never guessed between.
func (v vmOps) keeperVM(ctx context.Context, app, node string, create bool) (int, error) {
	v.r.vmKeeper.Lock()
	defer v.r.vmKeeper.Unlock()
	res, err := v.r.client.ClusterResources(ctx, "vm")
	if err != nil {
		return 0, fmt.Errorf("find the keeper VM on %s: %w", node, err)
	}
	var ids []int
	for _, g := range res {
		if g.Node == node && g.Type == "qemu" && slices.Contains(plan.ParseTags(g.Tags), plan.TagKeeper) && slices.Contains(plan.ParseTags(g.Tags), plan.TagManaged) {
			ids = append(ids, g.VMID)
		}
	}
	switch len(ids) {
	case 0:
		if !create {
			return 0, nil
		}
		return v.createKeeperVM(ctx, app, node)
	case 1:
		return ids[0], v.protectKeeperVM(ctx, app, node, ids[0])
	}
	return 0, fmt.Errorf("node %s has %d keeper VMs (%v): corral does not guess which owns the app's disks; take corral's tags off all but one, after moving their disks to it", node, len(ids), ids)
}

// createKeeperVM creates node's keeper VM: no disk, no network, the
// least memory, protected and with its Notes from the create on.
func (v vmOps) createKeeperVM(ctx context.Context, app, node string) (int, error) {
	var vmid int
	err := v.r.step(app, "keeper", "create keeper VM on "+node, func() error {
		v.r.creating.Lock()
		id, err := v.r.client.NextID(ctx)
		if err != nil {
			v.r.creating.Unlock()
			return err
		}
		upid, err := v.r.client.CreateVM(ctx, node, &pve.VMCreate{VMID: id, Config: map[string]string{
			"name": plan.KeeperName, "memory": "64", "balloon": "0", "cores": "1", "onboot": "0", "protection": "1",
			"tags": plan.TagManaged + ";" + plan.TagKeeper, "description": plan.VMKeeperDescription(nil),
		}})
		v.r.creating.Unlock()
		if err != nil {
			return err
		}
		vmid = id
		return v.r.wait(ctx, app, upid)
	})
	return vmid, err
}

// protectKeeperVM sets the keeper VM's protection again when a killed
// free left it off.
func (v vmOps) protectKeeperVM(ctx context.Context, app, node string, vmid int) error {
	conf, err := v.r.client.VMConfigOf(ctx, node, vmid, true)
	if err != nil {
		return err
	}
	if conf.Values["protection"] == "1" {
		return nil
	}
	return v.r.step(app, "keeper", "set protection on keeper VM "+strconv.Itoa(vmid), func() error {
		return v.r.client.UpdateVMConfig(ctx, node, vmid, &pve.VMConfigUpdate{Set: map[string]string{"protection": "1"}})
	})
}

// allocate makes volume vol of app a new disk of the keeper VM, its
// serial and its Notes line written by the one PUT that allocates it
// (with the config's digest: a change meanwhile starts again from a
// fresh read). A disk that already carries the serial is the one an
// earlier, interrupted run made. The Notes record the app's project and
// declaring manifest (a of the change, nil when unknown) beside the disk:
// what prune goes by once the app's VM is gone.
func (v vmOps) allocate(ctx context.Context, a *plan.App, app, node string, keeper int, vol plan.Volume) error {
	var project, origin string
	if a != nil {
		project, origin = a.Project, a.Origin
	}
	serial := plan.VMVolumeSerial(app, vol.Name)
	return v.r.step(app, "volume", "create "+vol.Name+" on keeper VM "+strconv.Itoa(keeper), func() error {
		for attempt := 1; ; attempt++ {
			conf, err := v.r.client.VMConfigOf(ctx, node, keeper, true)
			if err != nil {
				return err
			}
			if _, ok := plan.VMVolumeDisks(conf.Values)[serial]; ok {
				return nil
			}
			key := plan.VMFreeDriveKey(conf.Values, 0)
			if key == "" {
				return fmt.Errorf("keeper VM %d on %s holds 31 disks, all its scsi keys: a node's keeper VM holds no more; free volumes of destroyed apps (corral destroy --delete-volumes)", keeper, node)
			}
			notes := plan.ReadVMKeeperNotes(conf.Values["description"])
			notes.Note(serial, app, vol.Name, project, origin)
			err = v.r.client.UpdateVMConfig(ctx, node, keeper, &pve.VMConfigUpdate{Digest: conf.Digest,
				Set: map[string]string{key: plan.VMVolumeDrive(app, vol), "description": notes.String()}})
			if pve.IsModified(err) && attempt < maxCASAttempts {
				continue
			}
			return err
		}
	})
}

// reprotect sets the keeper VM's protection again after a free and drops
// the freed disks' Notes lines (those of serials no longer on it), tried
// with a backoff as keeper.reprotect.
func (v vmOps) reprotect(ctx context.Context, node string, keeper int, serials ...string) error {
	base := context.WithoutCancel(ctx)
	delay := reprotectFirstDelay
	var err error
	for try := 1; try <= reprotectTries; try++ {
		tctx, cancel := context.WithTimeout(base, reprotectTryTimeout)
		err = v.protectFreed(tctx, node, keeper, serials)
		cancel()
		if err == nil {
			return nil
		}
		if try < reprotectTries {
			_ = wait.Sleep(base, delay)
			delay *= 2
		}
	}
	return fmt.Errorf("protection is OFF on keeper VM %d on node %s: setting it again failed %d times (last: %w); `corral apply` sets it again, or run `qm set %d --protection 1` on node %s",
		keeper, node, reprotectTries, err, keeper, node)
}

// protectFreed is one try of reprotect.
func (v vmOps) protectFreed(ctx context.Context, node string, keeper int, serials []string) error {
	conf, err := v.r.client.VMConfigOf(ctx, node, keeper, true)
	if err != nil {
		return err
	}
	notes := plan.ReadVMKeeperNotes(conf.Values["description"])
	for _, serial := range serials {
		if _, still := plan.VMVolumeDisks(conf.Values)[serial]; !still {
			delete(notes.Disks, serial)
		}
	}
	set := map[string]string{"protection": "1"}
	if d := notes.String(); strings.TrimSpace(d) != strings.TrimSpace(conf.Values["description"]) {
		set["description"] = d
	}
	if set["description"] == "" && conf.Values["protection"] == "1" {
		return nil // nothing to do: an earlier try did it
	}
	return v.r.client.UpdateVMConfig(ctx, node, keeper, &pve.VMConfigUpdate{Digest: conf.Digest, Set: set})
}
