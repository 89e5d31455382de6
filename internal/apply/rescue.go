package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// corral rescue (plan/rescue.go says why it is built this way): the app's
// container is stopped, its retained volumes detached from it and
// attached at the same paths to a rescue container made from its
// template on its node; the user works there; then the volumes go back
// and the rescue container goes. Every step is a step of a run that a
// kill may end: the rescue container is tagged before any volume
// reaches it, and whatever it holds the next Rescues.End (corral rescue,
// its --end, apply, destroy, restore) gives back. Rescues below carries
// them out.

// RescueVolume is one volume a rescue container holds.
type RescueVolume struct {
	Key    string `json:"key"`
	Volume string `json:"volid"`
	Mount  string `json:"mount"`
}

// RescueSession is a rescue container that Rescues.Start made and started.
type RescueSession struct {
	App     string         `json:"app"`
	VMID    int            `json:"rescue_vmid"`
	Node    string         `json:"node"`
	AppVMID int            `json:"app_vmid"`
	Volumes []RescueVolume `json:"volumes"`
	// Unmounted are volumes the keeper records for the app that the
	// rescue does not mount (the manifest declares no mount for them).
	Unmounted []string `json:"unmounted,omitempty"`
}

// RescueOptions are corral rescue's choices.
type RescueOptions struct {
	// Stop shuts a running app down first (else a running app is refused).
	Stop bool
	// Declared are the app's volumes as the manifest declares them: a
	// volume its keeper records that the app's container no longer mounts
	// (a killed run detached it) is mounted at its declared path.
	Declared []plan.Volume
}

// AppRunningError refuses a rescue of a running app without --stop.
type AppRunningError struct {
	App  string
	VMID int
}

func (e *AppRunningError) Error() string {
	return fmt.Sprintf("app %s runs (ct %d): a rescue needs its volumes, which only a stopped container gives up; stop it with corral rescue %s --stop (or corral stop %s first)", e.App, e.VMID, e.App, e.App)
}

// Rescues starts and ends rescues (corral rescue): it holds the runner
// and the SSH settings, which put corral's key in a rescue container and
// log in to it, and nothing else of the Executor.
type Rescues struct {
	r   *runner
	ssh SSH
}

// Rescues is the rescue side of e, over its runner.
func (e *Executor) Rescues() *Rescues {
	return &Rescues{r: e.ops(), ssh: e.SSH}
}

// Start makes app's rescue container and starts it, holding the app's
// retained volumes. obs is a read made under corral's lock on the app's
// node, with no rescue of app left (EndAll or EndApp first).
func (rs *Rescues) Start(ctx context.Context, obs *plan.Observed, app string, opts RescueOptions) (*RescueSession, error) {
	if obs.InRescue(app) {
		return nil, fmt.Errorf("app %s is in rescue already (rescue CT %d): end that first", app, obs.Rescues[app][0].VMID)
	}
	if why := rescueBlocked(obs, app); why != "" {
		return nil, errors.New(why)
	}
	ct, err := AppCT(obs, app)
	if err != nil {
		return nil, err
	}
	if ct.HA != nil {
		// PVE's HA owns its node and power: it would start it (or
		// recover it to another node) while its volumes are away.
		return nil, fmt.Errorf("app %s (ct %d) is an HA resource: PVE's HA could start or relocate it while its volumes are in the rescue container; take it out of HA first (drop ha: from the manifest and corral apply, or ha-manager remove ct:%d on a node), then rescue it", app, ct.VMID, ct.VMID)
	}
	r := rs.r
	st, err := r.client.ContainerStatus(ctx, ct.Node, ct.VMID)
	if err != nil {
		return nil, err
	}
	if st.Running() && !opts.Stop {
		return nil, &AppRunningError{App: app, VMID: ct.VMID}
	}
	if err := r.ensureStopped(ctx, app, ct.Node, ct.VMID); err != nil {
		return nil, err
	}
	conf, err := containerConfig(ctx, r.client, ct.Node, ct.VMID)
	if err != nil {
		return nil, err
	}
	s := &RescueSession{App: app, Node: ct.Node, AppVMID: ct.VMID}
	held, atts := rescueVolumes(obs, app, ct, conf, opts.Declared, s)
	if len(atts) == 0 {
		return nil, fmt.Errorf("app %s has no retained volume to rescue; its root file system is disposable (a replace makes it anew from the template) and PVE hands no rootfs to another container (\"Cannot move to/from 'rootfs'\"): "+
			"start the app and use corral exec %s, or put what must survive on a volume", app, app)
	}
	params, err := rs.params(obs, app, ct, conf)
	if err != nil {
		return nil, err
	}
	if err := r.step(app, "rescue", "create the rescue container on "+ct.Node, func() error {
		s.VMID, err = r.postCT(ctx, app, ct.Node, 0, params, true)
		return err
	}); err != nil {
		return nil, err
	}
	if err := r.detachFrom(ctx, app, ct.Node, ct.VMID, held, "from ct "+strconv.Itoa(ct.VMID)+" for the rescue"); err != nil {
		return s, err
	}
	rconf, err := containerConfig(ctx, r.client, ct.Node, s.VMID)
	if err != nil {
		return s, err
	}
	if err := r.attach(ctx, app, ct.Node, s.VMID, atts, rconf); err != nil {
		return s, err
	}
	return s, r.step(app, "rescue", "start rescue ct "+strconv.Itoa(s.VMID), func() error { return r.start(ctx, app, ct.Node, s.VMID) })
}

// rescueBlocked says why app's volumes are not where a rescue can take
// them from, or "": a move under way (a carrier holds some), an
// interrupted restore, a damaged keeper or carrier that may hold them.
func rescueBlocked(obs *plan.Observed, app string) string {
	if car := obs.Carriers[app]; car != nil {
		return fmt.Sprintf("app %s is moving (carrier CT %d on %s holds some of its volumes): finish the move with corral apply first, then rescue it", app, car.VMID, car.Node)
	}
	if obs.Restores[app] != nil {
		return fmt.Sprintf("app %s has an interrupted restore: corral apply finishes (or rolls back) it first, then rescue it", app)
	}
	for _, d := range obs.Damaged {
		if slices.Contains(d.Apps(), app) {
			return d.Problem()
		}
	}
	return ""
}

// rescueVolumes are the app's volumes a rescue mounts, as attachments at
// the keys and paths the app's container has them (held: its keys), and
// those its keeper records that the container lost, at their declared
// paths on free keys. They are noted in s.
func rescueVolumes(obs *plan.Observed, app string, ct *plan.CT, conf map[string]string, declared []plan.Volume, s *RescueSession) (held []string, atts []attachment) {
	used := map[string]bool{}
	mounted := map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(conf)) {
		mp := plan.ParseMountPoint(conf[key])
		if !isMP(key) || mp.Volume == "" || plan.VolumeOwner(mp.Volume) == ct.VMID {
			used[key] = used[key] || isMP(key)
			continue
		}
		used[key], mounted[mp.Volume] = true, true
		held = append(held, key)
		atts = append(atts, rescueAttachment(key, mp.Volume, mp.Path, mp.Backup))
	}
	for _, k := range obs.Keepers[ct.Node] {
		for _, vk := range slices.SortedFunc(maps.Keys(k.Records), func(a, b plan.VolumeKey) int { return strings.Compare(a.String(), b.String()) }) {
			volid := k.Records[vk]
			if vk.App != app || mounted[volid] {
				continue
			}
			i := slices.IndexFunc(declared, func(v plan.Volume) bool { return v.Name == vk.Name })
			if i < 0 {
				s.Unmounted = append(s.Unmounted, vk.String()+" ("+volid+")")
				continue
			}
			key := freeKey(boolKeys(used), "mp")
			used[key], mounted[volid] = true, true
			atts = append(atts, rescueAttachment(key, volid, declared[i].Mount, declared[i].Backup))
		}
	}
	for _, a := range atts {
		s.Volumes = append(s.Volumes, RescueVolume{Key: a.Key, Volume: a.VolID, Mount: a.Mount})
	}
	return held, atts
}

func rescueAttachment(key, volid, path string, backup bool) attachment {
	return attachment{VolumeChange: plan.VolumeChange{Volume: plan.Volume{Name: key, Mount: path, Backup: backup},
		Action: plan.VolAttach, VolID: volid, Key: key}}
}

// boolKeys is a config-shaped map of the keys set in m, for freeKey.
func boolKeys(m map[string]bool) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v {
			out[k] = "x"
		}
	}
	return out
}

// params are the create parameters of app's rescue container: the
// app's template, privilege level (the volumes' file owners read the same
// only so), network and features, corral's SSH key, a small rootfs on the
// app's root storage, and the tags and Notes that make it known as app's
// rescue from its first moment.
func (rs *Rescues) params(obs *plan.Observed, app string, ct *plan.CT, conf map[string]string) (*pve.ContainerCreate, error) {
	tmpl := plan.ParseMarker(conf["description"]).Template
	if tmpl == "" || !slices.Contains(obs.Templates[ct.Node], tmpl) {
		if t := obs.Templates[ct.Node]; len(t) > 0 && tmpl == "" {
			tmpl = t[0]
		}
	}
	if tmpl == "" {
		return nil, fmt.Errorf("app %s: no container template on node %s to make the rescue container from", app, ct.Node)
	}
	storage, _, _ := strings.Cut(plan.ParseMountPoint(conf["rootfs"]).Volume, ":")
	if storage == "" {
		storage = "local-lvm"
	}
	host := "rescue-" + app
	if len(host) > 63 {
		host = host[:63]
	}
	tags := []string{plan.TagManaged, plan.TagRescue, plan.TagRescuingPrefix + app}
	if ct.Project != "" {
		tags = append(tags, plan.TagProjectPrefix+ct.Project)
	}
	notes := plan.RescueNotes(app, ct.VMID)
	p := &pve.ContainerCreate{
		OSTemplate:   tmpl,
		RootFS:       pve.MountPoint{Volume: storage + ":" + plan.GiB(keeperRootSize*2)},
		Unprivileged: pve.Ptr(conf["unprivileged"] == "1"),
		Config: pve.ConfigUpdate{Hostname: &host, Cores: pve.Ptr[int64](1), Memory: pve.Ptr[int64](512), Swap: pve.Ptr[int64](0),
			Tags: tags, Description: &notes, Raw: map[string]string{}},
	}
	if n := withoutProp(conf["net0"], "hwaddr"); n != "" {
		p.Config.Raw["net0"] = n // the app is stopped: its address is free
	}
	// keyctl is root@pam's to set; nesting keeps a systemd template quiet,
	// as on keepers.
	f := strings.TrimPrefix(withoutProp(withoutProp(conf["features"], "keyctl"), "nesting")+",nesting=1", ",")
	p.Config.Features = &f
	if k := rs.ssh.AuthorizedKey; k != "" {
		p.SSHPublicKeys = k + " corral\n"
	}
	return p, nil
}

// withoutProp drops key=… from a PVE property string.
func withoutProp(s, key string) string {
	var kept []string
	for _, item := range strings.Split(s, ",") {
		if k, _, _ := strings.Cut(item, "="); item != "" && k != key {
			kept = append(kept, item)
		}
	}
	return strings.Join(kept, ",")
}

// detachFrom removes the mount points keys of CT vmid and the unusedN
// entries PVE leaves for them (volumes it does not own: PVE only drops
// the entries).
func (r *runner) detachFrom(ctx context.Context, app, node string, vmid int, keys []string, why string) error {
	if len(keys) == 0 {
		return nil
	}
	conf, err := containerConfig(ctx, r.client, node, vmid)
	if err != nil {
		return err
	}
	var volids []string
	for _, k := range keys {
		if v := plan.ParseMountPoint(conf[k]).Volume; v != "" {
			volids = append(volids, v)
		}
	}
	return r.step(app, "detach", strings.Join(volids, ",")+" "+why, func() error {
		if err := r.putConfig(ctx, node, vmid, &pve.ConfigUpdate{Delete: keys}); err != nil {
			return err
		}
		return r.dropReferences(ctx, node, vmid, volids)
	})
}

// Dial logs into the rescue container Start made, trusting only the host
// keys its create task logged (or, when it logged none, the first key, as
// for any container corral has just created).
func (rs *Rescues) Dial(ctx context.Context, s *RescueSession) (*guest.Client, error) {
	cl, _, err := (&guests{runner: rs.r, ssh: rs.ssh}).dialGuest(ctx, s.Node, s.VMID, true)
	return cl, err
}
