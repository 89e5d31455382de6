package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// RestoreOptions say what to restore and as what.
type RestoreOptions struct {
	App     string // the app the archive is of
	Archive string // backup volid
	// As is the app the restored container becomes. "" means App with
	// Replace or when App has no container (it was destroyed), else
	// App+"-restored", so that the copy runs beside the original.
	As string
	// Replace restores in place of App's running container: the old one
	// is stopped, and destroyed only once the restored one runs; its
	// volumes stay in the keeper, recorded as <name>-replaced-<time>.
	Replace bool
	// Storage receives rootfs and the volumes; "" is the storage of the
	// archived rootfs.
	Storage string
	// IP overrides net0's ip= ("dhcp" or a CIDR); "" keeps the archived.
	IP string
	// Names maps mount paths to volume names, for archived volumes no
	// keeper record names (the manifest's volumes).
	Names map[string]string
	// Volumes are the names of App's volumes in the manifest: a VM
	// archive's retained disks are named by them when no keeper VM's
	// Notes record their serials.
	Volumes []string
	// Project is the manifest's project, Origin its origin and Listed its
	// apps: the restored container carries the project's tag and records
	// the manifest as its declarer. A copy under a name the manifest does
	// not list (--as) is marked as a copy of App (plan.CT.Copy): the
	// project's apply leaves it alone, and corral destroy NAME with the
	// manifest removes it. Without a manifest the archived container's
	// project and declarer are kept. Explicit says the manifest sets
	// project: (a defaulted one replaces no container another manifest
	// declared: plan.ChangedElsewhere).
	Project  string
	Origin   string
	Explicit bool
	Listed   []string
}

// RestoredVolume is one volume of the restored container.
type RestoredVolume struct {
	Key    string `json:"key"`
	Name   string `json:"name"`
	Mount  string `json:"mount"`
	Backup bool   `json:"backup"`
	// Empty: backup=0 in the archive, so PVE recreated it empty.
	Empty bool   `json:"empty"`
	VolID string `json:"volid,omitempty"` // in the keeper, once adopted
}

// Renamed is a keeper record moved aside so the restored volume can take
// its name.
type Renamed struct {
	From  string `json:"from"`
	To    string `json:"to"`
	VolID string `json:"volid"`
}

// MissingPriv is a privilege the token lacks for a restore.
type MissingPriv struct {
	Path string `json:"path"`
	Priv string `json:"privilege"`
	Why  string `json:"why"`
}

// RestorePlan is what Restore will do, worked out before any change.
type RestorePlan struct {
	App      string           `json:"app"`
	Name     string           `json:"name"`
	Archive  string           `json:"archive"`
	Node     string           `json:"node"`
	VMID     int              `json:"vmid"`
	Storage  string           `json:"storage"`
	Replace  bool             `json:"replace"`
	OldVMID  int              `json:"old_vmid,omitempty"`
	Hostname string           `json:"hostname"`
	Volumes  []RestoredVolume `json:"volumes"`
	Renamed  []Renamed        `json:"renamed"`
	Notes    []string         `json:"notes"`

	conf      map[string]string // the archived config
	params    *pve.ConfigUpdate
	finalTags string // the app's tags, set once the restored container runs
	finalDesc string
	renames   map[plan.VolumeKey]plan.VolumeKey
	stamp     string
	project   string // the restored app's project
	declared  string // the origin of the manifest that declares it
}

// RestoreRefusedError is a restore stopped before any change: privileges
// the token lacks, or a conflict it cannot resolve by itself.
type RestoreRefusedError struct {
	App      string
	TokenID  string
	CanBack  bool // the token may back the app up (VM.Backup on its CT)
	Missing  []MissingPriv
	Problems []string
}

func (e *RestoreRefusedError) Error() string {
	var b strings.Builder
	b.WriteString("restore refused before any change: ")
	if len(e.Missing) > 0 {
		if e.CanBack {
			fmt.Fprintf(&b, "the token %s can back app %s up but cannot restore it; it lacks:", e.TokenID, e.App)
		} else {
			fmt.Fprintf(&b, "the token %s lacks privileges a restore needs:", e.TokenID)
		}
		for _, m := range e.Missing {
			fmt.Fprintf(&b, "\n  - %s on %s: %s", m.Priv, m.Path, m.Why)
		}
		b.WriteString("\ngrant them to the token and to its user (a privilege-separated token holds only what both hold), " +
			"e.g. with a role that has them: pveum acl modify <path> -user <user> -role <role> and pveum acl modify <path> -token '<token>' -role <role>; " +
			"`corral doctor --print-setup` prints a complete least-privilege setup")
	}
	for _, p := range e.Problems {
		b.WriteString("\n  - " + p)
	}
	return b.String()
}

// restorer carries out the steps of a restore that PlanRestore, Restore
// and Recover share: where the archive is, what the token may do, the
// restored volumes' way into the keeper and the switch to the new
// container. It holds the runner and the keeper side (whose project is
// the restored app's, set by Restore before it is made).
type restorer struct {
	*runner
	keepers *keeperOps
}

// restorer is the restore side of e as its fields are now.
func (e *Executor) restorer() *restorer {
	return &restorer{runner: e.ops(), keepers: e.keeperOps()}
}

// PlanRestore reads the archive's config, picks the new VMID and checks
// the token's privileges (GET /access/permissions) for every step, so a
// token that can back up but not restore is told before anything
// changes.
func (e *Executor) PlanRestore(ctx context.Context, obs *plan.Observed, opts RestoreOptions) (*RestorePlan, error) {
	name, oldCT, err := restoreName(obs, &opts)
	if err != nil {
		return nil, err
	}
	rs := e.restorer()
	node, err := rs.restoreNode(ctx, obs, opts, name, oldCT)
	if err != nil {
		return nil, err
	}
	conf, err := rs.archiveConfig(ctx, node, opts)
	if err != nil {
		return nil, err
	}
	rp := &RestorePlan{App: opts.App, Name: name, Archive: opts.Archive, Node: node, Replace: opts.Replace, Hostname: name,
		Volumes: []RestoredVolume{}, Renamed: []Renamed{}, Notes: []string{}, conf: conf, renames: map[plan.VolumeKey]plan.VolumeKey{}}
	if opts.Replace {
		rp.OldVMID = oldCT.VMID
		if why := plan.ChangedElsewhere(opts.App, oldCT, opts.Project, opts.Origin, opts.Explicit, "restore an archive in its place"); why != "" {
			return nil, &RestoreRefusedError{App: opts.App, TokenID: e.Client.TokenID(), Problems: []string{why}}
		}
	}
	rp.Storage = opts.Storage
	if rp.Storage == "" {
		rp.Storage, _, _ = strings.Cut(plan.ParseMountPoint(conf["rootfs"]).Volume, ":")
	}

	refused := &RestoreRefusedError{App: opts.App, TokenID: e.Client.TokenID()}
	rp.planVolumes(obs, opts, refused)
	rp.setAside(obs)
	rp.identity(opts, oldCT, refused)

	vmid, err := e.Client.NextID(ctx)
	if err != nil {
		return nil, fmt.Errorf("next vmid: %w", err)
	}
	rp.VMID = vmid
	missing, canBack, err := rs.restorePrivileges(ctx, obs, rp, conf)
	if err != nil {
		return nil, err
	}
	refused.Missing, refused.CanBack = missing, canBack
	if len(refused.Missing) > 0 || len(refused.Problems) > 0 {
		return nil, refused
	}
	return rp, nil
}

// restoreName is the app name the restore makes (--as, the app itself, or
// <app>-restored beside it) and the app's container it replaces or sits
// beside, refusing a name that is invalid or taken. A --replace with
// nothing running becomes a plain restore as the app.
func restoreName(obs *plan.Observed, opts *RestoreOptions) (string, *plan.CT, error) {
	old := obs.Apps[opts.App]
	if len(old) > 1 {
		if _, err := AppCT(obs, opts.App); err != nil {
			return "", nil, err
		}
	}
	var oldCT *plan.CT
	if len(old) == 1 {
		oldCT = old[0]
	}
	name := opts.As
	switch {
	case opts.Replace && name != "" && name != opts.App:
		return "", nil, fmt.Errorf("--replace restores in place of app %s; it cannot also be --as %s", opts.App, name)
	case name == "" && (opts.Replace || oldCT == nil):
		name = opts.App
	case name == "":
		name = opts.App + "-restored"
	}
	if !validName(name) {
		return "", nil, fmt.Errorf("app name %q: use lower-case letters, digits and '-', starting with a letter (it becomes the hostname)", name)
	}
	if name == opts.App && oldCT != nil && !opts.Replace {
		return "", nil, fmt.Errorf("app %s runs as ct %d: restore beside it with --as NEWNAME, or in its place with --replace", opts.App, oldCT.VMID)
	}
	if name != opts.App && len(obs.Apps[name]) > 0 {
		return "", nil, fmt.Errorf("app %s already has a container (ct %d); choose another --as name", name, obs.Apps[name][0].VMID)
	}
	if opts.Replace && oldCT == nil {
		opts.Replace = false // nothing runs: restoring as the app is enough
	}
	return name, oldCT, nil
}

// archiveConfig is the container config the archive holds, read on node;
// reading it needs VM.Backup on the guest it is of, and it must be a
// container backup of opts.App.
func (rs *restorer) archiveConfig(ctx context.Context, node string, opts RestoreOptions) (map[string]string, error) {
	text, err := rs.client.BackupConfig(ctx, node, opts.Archive)
	if err != nil {
		if pve.IsPermission(err) {
			return nil, &RestoreRefusedError{App: opts.App, TokenID: rs.client.TokenID(), Missing: []MissingPriv{
				{Path: "/vms/" + archiveVMID(opts.Archive), Priv: "VM.Backup", Why: "reading an archive needs VM.Backup on the guest it is of"},
			}}
		}
		return nil, err
	}
	conf := parseConfigText(text)
	if conf["rootfs"] == "" {
		return nil, fmt.Errorf("archive %s holds no container config (no rootfs): is it a container backup?", opts.Archive)
	}
	if of := appOf(plan.ParseTags(conf["tags"])); of != "" && of != opts.App {
		return nil, fmt.Errorf("archive %s is a backup of app %s, not of %s: run `corral restore %s --archive %s`", opts.Archive, of, opts.App, of, opts.Archive)
	}
	return conf, nil
}

// planVolumes lists the archive's volumes under their names: the
// manifest's name for the mount path first (the volume the archive had
// there may since have been displaced and renamed), then the recorded
// one, then the key. A bind or device mount is refused: only root@pam
// may restore it.
func (rp *RestorePlan) planVolumes(obs *plan.Observed, opts RestoreOptions, refused *RestoreRefusedError) {
	names := volumeNames(obs)
	for _, key := range mpKeys(rp.conf) {
		mp := plan.ParseMountPoint(rp.conf[key])
		if kind := mountKind(mp.Volume); kind != "volume" {
			refused.Problems = append(refused.Problems, fmt.Sprintf("the archive's %s is a %s mount (%s at %s): PVE lets only root@pam restore it (\"restoring '%s' to %s mount is only possible for root\")", key, kind, mp.Volume, mp.Path, key, kind))
			continue
		}
		vn := opts.Names[mp.Path]
		if vn == "" {
			vn = baseName(names[mp.Volume].Name)
		}
		if vn == "" {
			vn = key
		}
		rp.Volumes = append(rp.Volumes, RestoredVolume{Key: key, Name: vn, Mount: mp.Path, Backup: mp.Backup, Empty: !mp.Backup})
		if !mp.Backup {
			rp.Notes = append(rp.Notes, fmt.Sprintf("volume %s (%s) had backup=0: it is not in the archive and comes back empty", vn, mp.Path))
		}
	}
}

// setAside picks the restore's stamp and renames the records of the new
// app's volumes already in a keeper (the app was destroyed, or is being
// replaced): they step aside as <name>-replaced-<stamp>, never freed.
func (rp *RestorePlan) setAside(obs *plan.Observed) {
	name := rp.Name
	stamp := uniqueStamp(obs, name, time.Now())
	rp.stamp = stamp
	for _, k := range obs.Keepers[rp.Node] {
		for _, vk := range sortedVolumeKeys(k.Records) {
			if vk.App != name || vk.Name != baseName(vk.Name) || !rp.restores(vk.Name) {
				continue // another app's, set aside by an earlier restore, or not in the archive
			}
			to := plan.VolumeKey{App: name, Name: vk.Name + "-replaced-" + stamp}
			rp.renames[vk] = to
			rp.Renamed = append(rp.Renamed, Renamed{From: vk.String(), To: to.String(), VolID: k.Records[vk]})
		}
	}
}

// identity is what the restored container is told it is: hostname, tags
// and description say the new app; unique=1 gives every NIC a new MAC
// (seed 004 §4.4). A static address the running app uses is refused for a
// copy beside it.
func (rp *RestorePlan) identity(opts RestoreOptions, oldCT *plan.CT, refused *RestoreRefusedError) {
	name, conf := rp.Name, rp.conf
	params := &pve.ConfigUpdate{Hostname: pve.Ptr(name)}
	var tags []string
	for _, t := range plan.ParseTags(conf["tags"]) {
		if !strings.HasPrefix(t, plan.TagAppPrefix) && !strings.HasPrefix(t, plan.TagProjectPrefix) && t != plan.TagManaged {
			tags = append(tags, t)
		}
	}
	m := plan.ParseMarker(conf["description"])
	rp.project, rp.declared = opts.Project, opts.Origin
	if opts.Project == "" && opts.Listed == nil {
		// No manifest: the archive's project and declarer.
		rp.project, rp.declared = projectOf(plan.ParseTags(conf["tags"])), m.Declared
	}
	copyOf := ""
	if name != opts.App && !slices.Contains(opts.Listed, name) {
		copyOf = opts.App
	}
	// Until it runs, the new container is tagged as a restore in flight,
	// not as the app: an interrupted restore never leaves two containers
	// of one app, and the next changing command finishes or undoes it.
	rp.finalTags = strings.Join(plan.AppTags(plan.App{Name: name, Project: rp.project, Tags: tags}), ";")
	inFlight := []string{plan.TagManaged, plan.TagRestoringPrefix + name}
	if rp.project != "" {
		inFlight = append(inFlight, plan.TagProjectPrefix+rp.project) // kept by finishRestore
	}
	params.Tags = inFlight
	desc := plan.AppDescription(plan.App{Name: name, Template: m.Template, Origin: rp.declared, Description: userDescription(conf["description"])})
	if copyOf != "" {
		desc += plan.CopyMarker(copyOf)
	}
	rp.finalDesc = plan.WithGuestMarkers(desc, m.HostKey, m.Provisioned)
	params.Description = pve.Ptr(rp.finalDesc + plan.RestoreMarker(rp.stamp))
	ip := propValue(conf["net0"], "ip")
	if opts.IP != "" && conf["net0"] != "" {
		params.Raw = map[string]string{"net0": withIP(conf["net0"], opts.IP)} // the archive's value with ip= replaced
		ip = opts.IP
	}
	if !opts.Replace && oldCT != nil && ip != "" && ip != "dhcp" && ip != "manual" && strings.Contains(oldCT.Config["net0"], "ip="+ip) {
		refused.Problems = append(refused.Problems, fmt.Sprintf("the archive's net0 has the static address %s, which app %s (ct %d) uses: pass --ip dhcp or --ip <cidr> for the copy", ip, opts.App, oldCT.VMID))
	}
	rp.params = params
}

// restorePrivileges lists what the token lacks for rp, from GET
// /access/permissions per path (a token may always read its own).
func (rs *restorer) restorePrivileges(ctx context.Context, obs *plan.Observed, rp *RestorePlan, conf map[string]string) ([]MissingPriv, bool, error) {
	type need struct{ path, priv, why string }
	vm := "/vms/" + strconv.Itoa(rp.VMID)
	needs := []need{
		{vm, "VM.Allocate", "a restore creates a new container (POST /nodes/{node}/lxc with restore=1)"},
		{vm, "VM.Config.Network", "the restored container gets the hostname " + rp.Name},
		{vm, "VM.Config.Options", "the restored container gets the app's tags and description"},
		{vm, "VM.PowerMgmt", "the restored container is started"},
		{"/storage/" + rp.Storage, "Datastore.AllocateSpace", "the restored rootfs and volumes are allocated on " + rp.Storage},
	}
	sid, _, _ := strings.Cut(rp.Archive, ":")
	owner, _ := strconv.Atoi(archiveVMID(rp.Archive))
	needs = append(needs, need{"/storage/" + sid, "Datastore.AllocateSpace", "reading the archive " + rp.Archive + " (check_volume_access on a backup)"})
	if owner > 0 {
		needs = append(needs, need{"/vms/" + strconv.Itoa(owner), "VM.Backup", "reading the archive of ct " + strconv.Itoa(owner)})
	}
	for _, key := range slices.Sorted(maps.Keys(conf)) {
		if !isIndexed(key, "net") {
			continue
		}
		if br := propValue(conf[key], "bridge"); br != "" {
			needs = append(needs, need{"/sdn/zones/localnetwork/" + br, "SDN.Use", key + " of the restored container is on bridge " + br + " (PVE 9 checks SDN.Use on it)"})
		}
	}
	if len(rp.Volumes) > 0 {
		needs = append(needs, need{vm, "VM.Config.Disk", "the restored volumes move to the keeper and are attached back as mpN"})
		for _, k := range obs.Keepers[rp.Node] {
			kp := "/vms/" + strconv.Itoa(k.VMID)
			needs = append(needs,
				need{kp, "VM.Config.Disk", "the keeper (ct " + strconv.Itoa(k.VMID) + ") takes the restored volumes"},
				need{kp, "VM.Config.Options", "the keeper's description records the volumes, and its protection is lifted meanwhile"})
		}
	}
	if rp.Replace {
		op := "/vms/" + strconv.Itoa(rp.OldVMID)
		needs = append(needs,
			need{op, "VM.PowerMgmt", "the old container is stopped before the restored one starts"},
			need{op, "VM.Config.Disk", "the old container's volumes are detached (they stay in the keeper)"},
			need{op, "VM.Allocate", "the old container is destroyed once the restored one runs"})
	}
	cache := map[string]map[string]pve.Bool01{}
	has := func(path, priv string) (bool, error) {
		p, ok := cache[path]
		if !ok {
			perms, err := rs.client.Permissions(ctx, path, "")
			if err != nil {
				return false, err
			}
			p = perms[path]
			cache[path] = p
		}
		// The value is the propagate flag; holding a privilege is
		// having the key.
		_, held := p[priv]
		return held, nil
	}
	var missing []MissingPriv
	for _, n := range needs {
		ok, err := has(n.path, n.priv)
		if err != nil {
			return nil, false, fmt.Errorf("read the token's privileges: %w", err)
		}
		if !ok {
			missing = append(missing, MissingPriv{Path: n.path, Priv: n.priv, Why: n.why})
		}
	}
	canBack := false
	if owner > 0 {
		canBack, _ = has("/vms/"+strconv.Itoa(owner), "VM.Backup")
	}
	return missing, canBack, nil
}

// RestoreResult is a finished restore.
type RestoreResult struct {
	*RestorePlan
	MAC       string `json:"mac"`
	Status    string `json:"status"`
	Destroyed int    `json:"destroyed,omitempty"` // the replaced container
}

// Restore carries out rp: restore into the new VMID (stopped, new MAC,
// the new app's hostname, tags and description), move each restored
// volume into the keeper as a retained volume of the new app (with an
// intent recorded first, as every adoption), attach it back, and start
// the container. With Replace the old container is stopped just before
// the start and destroyed only once the new one runs; if the new one does
// not start, the old one is started again.
func (e *Executor) Restore(ctx context.Context, obs *plan.Observed, rp *RestorePlan) (res *RestoreResult, err error) {
	res = &RestoreResult{RestorePlan: rp}
	name, node := rp.Name, rp.Node
	e.Project = rp.project // the keeper notes the restored volumes' project
	if rp.declared != "" {
		e.Declared = plan.OriginID(rp.declared) // and their declarer
	}
	rs := e.restorer()
	if err := rs.restoreArchive(ctx, rp); err != nil {
		return nil, err
	}
	conf, err := containerConfig(ctx, rs.client, node, rp.VMID)
	if err != nil {
		return nil, err
	}
	keepers := rs.keepers.keeperSet(obs)
	if len(rp.Volumes) > 0 {
		if err := rs.restoreVolumes(ctx, obs, rp, conf, keepers); err != nil {
			return nil, fmt.Errorf("%w\nthe restored container %d is stopped and kept as it is; run the restore again after fixing this, and destroy ct %d when you no longer need it", err, rp.VMID, rp.VMID)
		}
	}
	oldRunning := false
	if rp.Replace {
		st, err := rs.client.ContainerStatus(ctx, node, rp.OldVMID)
		if err != nil {
			return nil, err
		}
		oldRunning = st.Running()
		if err := rs.ensureStopped(ctx, rp.App, node, rp.OldVMID); err != nil {
			return nil, err
		}
	}
	if res.Status, err = rs.startRestored(ctx, rp, oldRunning); err != nil {
		return nil, err
	}
	if conf, err := containerConfig(ctx, rs.client, node, rp.VMID); err == nil {
		res.MAC = propValue(conf["net0"], "hwaddr")
	}
	old := 0
	if rp.Replace {
		old = rp.OldVMID
	}
	if err := rs.finishRestore(ctx, name, node, rp.VMID, old, rp.stamp); err != nil {
		return nil, fmt.Errorf("%w\nthe restored container %d runs; the next corral apply, destroy or restore finishes the switch", err, rp.VMID)
	}
	res.Destroyed = old
	return res, nil
}

// restoreArchive restores rp's archive into a new CT, stopped: into
// rp.VMID, or the next free one when another client took that VMID
// meanwhile (rp.VMID then says which).
func (rs *restorer) restoreArchive(ctx context.Context, rp *RestorePlan) error {
	return rs.step(rp.Name, "restore", fmt.Sprintf("%s into ct %d on %s", rp.Archive, rp.VMID, rp.Storage), func() error {
		for attempt := 0; ; attempt++ {
			upid, err := rs.client.RestoreContainer(ctx, rp.Node, rp.VMID, rp.Archive, pve.RestoreOptions{Storage: rp.Storage, Unique: true, Config: rp.params})
			if err != nil && attempt < 5 && pve.IsAlreadyExists(err) {
				id, nerr := rs.client.NextID(ctx)
				if nerr != nil {
					return nerr
				}
				rp.VMID = id
				continue
			}
			if err != nil {
				return err
			}
			return rs.wait(ctx, rp.Name, upid)
		}
	})
}

// startRestored starts the restored CT and returns its status once it
// runs. If it does not run, the old container of a --replace is started
// again when it ran, and the error says the old one is untouched.
func (rs *restorer) startRestored(ctx context.Context, rp *RestorePlan, oldRunning bool) (string, error) {
	name, node := rp.Name, rp.Node
	status := ""
	startErr := rs.step(name, "start", "ct "+strconv.Itoa(rp.VMID), func() error { return rs.start(ctx, name, node, rp.VMID) })
	if startErr == nil {
		st, err := rs.client.ContainerStatus(ctx, node, rp.VMID)
		if err != nil {
			startErr = err
		} else if !st.Running() {
			startErr = fmt.Errorf("ct %d is %s after its start", rp.VMID, st.Status)
		} else {
			status = st.Status
		}
	}
	if startErr == nil {
		return status, nil
	}
	if rp.Replace && oldRunning {
		if err := rs.step(rp.App, "start", "old ct "+strconv.Itoa(rp.OldVMID)+" again", func() error { return rs.start(ctx, rp.App, node, rp.OldVMID) }); err != nil {
			rs.obs().Warn(rp.App, fmt.Sprintf("the old container %d could not be started again: %v", rp.OldVMID, err))
		}
	}
	return "", fmt.Errorf("%w\nthe restored container %d did not start; the old container and its volumes are untouched", startErr, rp.VMID)
}

// finishRestore makes the restored container newID app's, once it runs:
// the replaced container oldID (0: none) is set aside (tagged
// corral-replaced-<app>), newID gets the app's tags and description, the
// keeper records switch (the restored volumes take their final names, the
// displaced ones become <name>-replaced-<stamp>), and oldID is destroyed
// (its volumes stay in the keeper). Every step can run again: an
// interrupted finish is completed by the next changing command (Recover).
func (rs *restorer) finishRestore(ctx context.Context, app, node string, newID, oldID int, stamp string) error {
	if oldID != 0 {
		if err := rs.step(app, "config", "set the old ct "+strconv.Itoa(oldID)+" aside", func() error {
			return rs.putConfig(ctx, node, oldID, &pve.ConfigUpdate{Tags: []string{plan.TagManaged, plan.TagReplacedPrefix + app}})
		}); err != nil {
			return err
		}
	}
	// The records switch while newID still says it is a restore in flight
	// (its marker names the stamp of the temporary records), so that an
	// interruption before it took the app's tags is finished the same way.
	if err := rs.switchRecords(ctx, app, node, newID, stamp); err != nil {
		return err
	}
	conf, err := containerConfig(ctx, rs.client, node, newID)
	if err != nil {
		return err
	}
	var userTags []string
	for _, t := range plan.ParseTags(conf["tags"]) {
		if t != plan.TagManaged && !strings.HasPrefix(t, "corral-") {
			userTags = append(userTags, t)
		}
	}
	project := projectOf(plan.ParseTags(conf["tags"])) // set by PlanRestore for a listed app
	params := &pve.ConfigUpdate{Tags: plan.AppTags(plan.App{Name: app, Project: project, Tags: userTags}),
		Description: pve.Ptr(plan.WithoutRestoreMarker(conf["description"]))}
	if err := rs.step(app, "config", "make ct "+strconv.Itoa(newID)+" app "+app+"'s", func() error {
		return rs.putConfig(ctx, node, newID, params)
	}); err != nil {
		return err
	}
	if oldID != 0 {
		return rs.destroyCT(ctx, app, node, oldID)
	}
	return nil
}

// Recover finishes or rolls back the restores an earlier corral left
// half done (plan.Observed.Restores), before any other change: a restored
// container that never took over is removed (its volumes stay in the
// keeper as <app>/*-restored-<stamp>, where `corral volumes` lists them);
// one whose old container was already set aside becomes the app's. The
// apps' rescue containers (plan.Observed.Rescues) are ended first: their
// volumes go back to the apps' containers (Rescues.EndAll). The VM apps'
// restores are finished or rolled back last (recoverVMRestores).
func (e *Executor) Recover(ctx context.Context, obs *plan.Observed) error {
	if err := e.Rescues().EndAll(ctx, obs); err != nil {
		return err
	}
	rs := e.restorer()
	for _, app := range slices.Sorted(maps.Keys(obs.Restores)) {
		r := obs.Restores[app]
		var err error
		switch {
		case r.Rollback(obs):
			err = rs.destroyCT(ctx, app, r.New.Node, r.New.VMID)
		case r.New != nil:
			old := 0
			if r.Replaced != nil {
				old = r.Replaced.VMID
			}
			err = rs.finishRestore(ctx, app, r.New.Node, r.New.VMID, old, r.Stamp)
		default:
			err = rs.destroyCT(ctx, app, r.Replaced.Node, r.Replaced.VMID)
		}
		if err != nil {
			return fmt.Errorf("recover the interrupted restore of app %s: %w", app, err)
		}
	}
	return vmRestoreOps{vmOps{r: e.ops(), corralKey: e.SSH.AuthorizedKey}}.recoverVMRestores(ctx, obs) // vmrestoreswitch.go
}

// restoreVolumes adopts every restored volume into the keeper and
// attaches it back. When the new app's names are taken by volumes it
// displaces, the restored volumes are recorded under temporary names
// (<name>-restored-<time>) until switchRecords, so that until the restored
// container runs the records still describe the old app exactly.
func (rs *restorer) restoreVolumes(ctx context.Context, obs *plan.Observed, rp *RestorePlan, conf map[string]string, keepers *keeperSet) error {
	name, node := rp.Name, rp.Node
	if len(keepers.byNode[node]) == 0 {
		k, err := rs.keepers.ensureKeeper(ctx, plan.KeeperChange{Node: node, Action: plan.Create}, nil, &plan.Plan{}, obs)
		if err != nil {
			return err
		}
		keepers.add(k)
	}
	var atts []attachment
	for i := range rp.Volumes {
		v := &rp.Volumes[i]
		mp := plan.ParseMountPoint(conf[v.Key])
		if mp.Volume == "" {
			return fmt.Errorf("restored ct %d has no %s", rp.VMID, v.Key)
		}
		vk := rp.adoptKey(v.Name)
		sid, _, _ := strings.Cut(mp.Volume, ":")
		var volid string
		err := rs.step(name, "volume", "adopt restored "+mp.Volume+" as "+vk.String(), func() error {
			k, done, err := keepers.forNew(ctx, node, vk, sid)
			if err != nil {
				return err
			}
			defer done()
			volid, err = k.adopt(ctx, vk, mp.Volume)
			return err
		})
		if err != nil {
			return err
		}
		v.VolID = volid
		atts = append(atts, attachment{VolumeChange: plan.VolumeChange{Volume: plan.Volume{Name: v.Name, Mount: v.Mount, Backup: v.Backup},
			Action: plan.VolAttach, VolID: volid, Key: v.Key}})
	}
	conf, err := containerConfig(ctx, rs.client, node, rp.VMID)
	if err != nil {
		return err
	}
	return rs.attach(ctx, name, node, rp.VMID, atts, conf)
}

// restores reports whether the archive holds a volume named name.
func (rp *RestorePlan) restores(name string) bool {
	for _, v := range rp.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

// adoptKey is the record a restored volume is adopted under: its final
// name, or a temporary one while that name belongs to a displaced volume.
func (rp *RestorePlan) adoptKey(vol string) plan.VolumeKey {
	final := plan.VolumeKey{App: rp.Name, Name: vol}
	if _, taken := rp.renames[final]; taken {
		return plan.VolumeKey{App: rp.Name, Name: vol + "-restored-" + rp.stamp}
	}
	return final
}

// switchRecords, once the restored container newID runs, renames app's
// records on node from what the keepers and newID hold now, so it can run
// again after an interruption: a record of a volume newID does not mount
// becomes <name>-replaced-<stamp>, a restored volume's temporary record
// <name>-restored-<stamp> becomes <name>.
func (rs *restorer) switchRecords(ctx context.Context, app, node string, newID int, stamp string) error {
	conf, err := containerConfig(ctx, rs.client, node, newID)
	if err != nil {
		return err
	}
	mounted := map[string]bool{}
	for k, v := range conf {
		if isMP(k) {
			mounted[plan.ParseMountPoint(v).Volume] = true
		}
	}
	res, err := rs.client.ClusterResources(ctx, "vm")
	if err != nil {
		return fmt.Errorf("list guests: %w", err)
	}
	return rs.step(app, "keeper", "record the restored volumes under app "+app+", the displaced ones as *-replaced-"+stamp, func() error {
		for _, r := range res {
			if r.Node != node || r.Type != "lxc" || !slices.Contains(plan.ParseTags(r.Tags), plan.TagKeeper) { // a keeper VM holds no CT volume
				continue
			}
			k := &keeper{ops: rs.keepers, node: node, vmid: r.VMID}
			cc, err := k.read(ctx)
			if err != nil {
				return err
			}
			moves := restoreMoves(plan.MountRecords(cc.Values), app, stamp, mounted)
			if len(moves) == 0 {
				continue
			}
			if err := k.rename(ctx, moves); err != nil {
				return err
			}
		}
		return nil
	})
}

// restoreMoves are the record renames of a finished restore (see
// switchRecords): each restored volume newID mounts under its temporary
// name <name>-restored-<stamp> takes <name>, and the record it displaces
// becomes <name>-replaced-<stamp>. A record nothing restored replaces
// keeps its name: the app must never be left without a volume it had
// (the next apply would make an empty one).
func restoreMoves(recs map[plan.VolumeKey]string, app, stamp string, mounted map[string]bool) map[plan.VolumeKey]plan.VolumeKey {
	moves := map[plan.VolumeKey]plan.VolumeKey{}
	restored, replaced := "-restored-"+stamp, "-replaced-"+stamp
	for vk, volid := range recs {
		if vk.App != app || !strings.HasSuffix(vk.Name, restored) || !mounted[volid] {
			continue
		}
		final := plan.VolumeKey{App: app, Name: strings.TrimSuffix(vk.Name, restored)}
		moves[vk] = final
		if _, taken := recs[final]; taken {
			moves[final] = plan.VolumeKey{App: app, Name: final.Name + replaced}
		}
	}
	return moves
}

// uniqueStamp is the time stamp a restore's temporary and displaced
// records carry, made unique among app's records (two restores in one
// second would otherwise give two volumes one name).
func uniqueStamp(obs *plan.Observed, app string, now time.Time) string {
	base := now.UTC().Format("20060102-150405")
	taken := func(stamp string) bool {
		has := func(vk plan.VolumeKey) bool {
			return vk.App == app && (strings.HasSuffix(vk.Name, "-replaced-"+stamp) || strings.HasSuffix(vk.Name, "-restored-"+stamp))
		}
		for _, ks := range obs.Keepers {
			for _, k := range ks {
				if slices.ContainsFunc(slices.Collect(maps.Keys(k.Records)), has) {
					return true
				}
			}
		}
		for _, ks := range obs.VMKeepers { // a VM app's displaced disks (vmrestoreswitch.go)
			for _, k := range ks {
				if slices.ContainsFunc(slices.Collect(maps.Values(plan.ParseVMKeeperNotes(k.Config["description"]))), has) {
					return true
				}
			}
		}
		return false
	}
	stamp := base
	for i := 2; taken(stamp); i++ {
		stamp = base + "-" + strconv.Itoa(i)
	}
	return stamp
}

// archiveNode is the node whose storage lists the archive: the old
// container's node first.
func (rs *restorer) archiveNode(ctx context.Context, obs *plan.Observed, volid string, old *plan.CT) (string, error) {
	sid, _, ok := strings.Cut(volid, ":")
	if !ok || !strings.Contains(volid, "vzdump-lxc-") {
		return "", fmt.Errorf("--archive %q: want a container backup volid such as local:backup/vzdump-lxc-105-2026_06_07-10_00_00.tar.zst (`corral backups` lists them)", volid)
	}
	nodes := slices.Clone(obs.Nodes)
	if old != nil {
		nodes = append([]string{old.Node}, nodes...)
	}
	var lastErr error
	for _, n := range nodes {
		vols, err := rs.client.Backups(ctx, n, sid, 0)
		if err != nil {
			lastErr = err
			continue
		}
		for _, v := range vols {
			if v.VolID == volid {
				return n, nil
			}
		}
	}
	if lastErr != nil && pve.IsPermission(lastErr) {
		return "", fmt.Errorf("archive %s: %w (listing backups needs Datastore.Audit or Datastore.AllocateSpace on /storage/%s)", volid, lastErr, sid)
	}
	return "", fmt.Errorf("archive %s is on no node's storage %s; `corral backups` lists the archives", volid, sid)
}

// archiveVMID is the VMID in a vzdump archive name ("" if none).
func archiveVMID(volid string) string {
	_, rest, ok := strings.Cut(volid, "vzdump-lxc-")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "-")
	return id
}

// userDescription is a description without corral's marker block.
func userDescription(desc string) string {
	var keep []string
	for _, line := range strings.Split(desc, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "managed by corral") || strings.HasPrefix(t, "corral-") {
			break
		}
		keep = append(keep, line)
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// withIP replaces ip= in a net0 value and drops hwaddr, so PVE gives the
// NIC a new MAC.
func withIP(net0, ip string) string {
	var out []string
	set := false
	for _, item := range strings.Split(net0, ",") {
		k, _, _ := strings.Cut(item, "=")
		switch k {
		case "hwaddr":
			continue
		case "ip":
			item, set = "ip="+ip, true
		case "gw":
			if ip == "dhcp" {
				continue
			}
		}
		out = append(out, item)
	}
	if !set {
		out = append(out, "ip="+ip)
	}
	return strings.Join(out, ",")
}

// validName: an app name is a DNS label (it becomes the hostname).
func validName(s string) bool {
	if s == "" || len(s) > 63 || s[0] < 'a' || s[0] > 'z' || strings.HasSuffix(s, "-") {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// baseName is a record name without the -replaced-/-restored- suffix an
// earlier restore gave it.
func baseName(name string) string {
	for _, sep := range []string{"-replaced-", "-restored-"} {
		if i := strings.Index(name, sep); i > 0 {
			name = name[:i]
		}
	}
	return name
}
