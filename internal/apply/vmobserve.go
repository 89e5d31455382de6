package apply

import (
	"context"
	"slices"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// qemu files a VM of the /cluster/resources listing: one tagged as an
// app's is that app's VM (plan.Observed.VMs) and no longer among the
// others; an untagged one on an online node is read to see whether its
// Notes carry corral's marker (plan.Observed.MarkedVMs), which the
// planner refuses rather than adopts or duplicates.
func (o *observation) qemu(ctx context.Context, r resource, tags []string) error {
	obs := o.obs
	if err := o.other(r, tags); err != nil || r.VMID == 0 {
		return err // other lists it among the others
	}
	app := ""
	if slices.Contains(tags, plan.TagManaged) {
		if slices.Contains(tags, plan.TagKeeper) {
			return o.vmKeeper(ctx, r) // vmkeeper.go
		}
		app = appOf(tags)
		if inFlight := tagged(tags, plan.TagRestoringPrefix) + tagged(tags, plan.TagReplacedPrefix); app == "" && inFlight != "" {
			return o.vmRestore(ctx, r, tags)
		}
	}
	if slices.Contains(obs.Offline, r.Node) {
		if app != "" {
			delete(obs.Others, r.VMID)
			addVM(obs, app, &plan.VM{VMID: r.VMID, Node: r.Node, Project: projectOf(tags), Status: r.Status, Config: map[string]string{"tags": r.Tags}, HAState: r.HAState})
		}
		return nil
	}
	vm, err := readVM(ctx, o.c, r, app != "")
	if pve.IsNotFound(err) {
		return nil // destroyed between the two calls
	}
	if err != nil {
		return err
	}
	if app != "" {
		delete(obs.Others, r.VMID)
		vm.Project = projectOf(tags)
		addVM(obs, app, vm)
		return nil
	}
	if plan.ParseMarker(vm.Config["description"]).App != "" {
		obs.MarkedVMs = append(obs.MarkedVMs, vm)
	} else if d := plan.ReadDamagedVM(r.VMID, r.Node, r.Name, tags, vm.Config); d != nil {
		obs.Damaged = append(obs.Damaged, d)
	}
	return nil
}

// vmRestore files a VM of an interrupted VM restore
// (plan.Observed.VMRestores): the restored VM (corral-restoring-<app>)
// or the VM it replaces (corral-replaced-<app>). Neither is the app's
// VM, so the planner counts none of their disks' serials.
func (o *observation) vmRestore(ctx context.Context, r resource, tags []string) error {
	delete(o.obs.Others, r.VMID)
	vm := &plan.VM{VMID: r.VMID, Node: r.Node, Project: projectOf(tags), Status: r.Status, Config: map[string]string{"tags": r.Tags}}
	if !slices.Contains(o.obs.Offline, r.Node) {
		read, err := readVM(ctx, o.c, r, true)
		if pve.IsNotFound(err) {
			return nil // destroyed between the two calls
		}
		if err != nil {
			return err
		}
		read.Project = vm.Project
		vm = read
	}
	if o.obs.VMRestores == nil {
		o.obs.VMRestores = map[string]*plan.VMRestore{}
	}
	app := tagged(tags, plan.TagRestoringPrefix)
	if app == "" {
		app = tagged(tags, plan.TagReplacedPrefix)
	}
	rs := o.obs.VMRestores[app]
	if rs == nil {
		rs = &plan.VMRestore{App: app}
		o.obs.VMRestores[app] = rs
	}
	if tagged(tags, plan.TagRestoringPrefix) != "" {
		rs.New, rs.Stamp = vm, plan.ParseRestoreMarker(vm.Config["description"])
	} else {
		rs.Replaced = vm
	}
	return nil
}

// readVM reads a VM's config as in effect (current=1) with its digest,
// and for corral's own also which keys wait in the pending section.
func readVM(ctx context.Context, c *pve.Client, r resource, pending bool) (*plan.VM, error) {
	conf, err := c.VMConfigOf(ctx, r.Node, r.VMID, true)
	if err != nil {
		return nil, err
	}
	vm := &plan.VM{VMID: r.VMID, Node: r.Node, Status: r.Status, Config: conf.Values, Digest: conf.Digest, HAState: r.HAState}
	if !pending {
		return vm, nil
	}
	entries, err := c.VMPending(ctx, r.Node, r.VMID)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Pending != nil || e.Delete != 0 {
			vm.Pending = append(vm.Pending, e.Key)
		}
	}
	return vm, nil
}

func addVM(obs *plan.Observed, app string, vm *plan.VM) {
	if obs.VMs == nil {
		obs.VMs = map[string][]*plan.VM{}
	}
	obs.VMs[app] = append(obs.VMs[app], vm)
}
