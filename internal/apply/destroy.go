package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/corralhq/corral/internal/plan"
)

// Destroy carries out a destroy plan: each app's CT is stopped, its
// volumes detached (kept in the keeper) and the CT destroyed. Volumes are
// freed only where the plan says VolFree (reclaim: delete, asked for with
// --delete-volumes). It returns the volids it freed.
func (e *Executor) Destroy(ctx context.Context, p *plan.Plan, obs *plan.Observed) ([]string, error) {
	r := e.ops()
	e.state.mu.Lock()
	e.state.timings = nil
	e.state.mu.Unlock()
	keepers := e.keeperOps().keeperSet(obs)
	var changes []plan.Change
	for _, c := range p.Changes {
		switch {
		case c.Stale && c.Action == plan.Delete:
			// A recovered app's stale copy first: it references the
			// volumes that may be freed below.
			if err := e.checkPlanned(ctx, c); err != nil {
				return nil, err
			}
			if err := r.destroyCT(ctx, c.App, c.Node, c.OldVMID); err != nil {
				return nil, err
			}
		case c.Action == plan.Delete:
			changes = append(changes, c)
		}
	}
	// The guard takes the listing the plan was made from (KeepListing):
	// the stale copies destroyed above only make it list guests that are
	// gone, whose snapshots read as none.
	if err := e.guardDestroySnapshots(plannedListing(ctx), changes); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var frees []appFree // the volumes of the apps whose CT is gone
	err := e.forEachApp(ctx, changes, func(c plan.Change) error {
		if c.Kind == plan.KindVM {
			return e.applyVM(ctx, c, nil) // vm.go
		}
		if c.OldVMID != 0 {
			conf, err := e.checkPlannedConf(ctx, c)
			if err != nil {
				return err
			}
			if err := r.destroyCTFrom(ctx, c.App, c.Node, c.OldVMID, conf); err != nil {
				return err
			}
		}
		for _, v := range c.Volumes {
			if v.Action != plan.VolFree {
				continue
			}
			vk := plan.VolumeKey{App: c.App, Name: v.Name}
			if k := keepers.holder(c.Node, vk); k != nil {
				mu.Lock()
				frees = append(frees, appFree{k: k, vol: keeperVol{vk, v.VolID}, what: v.Name + " (" + v.VolID + ")"})
				mu.Unlock()
			}
		}
		return nil
	})
	// The volumes are freed once every CT of the run is gone, a batch per
	// keeper (freebatch.go), also when some app failed: the apps that
	// were destroyed get their volumes freed, as they did one by one.
	freed, ferr := e.ops().freeBatches(ctx, frees)
	slices.Sort(freed)
	return freed, errors.Join(err, ferr)
}

// guardDestroySnapshots refuses a destroy, before anything of it changes,
// when a volume it would free is kept by a snapshot of a container other
// than the ones it destroys (PVE destroys a container's snapshots with
// it), which are therefore not read (issue 30: one snapshot list per app
// destroyed). keeper.free checks again right before each free.
func (e *Executor) guardDestroySnapshots(ctx context.Context, changes []plan.Change) error {
	byNode := map[string][]string{}
	var gone []int
	for _, c := range changes {
		gone = append(gone, c.OldVMID)
		if c.Kind == plan.KindVM {
			continue // a VM app's disks: a CT's snapshot cannot name them
		}
		for _, v := range c.Volumes {
			if v.Action == plan.VolFree && v.VolID != "" {
				byNode[c.Node] = append(byNode[c.Node], v.VolID)
			}
		}
	}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		volids := byNode[node]
		refs, err := nodeSnapshotRefs(ctx, e.Client, node, volids, gone...)
		if err != nil {
			return err
		}
		for _, volid := range volids {
			kept := slices.DeleteFunc(refs[volid], func(r Reference) bool { return slices.Contains(gone, r.VMID) })
			if len(kept) > 0 {
				return fmt.Errorf("destroy refused; nothing was changed: %w", &VolumeInUseError{VolID: volid, Refs: kept})
			}
		}
	}
	return nil
}
