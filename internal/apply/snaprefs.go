package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Snapshots are references too. A snapshot of a container keeps, in its
// config section, the volumes that were attached when it was taken, and
// a rollback gives them back (on LVM-thin it removes the volume and makes
// it again from snap_<volume>_<snapshot>). PVE counts a snapshot's
// volumes as in use. So a volume that any snapshot of any guest names is
// never freed: a rollback to that snapshot would fail for good, or, once
// the volid is handed to a new volume, roll someone else's disk back.
// The current config (GET …/pending) does not carry the snapshot
// sections, so they are read here, with two more calls per container
// (its snapshot list, then each snapshot's config), and only on the
// paths that free a volume, for the volumes they are about to free.

// snapshotReferences reads the snapshots of the containers of node (with
// all, of every node) and returns which of volids each snapshot names.
// Each reference names its node and snapshot. The containers in skip
// are not read: their references would be dropped (a destroy's own
// containers, whose snapshots PVE destroys with them).
func snapshotReferences(ctx context.Context, c *pve.Client, node string, all bool, volids []string, skip ...int) (map[string][]Reference, error) {
	out := map[string][]Reference{}
	if len(volids) == 0 {
		return out, nil
	}
	res, err := listGuests(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("list guests: %w", err)
	}
	res = slices.DeleteFunc(res, func(r resource) bool {
		return (r.Type != "lxc" && r.Type != "qemu") || (!all && r.Node != node) || slices.Contains(skip, r.VMID)
	})
	sort.Slice(res, func(i, j int) bool { return res[i].VMID < res[j].VMID })
	want := map[string]bool{}
	for _, v := range volids {
		want[v] = true
	}
	found := make([][]snapRef, len(res))
	errs := make([]error, len(res))
	inParallel(len(res), func(i int) { found[i], errs[i] = guestSnapshotRefs(ctx, c, res[i], want) })
	for i, r := range res {
		if errs[i] != nil {
			return nil, fmt.Errorf("read the snapshots of %s %d on node %s to check which volumes they keep: %w", guestWord(r.Type), r.VMID, r.Node, errs[i])
		}
		for _, ref := range found[i] {
			vol := refVolume(ref.value)
			out[vol] = append(out[vol], ref.Reference)
		}
	}
	return out, nil
}

// snapRef is a snapshot reference with the config value it was read from.
type snapRef struct {
	Reference
	value string
}

// guestWord is how a message names a guest of type typ.
func guestWord(typ string) string {
	if typ == "qemu" {
		return "VM"
	}
	return "CT"
}

// guestSnapshotRefs lists the snapshots of guest r (a container or a VM)
// that name one of want. A guest destroyed since the list has none.
func guestSnapshotRefs(ctx context.Context, c *pve.Client, r resource, want map[string]bool) ([]snapRef, error) {
	list, config := c.Snapshots, func(ctx context.Context, node string, vmid int, name string) (map[string]string, error) {
		cc, err := c.SnapshotConfig(ctx, node, vmid, name)
		if err != nil {
			return nil, err
		}
		return cc.Values, nil
	}
	if r.Type == "qemu" {
		list, config = c.VMSnapshots, func(ctx context.Context, node string, vmid int, name string) (map[string]string, error) {
			vc, err := c.VMSnapshotConfig(ctx, node, vmid, name)
			if err != nil {
				return nil, err
			}
			return vc.Values, nil
		}
	}
	snaps, err := list(ctx, r.Node, r.VMID)
	if pve.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []snapRef
	for _, s := range snaps {
		if s.Name == "current" {
			continue
		}
		values, err := config(ctx, r.Node, r.VMID, s.Name)
		if pve.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, key := range slices.Sorted(maps.Keys(values)) {
			if v := values[key]; volumeKey(r.Type, key) && want[refVolume(v)] {
				out = append(out, snapRef{Reference{Node: r.Node, VMID: r.VMID, Type: r.Type, Name: r.Name, Key: key,
					Snapshot: s.Name, App: appOf(plan.ParseTags(r.Tags))}, v})
			}
		}
	}
	return out, nil
}

// nodeSnapshotRefs is snapshotReferences for volids of node's keepers:
// the snapshots of node's containers, or of every node's when one of
// volids is on shared storage (any node's guest can name it).
func nodeSnapshotRefs(ctx context.Context, c *pve.Client, node string, volids []string, skip ...int) (map[string][]Reference, error) {
	if len(volids) == 0 {
		return map[string][]Reference{}, nil
	}
	shared, err := onSharedStorage(ctx, c, node, volids)
	if err != nil {
		return nil, err
	}
	return snapshotReferences(ctx, c, node, shared, volids, skip...)
}

// SnapshotRefs reads which snapshots keep the volumes a free plan is
// about to free, keyed "node/volid" like VolumeRefs: corral volumes rm and
// prune add them to VolumeRefs' references and plan again, so that a
// volume a snapshot keeps is refused before anything is freed.
func SnapshotRefs(ctx context.Context, c *pve.Client, vols []plan.VolumeFree) (map[string][]string, error) {
	byNode := map[string][]string{}
	for _, v := range vols {
		byNode[v.Node] = append(byNode[v.Node], v.VolID)
	}
	out := map[string][]string{}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		refs, err := nodeSnapshotRefs(ctx, c, node, byNode[node])
		if err != nil {
			return nil, err
		}
		for volid, rs := range refs {
			for _, r := range rs {
				out[node+"/"+volid] = append(out[node+"/"+volid], r.String())
			}
		}
	}
	return out, nil
}

// CheckRollback refuses, before anything changes, a rollback of ct to
// snapshot name that cannot bring back what the snapshot holds: a volume
// it covers no longer exists (freed since; PVE's rollback would stop the
// container and fail on it), or its volid now names another app's volume
// or another guest uses it (the volid was freed and handed out again: the
// rollback would overwrite that disk). The error names each volume, the
// snapshot and the command that removes the snapshot.
func (sn *Snapshots) CheckRollback(ctx context.Context, obs *plan.Observed, ct *plan.CT, name string) error {
	cc, err := sn.r.client.SnapshotConfig(ctx, ct.Node, ct.VMID, name)
	if err != nil {
		return err
	}
	app := ctApp(ct)
	allowed := []int{ct.VMID}
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			allowed = append(allowed, k.VMID)
		}
	}
	contents := map[string]map[string]bool{} // storage → volids on it
	var problems, present []string
	for _, key := range append([]string{"rootfs"}, mpKeys(cc.Values)...) {
		volid := refVolume(cc.Values[key])
		if volid == "" {
			continue
		}
		sid, _, _ := strings.Cut(volid, ":")
		if contents[sid] == nil {
			if contents[sid], err = storageVolids(ctx, sn.r.client, ct.Node, sid); err != nil {
				return err
			}
		}
		switch owner := recordedFor(obs, volid); {
		case !contents[sid][volid]:
			problems = append(problems, fmt.Sprintf("%s (%s) no longer exists on node %s (freed since the snapshot was taken)", key, volid, ct.Node))
		case owner.App != "" && owner.App != app:
			problems = append(problems, fmt.Sprintf("%s (%s) is now volume %s, another app's (the volid was freed and handed out again)", key, volid, owner))
		default:
			present = append(present, volid)
		}
	}
	if len(problems) == 0 {
		if err := sn.r.guardUnreferenced(ctx, ct.Node, present, allowed...); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) == 0 {
		return nil
	}
	fix := fmt.Sprintf("`pct delsnapshot %d %s` on node %s", ct.VMID, name, ct.Node)
	if app != "" {
		fix = fmt.Sprintf("`corral snapshot %s %s --delete` (or %s)", app, name, fix)
	}
	return fmt.Errorf("rollback of CT %d on node %s to snapshot %s refused; nothing was changed: %s. "+
		"A rollback cannot bring back a volume that is gone, and would stop the container first; roll back to another snapshot or remove this one with %s",
		ct.VMID, ct.Node, name, strings.Join(problems, "; "), fix)
}

// storageVolids lists the volumes on storage sid as node sees it.
func storageVolids(ctx context.Context, c *pve.Client, node, sid string) (map[string]bool, error) {
	vols, err := c.StorageContent(ctx, node, sid, "", 0)
	if err != nil {
		return nil, fmt.Errorf("list storage %s on node %s: %w", sid, node, err)
	}
	out := map[string]bool{}
	for _, v := range vols {
		out[v.VolID] = true
	}
	return out, nil
}

// recordedFor is the keeper record that names volid (zero for none).
func recordedFor(obs *plan.Observed, volid string) plan.VolumeKey {
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			for vk, v := range k.Records {
				if v == volid {
					return vk
				}
			}
		}
	}
	return plan.VolumeKey{}
}
