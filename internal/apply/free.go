package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// VolumeRefs reads, on every online node that has a keeper, which guests
// other than the keepers reference which volume (current values and
// pending changes; see NodeReferences), keyed "node/volid", for
// plan.FreeVolumes and plan.Prune. A volume on shared storage can be
// named from any node, so for those every node's guests count.
func VolumeRefs(ctx context.Context, c *pve.Client, obs *plan.Observed) (map[string][]string, error) {
	out := map[string][]string{}
	var all map[string][]Reference // every node's (each naming its node), read once if needed
	for node, ks := range obs.Keepers {
		if len(ks) == 0 || slices.Contains(obs.Offline, node) {
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
		for volid, rs := range refs {
			for _, r := range rs {
				if slices.ContainsFunc(ks, func(k *plan.Keeper) bool { return k.VMID == r.VMID }) {
					continue
				}
				out[node+"/"+volid] = append(out[node+"/"+volid], r.String())
			}
		}
	}
	return out, nil
}

// FreeVolumes carries out a plan of corral volumes rm or prune: each
// volume is freed by its keeper (keeper.free: the record dropped, the
// volume deleted as the keeper's unusedN, protection cleared only around
// it and set again right after), each after a fresh check that no other
// guest references it. It returns the volids freed, in plan order, up to
// the first error.
func (e *Executor) FreeVolumes(ctx context.Context, p *plan.FreePlan, obs *plan.Observed) (freed []string, err error) {
	e.state.mu.Lock()
	e.state.timings = nil
	e.state.mu.Unlock()
	keepers := e.keeperOps().keeperSet(obs)
	freed = []string{}
	for _, v := range p.Volumes {
		if err := ctx.Err(); err != nil {
			return freed, err
		}
		k := keepers.byVMID(v.Node, v.Keeper)
		if k == nil {
			return freed, fmt.Errorf("keeper %d on %s is gone; nothing more was freed: run the command again", v.Keeper, v.Node)
		}
		who := v.App
		if who == "" {
			who = plan.KeeperName
		}
		what := v.VolID
		if v.Name != "" {
			what = v.Name + " (" + v.VolID + ")"
		}
		err := e.ops().step(who, "free", what, func() error {
			if err := k.free(ctx, v.Key(), v.VolID); err != nil {
				return err
			}
			// free finds nothing to delete when an earlier attempt did
			// it; make sure the keeper no longer holds the volume at all.
			cc, err := k.read(ctx)
			if err != nil {
				return err
			}
			for key, val := range cc.Values {
				if (isMP(key) || isUnused(key)) && plan.ParseMountPoint(val).Volume == v.VolID {
					return fmt.Errorf("keeper %d still holds %s as %s; not freed", k.vmid, v.VolID, key)
				}
			}
			return nil
		})
		if err != nil {
			return freed, err
		}
		freed = append(freed, v.VolID)
	}
	return freed, nil
}
