package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// VolumeRefs reads, on every online node that has a keeper (CT or VM),
// which guests other than the keepers reference which volume (current
// values and pending changes; see NodeReferences), keyed "node/volid",
// for plan.FreeVolumes and plan.Prune. A volume on shared storage can be
// named from any node, so for those every node's guests count. A keeper
// VM's own disks are allowed to it alone: any other guest naming one,
// a keeper CT too, is a reference.
func VolumeRefs(ctx context.Context, c *pve.Client, obs *plan.Observed) (map[string][]string, error) {
	out := map[string][]string{}
	var all map[string][]Reference // every node's (each naming its node), read once if needed
	nodes := slices.Sorted(maps.Keys(obs.Keepers))
	for node := range obs.VMKeepers {
		nodes = append(nodes, node)
	}
	slices.Sort(nodes)
	for _, node := range slices.Compact(nodes) {
		ks, vks := obs.Keepers[node], obs.VMKeepers[node]
		if len(ks)+len(vks) == 0 || slices.Contains(obs.Offline, node) {
			continue
		}
		refs, err := NodeReferences(ctx, c, node)
		if err != nil {
			return nil, err
		}
		shared, err := sharedStorages(ctx, c, node)
		if err != nil {
			return nil, err
		}
		if len(shared) > 0 && all == nil {
			if all, err = references(ctx, c, "", true); err != nil {
				return nil, err
			}
		}
		for volid, rs := range all {
			sid, _, _ := strings.Cut(volid, ":")
			if !shared[sid] {
				continue
			}
			for _, r := range rs {
				if r.Node != "" && r.Node != node { // the node's own are in refs
					refs[volid] = append(refs[volid], r)
				}
			}
		}
		vmOwner := vmKeeperDisks(vks)
		for volid, rs := range refs {
			for _, r := range rs {
				if owner, ok := vmOwner[volid]; ok && r.VMID == owner {
					continue
				}
				if _, ok := vmOwner[volid]; !ok && slices.ContainsFunc(ks, func(k *plan.Keeper) bool { return k.VMID == r.VMID }) {
					continue
				}
				out[node+"/"+volid] = append(out[node+"/"+volid], r.String())
			}
		}
	}
	return out, nil
}

// vmKeeperDisks maps each retained disk the keeper VMs ks hold to the
// keeper VM's VMID.
func vmKeeperDisks(ks []*plan.VMKeeper) map[string]int {
	out := map[string]int{}
	for _, k := range ks {
		for _, d := range k.Disks() {
			out[d.Volume] = k.VMID
		}
	}
	return out
}

// FreeVolumes carries out a plan of corral volumes rm or prune: the
// volumes of each keeper are freed by it in one batch (keeper.freeAll: one
// fresh check that no other guest or snapshot references them, the
// records dropped and the volumes deleted as the keeper's unusedN,
// protection cleared only around it and set again right after); a
// keeper VM's retained disks likewise (vmOps.freeVMDisks), and the keeper
// VMs the plan found unprotected are protected again. It returns the
// volids freed, in plan order, and the errors of those that were not.
func (e *Executor) FreeVolumes(ctx context.Context, p *plan.FreePlan, obs *plan.Observed) (freed []string, err error) {
	e.state.mu.Lock()
	e.state.timings = nil
	e.state.mu.Unlock()
	keepers := e.keeperOps().keeperSet(obs)
	var frees []appFree
	var vmFrees []plan.VolumeFree
	for _, v := range p.Volumes {
		if v.Kind == plan.KindVM {
			vmFrees = append(vmFrees, v)
			continue
		}
		k := keepers.byVMID(v.Node, v.Keeper)
		if k == nil {
			return []string{}, fmt.Errorf("keeper %d on %s is gone; nothing was freed: run the command again", v.Keeper, v.Node)
		}
		what := v.VolID
		if v.Name != "" {
			what = v.Name + " (" + v.VolID + ")"
		}
		frees = append(frees, appFree{k: k, vol: keeperVol{v.Key(), v.VolID}, what: what})
	}
	vm := vmOps{r: e.ops()}
	if err := vm.reprotectVMKeepers(ctx, p.Reprotect); err != nil {
		return []string{}, err
	}
	freed, err = e.ops().freeBatches(ctx, frees)
	if err == nil {
		// A free finds nothing to delete when an earlier attempt did it; make
		// sure no keeper holds a freed volume at all.
		err = checkFreed(ctx, frees)
	}
	vmFreed, vmErr := vm.freeVMDisks(ctx, vmFrees)
	return inPlanOrder(p, append(freed, vmFreed...)), errors.Join(err, vmErr)
}

// inPlanOrder is freed in the order of p's volumes.
func inPlanOrder(p *plan.FreePlan, freed []string) []string {
	out := []string{}
	for _, v := range p.Volumes {
		if slices.Contains(freed, v.VolID) {
			out = append(out, v.VolID)
		}
	}
	return out
}

// checkFreed reads each keeper of frees once and fails if it still holds
// one of their volumes as a mount point or unusedN.
func checkFreed(ctx context.Context, frees []appFree) error {
	byKeeper := map[*keeper][]string{}
	var order []*keeper
	for _, f := range frees {
		if byKeeper[f.k] == nil {
			order = append(order, f.k)
		}
		byKeeper[f.k] = append(byKeeper[f.k], f.vol.volid)
	}
	for _, k := range order {
		cc, err := k.read(ctx)
		if err != nil {
			return err
		}
		for key, val := range cc.Values {
			if v := plan.ParseMountPoint(val).Volume; (isMP(key) || isUnused(key)) && slices.Contains(byKeeper[k], v) {
				return fmt.Errorf("keeper %d still holds %s as %s; not freed", k.vmid, v, key)
			}
		}
	}
	return nil
}
