package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// The end of a rescue (rescue.go has its start): whatever a rescue
// container holds goes back to the app's container, and the rescue
// container goes once it holds nothing. It runs at the end of every
// corral rescue, and for a rescue a killed run left, first in the next
// apply, destroy, restore or rescue.

// EndAll ends every rescue obs found (Recover calls it): see End.
func (rs *Rescues) EndAll(ctx context.Context, obs *plan.Observed) error {
	for _, app := range slices.Sorted(maps.Keys(obs.Rescues)) {
		for _, res := range obs.Rescues[app] {
			if err := rs.End(ctx, obs, res, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// End stops the rescue container res, gives every volume it holds
// back to the app's container (the same keys and paths; only to the
// container its Notes name, and only while that is still the app's: else
// the volumes simply stay with their keeper, which records them
// throughout), attaches to it the declared volumes its keeper records
// that nothing mounts (a kill between the two halves of a hand-over),
// and destroys the rescue container once it holds nothing.
func (rs *Rescues) End(ctx context.Context, obs *plan.Observed, res *plan.Rescue, declared []plan.Volume) error {
	r := rs.r
	app, node := res.App, res.Node
	conf, err := containerConfig(ctx, r.client, node, res.VMID)
	if pve.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := r.ensureStopped(ctx, app, node, res.VMID); err != nil {
		return err
	}
	now := plan.ReadRescue(res.VMID, node, "stopped", nil, conf)
	var keys []string
	for _, h := range now.Holds {
		keys = append(keys, h.Key)
	}
	if err := r.detachFrom(ctx, app, node, res.VMID, keys, "from rescue ct "+strconv.Itoa(res.VMID)); err != nil {
		return fmt.Errorf("end the rescue of app %s: %w", app, err)
	}
	if len(now.Unused) > 0 {
		if err := r.dropReferences(ctx, node, res.VMID, now.Unused); err != nil {
			return fmt.Errorf("end the rescue of app %s: %w", app, err)
		}
	}
	if appConf := rs.appConfig(ctx, app, node, res.AppVMID); appConf != nil {
		if err := r.giveBack(ctx, obs, app, node, res.AppVMID, appConf, now.Holds, declared); err != nil {
			return fmt.Errorf("end the rescue of app %s: the volumes are back with their keeper but not attached to ct %d (corral apply attaches them): %w", app, res.AppVMID, err)
		}
	}
	if err := r.destroyEmptyRescue(ctx, app, node, res.VMID); err != nil {
		return fmt.Errorf("end the rescue of app %s: %w", app, err)
	}
	return nil
}

// appConfig is the config of the app's container vmid on node, or nil
// when that is no longer app's container (gone, or another's).
func (rs *Rescues) appConfig(ctx context.Context, app, node string, vmid int) map[string]string {
	if vmid == 0 {
		return nil
	}
	conf, err := containerConfig(ctx, rs.r.client, node, vmid)
	if err != nil || !slices.Contains(plan.ParseTags(conf["tags"]), plan.TagAppPrefix+app) {
		return nil
	}
	return conf
}

// giveBack attaches the volumes the rescue held (holds) to the app's
// container vmid at the keys they had there (the rescue used the app's
// keys; another free one if taken meanwhile), and the declared volumes
// its keeper records that the container lacks.
func (r *runner) giveBack(ctx context.Context, obs *plan.Observed, app, node string, vmid int, conf map[string]string, holds []plan.KeyedMount, declared []plan.Volume) error {
	used := map[string]bool{}
	has := map[string]bool{}
	for k, v := range conf {
		if isMP(k) {
			used[k], has[plan.ParseMountPoint(v).Volume] = true, true
		}
	}
	var atts []attachment
	add := func(key, volid, path string, backup bool) {
		if has[volid] {
			return
		}
		if used[key] {
			key = freeKey(boolKeys(used), "mp")
		}
		used[key], has[volid] = true, true
		atts = append(atts, rescueAttachment(key, volid, path, backup))
	}
	for _, h := range holds {
		add(h.Key, h.Volume, h.Path, h.Backup)
	}
	for _, k := range obs.Keepers[node] {
		for vk, volid := range k.Records {
			if i := slices.IndexFunc(declared, func(v plan.Volume) bool { return v.Name == vk.Name }); vk.App == app && i >= 0 {
				add("mp0", volid, declared[i].Mount, declared[i].Backup)
			}
		}
	}
	slices.SortFunc(atts, func(a, b attachment) int { return strings.Compare(a.Key, b.Key) })
	return r.attach(ctx, app, node, vmid, atts, conf)
}

// destroyEmptyRescue destroys the rescue container once a fresh read
// shows it holds no volume it does not own: a rescue container is never
// destroyed with a volume still in it (PVE would not free a volume it
// only references, but the reference is the only sign of where the
// volume was).
func (r *runner) destroyEmptyRescue(ctx context.Context, app, node string, vmid int) error {
	conf, err := containerConfig(ctx, r.client, node, vmid)
	if pve.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if left := plan.ReadRescue(vmid, node, "", nil, conf); len(left.Holds) > 0 || len(left.Unused) > 0 {
		return fmt.Errorf("rescue ct %d still holds %s %s; not destroyed", vmid, left.HoldList(), strings.Join(left.Unused, ","))
	}
	return r.destroyCT(ctx, app, node, vmid)
}

// EndApp ends app's rescues (corral rescue APP --end, and before a
// new rescue): it returns how many there were.
func (rs *Rescues) EndApp(ctx context.Context, obs *plan.Observed, app string, declared []plan.Volume) (int, error) {
	for _, res := range obs.Rescues[app] {
		if err := rs.End(ctx, obs, res, declared); err != nil {
			return 0, err
		}
	}
	return len(obs.Rescues[app]), nil
}
