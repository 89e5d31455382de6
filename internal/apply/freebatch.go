package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Freeing in batches. Before a volume is freed, every guest config on its
// node and every snapshot are read (the attach guard and snapshotRefs):
// nothing but the keeper may name it. Done once per volume, a destroy
// --delete-volumes of N apps on a node read the node's guests N times,
// N² reads in all (issue 30: 106 reads per app at 1,000 apps). So the
// volumes one keeper frees in a run are freed together: one read of the
// node's guests and snapshots, then one protection window with the same
// two keeper writes a single free makes, each naming every volume.
//
// The read is one per node and run, shared by the batches of every
// keeper on the node (nodeChecks): the first batch's read is the last
// before its writes; a later batch's writes come after the earlier
// batches' (two keeper PUTs each), which only take references away.
// The window in which another client's hand edit could name a volume
// unseen is the node's free phase, not one batch's.
// Another corral cannot be in it: every changing command holds the
// node's lease (lock.go), and corral takes a volume out of a keeper only
// by changing the keeper's config, which the compare-and-swap of the
// writes (change) catches. What PVE itself does not stop (a config
// edited by hand to name a keeper's volume) is caught as before, by the
// read right before the writes.

// keeperVol is one volume a keeper is to free: its record and volid.
type keeperVol struct {
	vk    plan.VolumeKey
	volid string
}

// free deletes a volume for good (destroy --delete-volumes of a
// reclaim: delete volume, volumes rm); see freeAll.
func (k *keeper) free(ctx context.Context, vk plan.VolumeKey, volid string) error {
	return k.freeAll(ctx, []keeperVol{{vk, volid}})[0]
}

// freeAll frees vols from the keeper and returns each one's error (nil:
// freed). Each volume's mpN on the keeper is deleted (PVE keeps the volume
// as unusedN), then that unusedN (PVE frees it: the keeper owns it): two
// writes for all of vols. A volume anything but the keeper references,
// or any snapshot keeps (the keeper's own included), is refused before
// anything changes, and the others are freed.
func (k *keeper) freeAll(ctx context.Context, vols []keeperVol) []error {
	volids := make([]string, len(vols))
	for i, v := range vols {
		volids[i] = v.volid
	}
	inUse, err := k.ops.volumesInUse(ctx, k.node, volids, k.vmid)
	return k.freeChecked(ctx, vols, inUse, err, nil)
}

// freeChecked is freeAll once the guests and snapshots have been read:
// inUse holds the *VolumeInUseError of each of vols something but the
// keeper references, or readErr why they could not be read. With end,
// the last write is the run's last and also releases end's lease in
// the keeper (leaseend.go).
func (k *keeper) freeChecked(ctx context.Context, vols []keeperVol, inUse map[string]*VolumeInUseError, readErr error, end *Lock) []error {
	errs := make([]error, len(vols))
	if readErr != nil {
		return fillErrs(errs, fmt.Errorf("not freed: %w", readErr))
	}
	var err error
	var todo []int
	for i, v := range vols {
		if e := inUse[v.volid]; e != nil {
			errs[i] = fmt.Errorf("not freed: %w", e)
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return errs
	}
	var skip map[int]error // records that no longer name the volume
	err = k.unprotectedEnding(ctx, func(reprotect func(u *pve.ConfigUpdate)) error {
		// Two writes, as PVE frees a mount point's volume only once it is
		// unusedN. The first removes the mount points but keeps the Notes
		// lines, so a run killed in between leaves records whose mount
		// points were removed, which the next plan mounts again (nothing
		// freed, nothing orphaned); the second frees the volumes and
		// drops the lines at once, and sets the protection again.
		if err := k.change(ctx, fmt.Sprintf("unmount %d volume(s)", len(todo)), func(s *keeperState) (*pve.ConfigUpdate, error) {
			var u *pve.ConfigUpdate
			u, skip = unmountUpdate(k.vmid, s, vols, todo)
			return u, nil
		}); err != nil {
			return err
		}
		leaseOut := false
		err := k.change(ctx, fmt.Sprintf("free %d volume(s)", len(todo)-len(skip)), func(s *keeperState) (*pve.ConfigUpdate, error) {
			u := &pve.ConfigUpdate{} // freed by an earlier attempt: the Notes lines go if left
			for _, i := range todo {
				if skip[i] != nil {
					continue
				}
				v := vols[i]
				if s.records[v.vk] == v.volid {
					delete(s.records, v.vk)
				}
				for key, val := range s.conf {
					if isUnused(key) && val == v.volid {
						u.Delete = append(u.Delete, key)
					}
				}
			}
			slices.Sort(u.Delete)
			reprotect(u)
			leaseOut = end != nil && end.endIn(k, s)
			return u, nil
		})
		if err == nil && leaseOut {
			end.ended(k)
		}
		return err
	})
	for _, i := range todo {
		switch {
		case err != nil:
			errs[i] = err
		case skip[i] != nil:
			errs[i] = skip[i]
		}
	}
	return errs
}

// unmountUpdate is the first write of freeAll: the mount points of
// vols[todo] that the keeper has, nil when none. A record whose mount
// point names another volume is left alone, with its error in skip.
func unmountUpdate(vmid int, s *keeperState, vols []keeperVol, todo []int) (*pve.ConfigUpdate, map[int]error) {
	skip := map[int]error{}
	u := &pve.ConfigUpdate{}
	for _, i := range todo {
		v := vols[i]
		key := plan.MountKey(s.conf, v.vk)
		if key == "" {
			continue
		}
		if plan.ParseMountPoint(s.conf[key]).Volume != v.volid {
			skip[i] = fmt.Errorf("keeper %d records %s as %s, not %s; not freed", vmid, v.vk, s.records[v.vk], v.volid)
			continue
		}
		u.Delete = append(u.Delete, key)
	}
	if len(u.Delete) == 0 {
		return nil, skip
	}
	return u, skip
}

// fillErrs sets every entry of errs to err.
func fillErrs(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// appFree is a volume to free, shown as what under its app.
type appFree struct {
	k    *keeper
	vol  keeperVol
	what string
}

// freeBatches frees frees, one batch per keeper (keepers in the order
// they first appear, each batch in order), each volume shown as a "free"
// step of its app. It returns the volids freed, in the order of frees,
// and the errors joined. No batch starts once ctx is done or a stop was
// asked.
func (r *runner) freeBatches(ctx context.Context, frees []appFree) (freed []string, err error) {
	var order []*keeper
	batch := map[*keeper][]int{}
	for i, f := range frees {
		if batch[f.k] == nil {
			order = append(order, f.k)
		}
		batch[f.k] = append(batch[f.k], i)
	}
	errs := make([]error, len(frees))
	tried := make([]bool, len(frees))
	checks := nodeChecks{}
	var stop error
	for _, k := range order {
		if stop = ctx.Err(); stop != nil {
			break
		}
		idx := batch[k]
		vols := make([]keeperVol, len(idx))
		steps := make([]stepName, len(idx))
		for j, i := range idx {
			vols[j], tried[i] = frees[i].vol, true
			steps[j] = stepName{app: appOrKeeper(frees[i].vol.vk.App), phase: "free", detail: frees[i].what}
		}
		// The run's last batch ends the lease in its last write where
		// its keeper holds it (EndLeaseInLastWrite).
		var end *Lock
		if l := leaseEndIn(ctx); k == order[len(order)-1] && l.holds(k) {
			end = l
		}
		free := func() []error {
			inUse, err := checks.read(ctx, r, k.node, frees)
			return k.freeChecked(ctx, vols, inUse, err, end)
		}
		for j, err := range r.stepsAtOnce(steps, free) {
			errs[idx[j]] = err
		}
	}
	freed = []string{}
	for i, f := range frees {
		if tried[i] && errs[i] == nil {
			freed = append(freed, f.vol.volid)
		}
	}
	return freed, errors.Join(append(errs, stop)...)
}

// appOrKeeper is the name a volume's steps are shown under: its app, or
// the keeper for a volume of no app.
func appOrKeeper(app string) string {
	if app == "" {
		return plan.KeeperName
	}
	return app
}

// nodeChecks is the one read of a node's guests and snapshots that all
// of a run's free batches on that node share (issue 30: a read per
// batch made destroy --delete-volumes read the node's keepers once per
// keeper, 106 reads per app at 1,000 apps on one node).
type nodeChecks map[string]*nodeCheck

type nodeCheck struct {
	inUse map[string]*VolumeInUseError
	err   error
}

// read is the *VolumeInUseError of each volume frees names on node,
// read on the first call for node: a reference by the volume's own
// keeper is allowed, any other guest's or any snapshot's is not.
func (nc nodeChecks) read(ctx context.Context, r *runner, node string, frees []appFree) (map[string]*VolumeInUseError, error) {
	if c := nc[node]; c != nil {
		return c.inUse, c.err
	}
	owner := map[string]int{}
	var volids []string
	for _, f := range frees {
		if f.k.node == node {
			owner[f.vol.volid] = f.k.vmid
			volids = append(volids, f.vol.volid)
		}
	}
	c := &nodeCheck{}
	c.inUse, c.err = r.volumesInUseOwned(ctx, node, volids, owner)
	nc[node] = c
	return c.inUse, c.err
}
