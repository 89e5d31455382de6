package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// resource is a /cluster/resources entry.
type resource = pve.ClusterResource

// Observe reads what corral needs from the cluster: the node list, one
// cluster resources call, the config of each container (corral's, and the
// others' to recognize an app whose tags were edited; VMs are not read),
// and per node the storage list and the content of the storages that hold
// templates and volumes.
func Observe(ctx context.Context, c *pve.Client) (*plan.Observed, error) {
	return ObserveWith(ctx, c, ObserveOptions{})
}

// ObserveOptions tune Observe.
type ObserveOptions struct {
	// CreateWait bounds how long Observe waits for containers that are
	// still being created (default 3 minutes).
	CreateWait time.Duration
	// OnWait is told about each wait, for progress output.
	OnWait func(msg string)
	// NoHA says no app of the manifest asks for ha:, so the HA rules
	// are read only when a container is an HA resource (observeHA).
	NoHA bool
	// HAUnchanged says the caller read the HA resources under the lock
	// it still holds, found no container among them, and has changed
	// nothing of HA since: the final check of corral apply, which reads
	// again only what the run can have changed. Nothing of HA is read.
	HAUnchanged bool
	// DeferSetup leaves out what only a change is checked against: the
	// nodes' bridges and the templates of storages that hold templates
	// only (plan.Observed.SetupDeferred). A no-op plan needs neither
	// (issue 30); the planner refuses to plan a change without them
	// (plan.ErrSetupUnread), and ObserveSetup reads them.
	DeferSetup bool
	// Migrating leaves running VM migrations (qmigrate) out of the wait
	// for settled guests: corral status shows such a VM where PVE has it
	// now, locked "migrate", and the move under way (vmstatus.go), where
	// a plan that changes things waits for the task.
	Migrating bool
}

// ObserveWith is Observe with options.
func ObserveWith(ctx context.Context, c *pve.Client, opts ObserveOptions) (*plan.Observed, error) {
	o := &observation{c: c, obs: newObserved(), strangers: map[int]*plan.CT{}}
	online, err := o.nodes(ctx)
	if err != nil {
		return nil, err
	}
	res, handed := handedIn(ctx, online) // the lock's listing (lockhand.go)
	if !handed {
		if res, err = guestsSettled(ctx, c, opts, online); err != nil {
			return nil, err
		}
	}
	keepListing(ctx, res)
	o.visibility(ctx, res, online)
	o.reads = readCTs(ctx, c, res, o.obs.Offline)
	for _, r := range res {
		if err := o.guest(ctx, r); err != nil {
			return nil, err
		}
	}
	o.group()
	if err := observeHA(ctx, c, o.obs, opts, slices.ContainsFunc(res, func(r resource) bool { return (r.Type == "lxc" || r.Type == "qemu") && r.HAState != "" })); err != nil {
		return nil, err
	}
	if err := o.observeStorages(ctx, opts); err != nil {
		return nil, err
	}
	parseMounts(o.obs)
	if opts.DeferSetup {
		return o.obs, nil
	}
	if err := ObserveSetup(ctx, c, o.obs); err != nil {
		return nil, err
	}
	return o.obs, nil
}

// observation is one read of the cluster by ObserveWith, in steps that
// each fill their part of obs: the nodes, then every guest from one
// /cluster/resources listing and the configs read for it, then the
// storages and bridges of the online nodes.
type observation struct {
	c     *pve.Client
	obs   *plan.Observed
	reads map[string]ctRead // the container configs, read at once (readCTs)
	// carriers are the move carriers found, grouped once all are read
	// (plan.GroupCarriers needs them all).
	carriers []*plan.Carrier
	// strangers are the CTs without a tag that says what they are, read
	// to recognize an app whose tags were edited (recognize).
	strangers map[int]*plan.CT
}

// newObserved is an Observed with every map made, so that the steps and
// the planner may write and read them without checks.
func newObserved() *plan.Observed {
	return &plan.Observed{
		Templates: map[string][]string{},
		Apps:      map[string][]*plan.CT{},
		Keepers:   map[string][]*plan.Keeper{},
		Volumes:   map[string]int64{},
		Others:    map[int]plan.Guest{},

		StorageTypes:   map[string]string{},
		SharedStorages: map[string]bool{},
		Storages:       map[string]map[string][]string{},
		Bridges:        map[string][]string{},
		BridgeWarnings: map[string]string{},
		NodeMemory:     map[string]int64{},
		GuestMemory:    map[string]int64{},
	}
}

// nodes reads the node list, their memory and which are offline, and
// returns the online ones: the first call, so a token PVE refuses is
// explained here.
func (o *observation) nodes(ctx context.Context) (online []string, err error) {
	nodes, err := o.c.Nodes(ctx)
	if err != nil {
		if errors.Is(err, pve.ErrUnauthorized) {
			return nil, fmt.Errorf("%w: PVE does not accept the API token %s; check its id and secret (PROXMOX_VE_API_TOKEN or --api-token) and that the token still exists and has not expired", err, o.c.TokenID())
		}
		return nil, err
	}
	obs := o.obs
	for _, n := range nodes {
		obs.Nodes = append(obs.Nodes, n.Node)
		if n.MaxMem > 0 {
			obs.NodeMemory[n.Node] = n.MaxMem
		}
		if n.Status != "" && n.Status != "online" {
			obs.Offline = append(obs.Offline, n.Node)
		}
	}
	sort.Strings(obs.Nodes)
	return o.online(), nil
}

// online are the nodes that are not offline, sorted.
func (o *observation) online() []string {
	var online []string
	for _, n := range o.obs.Nodes {
		if !slices.Contains(o.obs.Offline, n) {
			online = append(online, n)
		}
	}
	return online
}

// visibility notes whether the token cannot see the guests: when nothing
// of corral's is listed, a new cluster and a token that cannot audit
// guests (PVE leaves them out silently) look the same, and one question
// tells them apart. A keeper the lock is creating was seen in a listing
// (the lock holds only once it is), which tells them apart as well as one
// of corral's guests does. The question is the token's whole permission
// list, which holds /vms whenever a read of /vms alone would show
// anything (PVE lists every top-level path the token holds something
// on): corral apply's preflight has just read that list (pve.Client.
// HandOverReads).
func (o *observation) visibility(ctx context.Context, res []resource, online []string) {
	if seesCorral(res) || len(pendingIn(ctx)) > 0 || len(online) == 0 {
		return
	}
	if perms, err := o.c.Permissions(ctx, "", ""); err == nil {
		_, audit := perms["/vms"]["VM.Audit"]
		o.obs.CannotSeeGuests = !audit
	}
}

// read is the config of CT vmid as readCTs read it.
func (o *observation) read(node string, vmid int) (conf, pending map[string]string, digest string, err error) {
	r := o.reads[node+"/"+strconv.Itoa(vmid)]
	return r.conf, r.pending, r.digest, r.err
}

// pveDigest is PVE's digest of CT vmid's config as readCTs read it.
func (o *observation) pveDigest(node string, vmid int) string {
	return o.reads[node+"/"+strconv.Itoa(vmid)].pveDigest
}

// observedCT is the plan's view of r with its config.
func observedCT(r resource, conf, pending map[string]string, digest string) *plan.CT {
	return &plan.CT{VMID: r.VMID, Node: r.Node, Status: r.Status, Lock: conf["lock"], Config: conf, Pending: pending, Digest: digest, Pool: r.Pool, HAState: r.HAState}
}

// guest files r under what its tags say it is: another tool's guest, an
// app on an offline node, a keeper, a carrier, an app's rescue container,
// one side of a restore, or an app's container.
func (o *observation) guest(ctx context.Context, r resource) error {
	obs := o.obs
	obs.GuestMemory[r.Node] += r.MaxMem
	tags := plan.ParseTags(r.Tags)
	if r.Type == "qemu" {
		return o.qemu(ctx, r, tags) // vmobserve.go
	}
	if r.Type != "lxc" || !slices.Contains(tags, plan.TagManaged) {
		return o.other(r, tags)
	}
	if slices.Contains(obs.Offline, r.Node) {
		// Its config cannot be read while the node is down; the app
		// is known to be there, and the planner leaves it alone.
		if app := appOf(tags); app != "" && !slices.Contains(tags, plan.TagKeeper) {
			// Its tags are all corral can read of it: they name its
			// volumes on shared storage (plan.VolumeTag).
			obs.Apps[app] = append(obs.Apps[app], &plan.CT{VMID: r.VMID, Node: r.Node, Project: projectOf(tags), Status: r.Status, Config: map[string]string{"tags": r.Tags}})
		}
		return nil
	}
	conf, pending, digest, err := o.read(r.Node, r.VMID)
	if err != nil {
		if pve.IsNotFound(err) {
			return nil // destroyed between the two calls
		}
		return err
	}
	if slices.Contains(tags, plan.TagKeeper) {
		k := plan.NewKeeper(r.VMID, r.Node, conf)
		if len(pending) == 0 {
			k.Digest = o.pveDigest(r.Node, r.VMID)
		}
		obs.Keepers[r.Node] = append(obs.Keepers[r.Node], k)
		return nil
	}
	if slices.Contains(tags, plan.TagCarrier) {
		o.carriers = append(o.carriers, plan.ReadCarrier(r.VMID, r.Node, tags, conf))
		return nil
	}
	if plan.IsRescue(tags) {
		res := plan.ReadRescue(r.VMID, r.Node, r.Status, tags, conf)
		if obs.Rescues == nil {
			obs.Rescues = map[string][]*plan.Rescue{}
		}
		obs.Rescues[res.App] = append(obs.Rescues[res.App], res)
		return nil
	}
	if app := tagged(tags, plan.TagRestoringPrefix); app != "" {
		restoreOf(obs, app).New = observedCT(r, conf, pending, digest)
		restoreOf(obs, app).Stamp = plan.ParseRestoreMarker(conf["description"])
		return nil
	}
	if app := tagged(tags, plan.TagReplacedPrefix); app != "" {
		restoreOf(obs, app).Replaced = observedCT(r, conf, pending, digest)
		return nil
	}
	app := appOf(tags)
	if app == "" {
		// corral's tag without one that says what it is: a keeper or
		// carrier whose own tag was edited, or an app's container.
		if d := plan.ReadDamaged(r.VMID, r.Node, r.Name, tags, conf); d != nil {
			obs.Damaged = append(obs.Damaged, d)
		} else {
			o.strangers[r.VMID] = observedCT(r, conf, pending, digest)
		}
		return nil
	}
	c := observedCT(r, conf, pending, digest)
	c.Project = projectOf(tags)
	obs.Apps[app] = append(obs.Apps[app], c)
	return nil
}

// other files a guest without corral's tag (or a VM) among the others;
// an untagged CT on an online node is read too, as a damaged one of
// corral's or a stranger that may be an app whose tags were edited.
func (o *observation) other(r resource, tags []string) error {
	obs := o.obs
	if r.VMID != 0 {
		obs.Others[r.VMID] = plan.Guest{VMID: r.VMID, Node: r.Node, Type: r.Type, Name: r.Name}
	}
	if r.Type != "lxc" || r.VMID == 0 || slices.Contains(obs.Offline, r.Node) {
		return nil
	}
	conf, pending, digest, err := o.read(r.Node, r.VMID)
	if err != nil && !pve.IsNotFound(err) {
		return err
	}
	if err != nil {
		return nil
	}
	g := obs.Others[r.VMID]
	g.RootFS = plan.ParseMountPoint(conf["rootfs"]).Volume
	obs.Others[r.VMID] = g
	if d := plan.ReadDamaged(r.VMID, r.Node, r.Name, tags, conf); d != nil {
		obs.Damaged = append(obs.Damaged, d)
		return nil
	}
	o.strangers[r.VMID] = observedCT(r, conf, pending, digest)
	return nil
}

// group orders what needs all the guests read: keepers oldest first,
// carriers grouped by move (a bad one warned about), strangers
// recognized as edited apps, and stale copies of recovered apps split
// off (plan.SplitStale).
func (o *observation) group() {
	obs := o.obs
	for _, ks := range obs.Keepers {
		sort.Slice(ks, func(i, j int) bool { return ks[i].VMID < ks[j].VMID })
	}
	if len(o.carriers) > 0 {
		obs.Carriers, obs.LeftoverCarriers, obs.BadCarriers = plan.GroupCarriers(o.carriers)
		for _, c := range obs.BadCarriers {
			obs.Warnings = append(obs.Warnings, fmt.Sprintf("carrier CT %d on %s: %s, so corral cannot finish its move; it holds %s, which corral keeps: write back its Notes as corral wrote them (docs/moving.md shows the format), or hand its volumes to a keeper by hand and destroy it (protection off first)", c.VMID, c.Node, c.Problem, c.HeldList()))
		}
	}
	recognize(obs, o.strangers)
	plan.SplitStale(obs)
}

// storages reads each online node's storages, and the content of those
// that hold templates or volumes; with deferTmpl not of those that hold
// templates only (ObserveSetup reads them).
func (o *observation) storages(ctx context.Context, deferTmpl bool) error {
	for _, node := range o.online() {
		if err := o.nodeStorages(ctx, node, deferTmpl, nil); err != nil {
			return err
		}
	}
	return nil
}

// nodeStorages reads node's storage list, and the content of the
// storages that hold templates or volumes but those read already (done,
// by storage ID) and, with deferTmpl, those that hold templates only.
func (o *observation) nodeStorages(ctx context.Context, node string, deferTmpl bool, done map[string]bool) error {
	obs := o.obs
	storages, err := o.c.StorageList(ctx, node, "")
	if err != nil {
		return err
	}
	obs.Storages[node] = map[string][]string{}
	for _, s := range storages {
		obs.StorageTypes[s.Storage] = s.Type
		if bool(s.Shared) {
			obs.SharedStorages[s.Storage] = true
		}
		cts := strings.Split(s.Content, ",")
		obs.Storages[node][s.Storage] = cts
		wantTmpl := slices.Contains(cts, "vztmpl")
		wantImg := slices.Contains(cts, "rootdir") || slices.Contains(cts, "images")
		if !wantTmpl && !wantImg || deferTmpl && !wantImg || done[s.Storage] {
			continue
		}
		// A storage for templates only is listed by that type:
		// the run's client keeps that list (pve.Client.MemoizeSetup).
		only := ""
		if !wantImg {
			only = "vztmpl"
		}
		if err := o.content(ctx, node, s.Storage, only); err != nil {
			return err
		}
	}
	return nil
}

// content notes the templates and volumes on storage sid of node (of
// content type only, "" for all).
func (o *observation) content(ctx context.Context, node, sid, only string) error {
	content, err := o.c.StorageContent(ctx, node, sid, only, 0)
	if err != nil {
		return fmt.Errorf("on %s: %w", node, err)
	}
	for _, e := range content {
		switch e.Content {
		case "vztmpl":
			o.obs.Templates[node] = append(o.obs.Templates[node], e.VolID)
		case "images", "rootdir":
			o.obs.Volumes[node+"/"+e.VolID] = e.Size
		}
	}
	return nil
}

// parseMounts parses each CT's mount points once, now that its config is
// complete: the planner reads them through CT.Mounts and CT.RootFS.
func parseMounts(obs *plan.Observed) {
	for _, cts := range obs.Apps {
		for _, ct := range cts {
			ct.ParseMounts()
		}
	}
	for _, r := range obs.Restores {
		for _, ct := range []*plan.CT{r.New, r.Replaced} {
			if ct != nil {
				ct.ParseMounts()
			}
		}
	}
}

// observeBridges reads the bridges of node. A list that cannot be read or
// is empty (PVE lists a bridge only to tokens with SDN.Audit or SDN.Use on
// it) leaves the node's bridges unchecked, with a warning: the create
// itself then says whether the bridge is usable. Only ctx ends Observe.
func observeBridges(ctx context.Context, c *pve.Client, obs *plan.Observed, node string) error {
	bridges, err := c.Bridges(ctx, node)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		obs.BridgeWarnings[node] = fmt.Sprintf("could not read the network list of node %s (%v)", node, err)
	case len(bridges) == 0:
		obs.BridgeWarnings[node] = fmt.Sprintf("the token sees no bridge on node %s (PVE lists a bridge only with SDN.Audit or SDN.Use on /sdn/zones/localnetwork/<bridge>)", node)
	default:
		obs.Bridges[node] = bridges
	}
	return nil
}

// guestsSettled lists the cluster's guests, first waiting for any
// container that is still being created. PVE writes a config holding only
// "lock: create" when a create starts and the real config (with corral's
// tags) only when the create task ends, so a container in creation cannot
// be told apart from a stranger's. If corral was interrupted during a
// create and runs again at once, planning without waiting would create the
// app a second time.
//
// It also waits for power and destroy tasks still running on corral's
// containers on nodes (a corral killed during a destroy leaves its
// shutdown running): planning against a container that stops or vanishes
// a moment later would report "no changes" or fail on its config.
func guestsSettled(ctx context.Context, c *pve.Client, opts ObserveOptions, nodes []string) ([]resource, error) {
	limit := opts.CreateWait
	if limit == 0 {
		limit = defaultCreateWait
	}
	return settleWait{
		limit: limit,
		// A keeper the lock is creating is not waited for: the plan
		// creates the node's keeper, and the executor takes that one.
		keep:      func(res []resource) []resource { return withoutOwnClaims(ctx, res) },
		holds:     func(r resource) bool { return r.Tags == "" },
		busy:      func(on []string) (func([]resource) []string, error) { return busyTasks(ctx, c, on, opts.Migrating) },
		busyNodes: firstBusyNodes(ctx, nodes),
		watched:   func(res []resource) []string { return watchedNodes(ctx, res, nodes) },
		tooLong: func(creating []resource) error {
			var remove []string
			for _, r := range creating {
				remove = append(remove, fmt.Sprintf("on node %s run pct unlock %d && pct destroy %d", r.Node, r.VMID, r.VMID))
			}
			return fmt.Errorf("container(s) %s are still being created (lock: create) after %s, so corral cannot tell whose they are; "+
				"wait for their create tasks to finish (Datacenter > Tasks), or if no task is creating them (a node or its API daemon died during a create), remove them as root: %s; then run again",
				strings.Join(guestsOn(creating), ", "), limit, strings.Join(remove, "; "))
		},
		onWait: opts.OnWait,
	}.run(ctx, c)
}

// deadCreates explains placeholders ("lock: create", no tags) whose create
// or restore task has already ended with an error: the worker died without
// removing its config (a crash or kill), so no wait will clear it, and only
// root can (pct unlock, then pct destroy). A restore into a new VMID
// (vzrestore) leaves the same placeholder as a create (vzcreate). It
// returns "" when the newest such task is still running or cannot be
// found (a token sees only its own tasks).
func deadCreates(ctx context.Context, c *pve.Client, res []resource) string {
	var dead []string
	for _, r := range res {
		if r.Type != "lxc" || r.Lock != "create" || r.Tags != "" {
			continue
		}
		all, err := c.TaskList(ctx, r.Node, pve.TaskFilter{VMID: r.VMID, Source: "all"})
		if err != nil {
			return ""
		}
		// The newest create or restore decides (a VMID is reused); one
		// still running is no dead placeholder.
		var newest *pve.TaskListEntry
		for i, t := range all {
			if t.Type != "vzcreate" && t.Type != "vzrestore" {
				continue
			}
			if t.EndTime == 0 {
				return ""
			}
			if newest == nil || t.StartTime > newest.StartTime || (t.StartTime == newest.StartTime && t.PStart > newest.PStart) {
				newest = &all[i]
			}
		}
		if newest == nil || newest.Status == "OK" || strings.HasPrefix(newest.Status, "WARNINGS") {
			return ""
		}
		what := "create"
		if newest.Type == "vzrestore" {
			what = "restore"
		}
		dead = append(dead, fmt.Sprintf("the %s of CT %d on %s failed (task %s ended: %s) and left the half-made container locked (lock: create); "+
			"corral cannot tell it from someone else's, and only root can remove it: on node %s run pct unlock %d && pct destroy %d",
			what, r.VMID, r.Node, newest.UPID, newest.Status, r.Node, r.VMID, r.VMID))
	}
	if len(dead) == 0 {
		return ""
	}
	return strings.Join(dead, "; ") + "; then run corral again"
}

// appOf returns the app name from a corral-app-<name> tag.
func appOf(tags []string) string { return tagged(tags, plan.TagAppPrefix) }

// tagged returns the app name of a <prefix><name> tag, or "".
func tagged(tags []string, prefix string) string {
	for _, t := range tags {
		if name, ok := strings.CutPrefix(t, prefix); ok {
			return name
		}
	}
	return ""
}

func restoreOf(obs *plan.Observed, app string) *plan.Restore {
	if obs.Restores == nil {
		obs.Restores = map[string]*plan.Restore{}
	}
	if obs.Restores[app] == nil {
		obs.Restores[app] = &plan.Restore{App: app}
	}
	return obs.Restores[app]
}

// projectOf returns the project from a corral-project-<project> tag, or
// "" for a CT made before projects existed.
func projectOf(tags []string) string {
	for _, t := range tags {
		if p, ok := strings.CutPrefix(t, plan.TagProjectPrefix); ok {
			return p
		}
	}
	return ""
}

// containerConfig reads the active config (current=1) as raw strings.
func containerConfig(ctx context.Context, c *pve.Client, node string, vmid int) (map[string]string, error) {
	cc, err := c.ContainerConfig(ctx, node, vmid, true)
	if err != nil {
		return nil, err
	}
	return cc.Values, nil
}

// recognize finds app containers whose corral tags were edited away (in
// the web UI, say): a container that references a volume a keeper records
// for an app, or whose description still carries corral's app marker, is
// that app's container, and apply puts its tags back. Without this, corral
// would take the app for missing and create a second container for the
// same volumes.
func recognize(obs *plan.Observed, strangers map[int]*plan.CT) {
	owner := map[string]string{} // node/volid → app
	for node, ks := range obs.Keepers {
		for _, k := range ks {
			for vk, volid := range k.Records {
				owner[node+"/"+volid] = vk.App
			}
		}
	}
	for _, vmid := range slices.Sorted(maps.Keys(strangers)) {
		ct := strangers[vmid]
		app, why := "", ""
		for key, v := range ct.Config {
			if isMP(key) || isUnused(key) {
				if a := owner[ct.Node+"/"+plan.ParseMountPoint(v).Volume]; a != "" {
					app, why = a, fmt.Sprintf("it references app %s's volume %s (%s)", a, plan.ParseMountPoint(v).Volume, key)
				}
			}
		}
		if app == "" {
			if m := plan.ParseMarker(ct.Config["description"]); m.App != "" && m.Template != "" {
				app, why = m.App, "its description carries corral's marker for app "+m.App
			}
		}
		if app == "" {
			continue
		}
		delete(obs.Others, vmid)
		obs.Apps[app] = append(obs.Apps[app], ct)
		obs.Warnings = append(obs.Warnings, fmt.Sprintf("container %d lacks corral's tags (edited outside corral?) but %s: corral treats it as app %s's container and puts its tags back", vmid, why, app))
	}
}

// settleTypes are the task types guestsSettled waits for: they change a
// container's power state or remove it.
var settleTypes = map[string]bool{"vzshutdown": true, "vzstop": true, "vzstart": true, "vzreboot": true, "vzdestroy": true,
	// A move's tasks (apply/move.go) go on when corral is killed.
	"vzmigrate": true, "move_volume": true,
	// A VM app's power and destroy tasks, and the reassigns of its
	// retained disks (apply/vmvolumes.go).
	"qmshutdown": true, "qmstop": true, "qmstart": true, "qmdestroy": true, "qmmove": true,
	// A VM app's move (apply/vmmove.go).
	"qmigrate": true}

// busyTasks reads the running tasks on nodes and returns which of them
// are power, destroy or move tasks on corral's containers in a listing
// (a VM's migration not, with migrating)
// ("the vzshutdown of ct 105 on pve"). A token sees its own tasks, which
// are the ones a killed corral leaves.
func busyTasks(ctx context.Context, c *pve.Client, nodes []string, migrating bool) (func([]resource) []string, error) {
	running := map[string][]pve.TaskListEntry{}
	for _, node := range nodes {
		tasks, err := c.TaskList(ctx, node, pve.TaskFilter{Source: "active"})
		if err != nil {
			return nil, fmt.Errorf("list running tasks on %s: %w", node, err)
		}
		running[node] = tasks
	}
	return func(res []resource) []string {
		ours := map[string]bool{}
		for _, r := range res {
			if (r.Type == "lxc" || r.Type == "qemu") && slices.Contains(plan.ParseTags(r.Tags), plan.TagManaged) {
				ours[r.Node+"/"+strconv.Itoa(r.VMID)] = true
			}
		}
		var busy []string
		for _, node := range nodes {
			for _, t := range running[node] {
				id := t.ID
				if t.Type == "move_volume" || t.Type == "qmmove" {
					id, _, _ = strings.Cut(id, "-") // <vmid>-<key>><target>-<targetkey>
				}
				guest := "ct"
				if strings.HasPrefix(t.Type, "qm") {
					guest = "vm"
				}
				if settleTypes[t.Type] && t.EndTime == 0 && ours[node+"/"+id] && !(migrating && t.Type == "qmigrate") {
					busy = append(busy, fmt.Sprintf("the %s of %s %s on %s", t.Type, guest, t.ID, node))
				}
			}
		}
		return busy
	}, nil
}

// ctRead is one container's config as readCT returns it.
type ctRead struct {
	conf, pending map[string]string
	digest        string
	pveDigest     string // PVE's own, the compare-and-swap token
	err           error
}

// observeReaders is how many container configs Observe reads at once: one
// request per container, and at thousands of containers their round
// trips, not PVE's work, are what a plan waits for.
const observeReaders = 8

// readCTs reads the config of every container of res on a node that
// answers, observeReaders at a time, keyed "node/vmid".
func readCTs(ctx context.Context, c *pve.Client, res []resource, offline []string) map[string]ctRead {
	var todo []resource
	for _, r := range res {
		if r.Type == "lxc" && r.VMID != 0 && !slices.Contains(offline, r.Node) {
			todo = append(todo, r)
		}
	}
	out := make([]ctRead, len(todo))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(observeReaders, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := todo[i]
				out[i].conf, out[i].pending, out[i].digest, out[i].pveDigest, out[i].err = readCTDigest(ctx, c, r.Node, r.VMID)
			}
		}()
	}
	for i := range todo {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	m := make(map[string]ctRead, len(todo))
	for i, r := range todo {
		m[r.Node+"/"+strconv.Itoa(r.VMID)] = out[i]
	}
	return m
}

// readCT reads a container's config in one request, GET …/pending: the
// current values (what GET config?current=1 returns) and the changes
// waiting for its next start (key → new value, "" for a pending delete).
// Pending changes are part of the observed state: a pending delete=mpN
// takes a volume away at the next restart. digest is plannedDigest of
// what was read: what a plan made from it is checked against.
func readCT(ctx context.Context, c *pve.Client, node string, vmid int) (conf, pending map[string]string, digest string, err error) {
	conf, pending, digest, _, err = readCTDigest(ctx, c, node, vmid)
	return conf, pending, digest, err
}

// readCTDigest is readCT, and PVE's digest of the config (pveDigest),
// which the read lists as one more entry.
func readCTDigest(ctx context.Context, c *pve.Client, node string, vmid int) (conf, pending map[string]string, digest, pveDigest string, err error) {
	entries, err := c.Pending(ctx, node, vmid)
	if err != nil {
		return nil, nil, "", "", fmt.Errorf("read config of ct %d: %w", vmid, err)
	}
	conf = make(map[string]string, len(entries))
	for _, en := range entries {
		if en.Key == "digest" {
			if en.Value != nil {
				pveDigest = string(*en.Value)
			}
			continue
		}
		if en.Value != nil {
			conf[en.Key] = string(*en.Value)
		}
		if en.Pending == nil && en.Delete == 0 {
			continue
		}
		if pending == nil {
			pending = map[string]string{}
		}
		if en.Delete != 0 {
			pending[en.Key] = ""
		} else {
			pending[en.Key] = string(*en.Pending)
		}
	}
	return conf, pending, plannedDigest(conf, pending), pveDigest, nil
}

// plannedDigest is the digest a change is planned against (Change.Digest)
// and checked against right before apply changes the app: every current
// and pending value but the lock. PVE's own digest covers the lock line
// too, so a plan read while a backup or a snapshot held the container
// was "changed since it was planned" once the lock went, though nothing
// the plan was made from had changed; a lock still held when apply
// writes is waited for (LockWait) as always.
func plannedDigest(conf, pending map[string]string) string {
	h := sha256.New()
	for _, part := range []map[string]string{conf, pending} {
		for _, k := range slices.Sorted(maps.Keys(part)) {
			if k == "lock" {
				continue
			}
			fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(part[k]), part[k])
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// seesCorral reports whether the resources list any container of
// corral's (a keeper or an app).
func seesCorral(res []resource) bool {
	for _, r := range res {
		if r.Type == "lxc" && slices.Contains(plan.ParseTags(r.Tags), plan.TagManaged) {
			return true
		}
	}
	return false
}
