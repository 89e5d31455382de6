package apply

import (
	"context"
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
	if err := e.guardDestroySnapshots(ctx, changes); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var freed []string
	err := e.forEachApp(ctx, changes, func(c plan.Change) error {
		if c.OldVMID != 0 {
			if err := e.checkPlanned(ctx, c); err != nil {
				return err
			}
			if err := r.destroyCT(ctx, c.App, c.Node, c.OldVMID); err != nil {
				return err
			}
		}
		for _, v := range c.Volumes {
			if v.Action != plan.VolFree {
				continue
			}
			vk := plan.VolumeKey{App: c.App, Name: v.Name}
			k := keepers.holder(c.Node, vk)
			if k == nil {
				continue
			}
			if err := r.step(c.App, "free", v.Name+" ("+v.VolID+")", func() error { return k.free(ctx, vk, v.VolID) }); err != nil {
				return err
			}
			mu.Lock()
			freed = append(freed, v.VolID)
			mu.Unlock()
		}
		return nil
	})
	slices.Sort(freed)
	return freed, err
}

// guardDestroySnapshots refuses a destroy, before anything of it changes,
// when a volume it would free is kept by a snapshot of a container other
// than the ones it destroys (PVE destroys a container's snapshots with
// it). keeper.free checks again right before each free.
func (e *Executor) guardDestroySnapshots(ctx context.Context, changes []plan.Change) error {
	byNode := map[string][]string{}
	var gone []int
	for _, c := range changes {
		gone = append(gone, c.OldVMID)
		for _, v := range c.Volumes {
			if v.Action == plan.VolFree && v.VolID != "" {
				byNode[c.Node] = append(byNode[c.Node], v.VolID)
			}
		}
	}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		volids := byNode[node]
		refs, err := nodeSnapshotRefs(ctx, e.Client, node, volids)
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
