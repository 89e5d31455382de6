package apply

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/plan"
)

// keeper is a node's keeper CT: a protected, never-started container that
// owns every volume corral retains (as unusedN), so that no workload's
// destroy can free them (behaviour.md, "Consequences for the pet/cattle
// design"). Its description records which volume is which.
type keeper struct {
	e         *Executor
	node      string
	vmid      int
	protected bool
	records   map[plan.VolumeKey]string
	intents   map[plan.VolumeKey]plan.AdoptIntent
	projects  map[string]string // app → project, of the apps with records
	volumes   int               // unusedN and mpN entries: what the keeper's room is counted in
}

// description renders the keeper's records and intents, without the
// intent for done (whose volume was just recorded).
func (k *keeper) description(recs map[plan.VolumeKey]string, done plan.VolumeKey) string {
	in := maps.Clone(k.intents)
	delete(in, done)
	return plan.KeeperDescriptionProjects(recs, in, k.projects)
}

// noteProject says that app's volumes belong to the executor's project,
// from the next description written on.
func (k *keeper) noteProject(app string) {
	if k.e.Project == "" {
		return
	}
	if k.projects == nil {
		k.projects = map[string]string{}
	}
	k.projects[app] = k.e.Project
}

// ensureKeeper creates the node's keeper or repairs it (protection off,
// volumes left half-created by an interrupted run).
func (e *Executor) ensureKeeper(ctx context.Context, kc plan.KeeperChange, k *keeper, p *plan.Plan, obs *plan.Observed) (*keeper, error) {
	if kc.Action == plan.Create {
		tmpl := keeperTemplate(kc.Node, p, obs)
		if tmpl == "" {
			return nil, fmt.Errorf("keeper on %s: no container template on the node to create it from", kc.Node)
		}
		k = &keeper{e: e, node: kc.Node, records: map[plan.VolumeKey]string{}}
		err := e.step(plan.KeeperName, "keeper", "create on "+kc.Node, func() error {
			if !slices.Contains(obs.Templates[kc.Node], tmpl) {
				if err := e.fetchTemplate(ctx, plan.KeeperName, kc.Node, tmpl); err != nil {
					return err
				}
				obs.Templates[kc.Node] = append(obs.Templates[kc.Node], tmpl)
			}
			params := url.Values{}
			params.Set("ostemplate", tmpl)
			params.Set("hostname", plan.KeeperName)
			params.Set("rootfs", keeperRootStorage(kc.Node, p)+":"+plan.GiB(keeperRootSize))
			params.Set("unprivileged", "1")
			params.Set("cores", "1")
			params.Set("memory", "64")
			params.Set("swap", "0")
			params.Set("features", "nesting=1")
			params.Set("tags", plan.TagManaged+";"+plan.TagKeeper)
			params.Set("description", plan.KeeperDescription(nil))
			params.Set("protection", "1")
			vmid, err := e.postCT(ctx, plan.KeeperName, kc.Node, 0, params)
			if err != nil {
				return err
			}
			k.vmid, k.protected = vmid, true
			return nil
		})
		return k, err
	}
	if len(kc.Finish) > 0 {
		err := e.step(plan.KeeperName, "keeper", "finish half-created volumes", func() error {
			conf, err := containerConfig(ctx, e.Client, k.node, k.vmid)
			if err != nil {
				return err
			}
			for _, key := range slices.Sorted(maps.Keys(kc.Finish)) {
				vk := kc.Finish[key]
				volid := plan.ParseMountPoint(conf[key]).Volume
				if err := k.unprotect(ctx); err != nil {
					return err
				}
				if err := k.record(ctx, vk, volid, url.Values{"delete": {key}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if kc.Protect {
		k.protected = false
	}
	return k, nil
}

// keeperRootSize is the keeper's rootfs size: it never starts, so it
// needs next to none.
const keeperRootSize = 128 << 20

// keeperTemplate picks the template the keeper is made from: the first
// app's on that node (it is fetched for the app anyway).
func keeperTemplate(node string, p *plan.Plan, obs *plan.Observed) string {
	for _, c := range p.Changes {
		if c.Node == node && c.Desired != nil {
			return c.Desired.Template
		}
	}
	if t := obs.Templates[node]; len(t) > 0 {
		return t[0]
	}
	return ""
}

func keeperRootStorage(node string, p *plan.Plan) string {
	for _, c := range p.Changes {
		if c.Node == node && c.Desired != nil && c.Desired.RootStorage != "" {
			return c.Desired.RootStorage
		}
	}
	return "local-lvm"
}

// unprotect clears protection, which blocks adding and removing the
// keeper's volumes (behaviour.md §g). protect restores it at the end of
// apply; an interrupted run leaves it off and the next plan repairs it.
func (k *keeper) unprotect(ctx context.Context) error {
	if !k.protected {
		return nil
	}
	if err := k.e.putConfig(ctx, k.node, k.vmid, url.Values{"protection": {"0"}}); err != nil {
		return fmt.Errorf("keeper %d: clear protection: %w", k.vmid, err)
	}
	k.protected = false
	return nil
}

func (k *keeper) protect(ctx context.Context) error {
	if k == nil || k.protected || k.vmid == 0 {
		return nil
	}
	if err := k.e.putConfig(ctx, k.node, k.vmid, url.Values{"protection": {"1"}}); err != nil {
		return fmt.Errorf("keeper %d: set protection: %w", k.vmid, err)
	}
	k.protected = true
	return nil
}

// freeKey returns the lowest prefixN (mpN, unusedN) not used in conf.
func freeKey(conf map[string]string, prefix string) string {
	for i := 0; ; i++ {
		if _, used := conf[prefix+strconv.Itoa(i)]; !used {
			return prefix + strconv.Itoa(i)
		}
	}
}

// createVolume allocates a formatted volume through the keeper's config:
// PUT mpN=STORAGE:GiB,mp=/corral/<app>/<name> makes PVE allocate and
// format vm-<keeper>-disk-N; then one PUT both records the volid in the
// description and deletes mpN, which leaves the volume as unusedN. If
// corral stops in between, the mount path still names the volume and the
// next plan finishes the job.
func (k *keeper) createVolume(ctx context.Context, vk plan.VolumeKey, storage string, size int64) (string, error) {
	if err := k.unprotect(ctx); err != nil {
		return "", err
	}
	conf, err := containerConfig(ctx, k.e.Client, k.node, k.vmid)
	if err != nil {
		return "", err
	}
	key := freeKey(conf, "mp")
	if err := k.e.putConfig(ctx, k.node, k.vmid, url.Values{key: {storage + ":" + plan.GiB(size) + ",mp=" + plan.KeeperMountPath(vk)}}); err != nil {
		return "", fmt.Errorf("allocate volume on %s: %w", storage, err)
	}
	conf, err = containerConfig(ctx, k.e.Client, k.node, k.vmid)
	if err != nil {
		return "", err
	}
	volid := plan.ParseMountPoint(conf[key]).Volume
	if volid == "" {
		return "", fmt.Errorf("keeper %d: %s missing after allocation", k.vmid, key)
	}
	k.volumes = plan.VolumeEntries(conf)
	return volid, k.record(ctx, vk, volid, url.Values{"delete": {key}})
}

// record writes the volume record (and any extra params, such as the
// delete of the temporary mpN) in one PUT.
func (k *keeper) record(ctx context.Context, vk plan.VolumeKey, volid string, extra url.Values) error {
	recs := maps.Clone(k.records)
	if recs == nil {
		recs = map[plan.VolumeKey]string{}
	}
	recs[vk] = volid
	k.noteProject(vk.App)
	params := url.Values{"description": {k.description(recs, vk)}}
	for key, v := range extra {
		params[key] = v
	}
	if err := k.e.putConfig(ctx, k.node, k.vmid, params); err != nil {
		return fmt.Errorf("keeper %d: record %s: %w", k.vmid, vk, err)
	}
	k.records = recs
	delete(k.intents, vk)
	return nil
}

// forget drops a record (after the volume was freed).
func (k *keeper) forget(ctx context.Context, vk plan.VolumeKey, extra url.Values) error {
	recs := maps.Clone(k.records)
	delete(recs, vk)
	params := url.Values{"description": {k.description(recs, plan.VolumeKey{})}}
	for key, v := range extra {
		params[key] = v
	}
	if err := k.e.putConfig(ctx, k.node, k.vmid, params); err != nil {
		return err
	}
	k.records = recs
	return nil
}

// adopt moves an existing volume (e.g. a seed-style local-lvm:vm-105-disk-1
// referenced by CT 105) into the keeper with move_volume target-vmid,
// which renames it to vm-<keeper>-disk-N: the volid changes
// (behaviour.md §d). The source CT must be stopped unless the volume is
// one of its unusedN entries.
func (k *keeper) adopt(ctx context.Context, vk plan.VolumeKey, volid string) (string, error) {
	owner := plan.VolumeOwner(volid)
	if owner == k.vmid {
		return volid, k.record(ctx, vk, volid, nil)
	}
	var res []resource
	if err := k.e.Client.Get(ctx, "/cluster/resources", url.Values{"type": {"vm"}}, &res); err != nil {
		return "", err
	}
	node := ""
	for _, r := range res {
		if r.VMID == owner {
			node = r.Node
		}
	}
	if node == "" {
		return "", fmt.Errorf("adopt %s: its owner CT %d does not exist; attach it to a CT once (PUT mp0=%s,mp=/mnt/adopt on a stopped CT you own) so corral can move it", volid, owner, volid)
	}
	if node != k.node {
		return "", fmt.Errorf("adopt %s: it is on node %s, the app on %s", volid, node, k.node)
	}
	conf, err := containerConfig(ctx, k.e.Client, node, owner)
	if err != nil {
		return "", err
	}
	srcKey := ""
	for key, v := range conf {
		if (isMP(key) || strings.HasPrefix(key, "unused")) && (v == volid || strings.HasPrefix(v, volid+",")) {
			srcKey = key
		}
	}
	if srcKey == "" {
		return "", fmt.Errorf("adopt %s: CT %d does not reference it in its config", volid, owner)
	}
	if isMP(srcKey) {
		if err := k.e.ensureStopped(ctx, vk.App, node, owner); err != nil {
			return "", err
		}
	}
	kconf, err := containerConfig(ctx, k.e.Client, k.node, k.vmid)
	if err != nil {
		return "", err
	}
	target := freeKey(kconf, "unused")
	// Say what is about to happen before it happens: the move renames the
	// volume, and a stop between the move and the record must not leave an
	// anonymous volume behind.
	in := maps.Clone(k.intents)
	if in == nil {
		in = map[plan.VolumeKey]plan.AdoptIntent{}
	}
	in[vk] = plan.AdoptIntent{Source: volid, Key: target}
	k.noteProject(vk.App)
	if err := k.e.putConfig(ctx, k.node, k.vmid, url.Values{"description": {plan.KeeperDescriptionProjects(k.records, in, k.projects)}}); err != nil {
		return "", fmt.Errorf("keeper %d: note adoption of %s: %w", k.vmid, volid, err)
	}
	k.intents = in
	var upid string
	err = k.e.retryLocked(ctx, func() error {
		return k.e.Client.Post(ctx, fmt.Sprintf("/nodes/%s/lxc/%d/move_volume", node, owner), url.Values{
			"volume": {srcKey}, "target-vmid": {strconv.Itoa(k.vmid)}, "target-volume": {target},
		}, &upid)
	})
	if err != nil {
		return "", fmt.Errorf("move %s to keeper %d: %w", volid, k.vmid, err)
	}
	if err := k.e.wait(ctx, vk.App, upid); err != nil {
		return "", fmt.Errorf("move %s to keeper %d: %w", volid, k.vmid, err)
	}
	kconf, err = containerConfig(ctx, k.e.Client, k.node, k.vmid)
	if err != nil {
		return "", err
	}
	k.volumes = plan.VolumeEntries(kconf)
	newID := kconf[target]
	if newID == "" {
		return "", fmt.Errorf("keeper %d: %s empty after move", k.vmid, target)
	}
	return newID, k.record(ctx, vk, newID, nil)
}

// grow resizes a keeper volume: PVE resizes only rootfs/mpN of the owner
// (behaviour.md §f 5), so the volume is mounted on the keeper as mpN for
// the resize and dropped back to unusedN afterwards.
func (k *keeper) grow(ctx context.Context, vk plan.VolumeKey, volid string, size int64) error {
	if err := k.unprotect(ctx); err != nil {
		return err
	}
	conf, err := containerConfig(ctx, k.e.Client, k.node, k.vmid)
	if err != nil {
		return err
	}
	key := freeKey(conf, "mp")
	if err := k.e.putConfig(ctx, k.node, k.vmid, url.Values{key: {volid + ",mp=" + plan.KeeperMountPath(vk)}}); err != nil {
		return err
	}
	if err := k.e.resize(ctx, vk.App, k.node, k.vmid, key, size); err != nil {
		return err
	}
	return k.e.putConfig(ctx, k.node, k.vmid, url.Values{"delete": {key}})
}

// free deletes a volume for good (destroy --delete-volumes of a
// reclaim: delete volume): delete=unusedN on its owner, the keeper.
func (k *keeper) free(ctx context.Context, vk plan.VolumeKey, volid string) error {
	if err := k.unprotect(ctx); err != nil {
		return err
	}
	conf, err := containerConfig(ctx, k.e.Client, k.node, k.vmid)
	if err != nil {
		return err
	}
	for key, v := range conf {
		if isUnused(key) && v == volid {
			if err := k.forget(ctx, vk, url.Values{"delete": {key}}); err != nil {
				return err
			}
			k.volumes--
			return nil
		}
	}
	return fmt.Errorf("keeper %d does not hold %s as an unused volume; not freed", k.vmid, volid)
}
