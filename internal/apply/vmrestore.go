package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Restoring a VM app's archive (issue 34): qemu-server's restore (POST
// /nodes/{node}/qemu with archive=) into a new VMID, with unique=1 so
// that the copy gets new MACs and a new SMBIOS UUID, and the identity of
// the app it becomes (name, Notes) given as overrides in the same
// request. A copy under a name the manifest does not list is marked as a
// copy (plan's CopyMarker), which the project's apply leaves alone, as
// for a container.
//
// The app's retained disks (vmkeeper.go) are in the archive unless they
// have backup=0: vzdump copies every drive of the VM, and a restore
// recreates them as disks of the new VM with the archived options, their
// serials included. PVE takes no drive option with archive= ("option
// conflicts with option 'archive'"), so the serials can change only after
// the restore. As for a container, whose restored volumes become the
// app's and displace the volumes the keeper recorded under those names
// (restore.go), the restored disks become the restored app's retained
// disks: each takes the serial of its volume under the new app
// (plan.VMVolumeSerial), and a disk that carries that serial already (on
// the keeper VM, or on the VM a --replace replaces, which gives its disks
// to the keeper VM first) is kept under a new serial, as volume
// <name>-replaced-<stamp> — never freed. Excluding the retained disks from
// the backup instead (backup=0) would leave a VM app's data out of its
// backups. A disk with backup=0 is not in the archive (vzdump skips it,
// qmrestore comments its line out): the app's disk of that name, if any,
// keeps its data and the next apply attaches it.
//
// From the qmrestore on, the new VM is tagged corral-restoring-<name>,
// with the stamp and the archived serials' volumes in its Notes (plan's
// VMRestore), so an interrupted restore never leaves two VMs of one app
// or two disks with one serial that a plan would count, and the next
// changing command finishes it or rolls it back (recoverVMRestores).

// VMRestorePlan is what RestoreVM will do, worked out before any change.
type VMRestorePlan struct {
	App     string                    `json:"app"`
	Name    string                    `json:"name"`
	Kind    string                    `json:"kind"`
	Archive string                    `json:"archive"`
	Node    string                    `json:"node"`
	VMID    int                       `json:"vmid"`
	Storage string                    `json:"storage"` // "" keeps each disk's archived storage
	Replace bool                      `json:"replace"`
	OldVMID int                       `json:"old_vmid,omitempty"`
	CopyOf  string                    `json:"copy_of,omitempty"`
	Volumes []VMRestoredVolume        `json:"volumes"`
	Renamed []Renamed                 `json:"renamed"`
	Notes   []string                  `json:"notes"`
	config  map[string]string         // the identity overrides, in flight
	records map[string]plan.VolumeKey // archived serial → the restored app's volume
	stamp   string
}

// VMRestoredVolume is one retained disk of the archive.
type VMRestoredVolume struct {
	Name   string `json:"name"`
	Key    string `json:"key"`    // its drive key in the archive (scsiN)
	Serial string `json:"serial"` // the serial it takes: the restored app's
	// Empty: backup=0 in the archive, so the restore does not make it.
	Empty bool `json:"empty"`
}

// VMRestoreResult is a finished VM restore.
type VMRestoreResult struct {
	*VMRestorePlan
	Status    string `json:"status"`
	MAC       string `json:"mac"`
	Destroyed int    `json:"destroyed,omitempty"` // the replaced VM
}

// PlanVMRestore reads the VM archive's config, checks it is opts.App's
// and picks the restored app's name, node, identity and disks.
func (e *Executor) PlanVMRestore(ctx context.Context, obs *plan.Observed, opts RestoreOptions) (*VMRestorePlan, error) {
	name, old, err := vmRestoreName(obs, &opts)
	if err != nil {
		return nil, err
	}
	node, err := archiveNodeVM(ctx, e.Client, opts.Archive, vmRestoreNodes(obs, name, old))
	if err != nil {
		return nil, err
	}
	text, err := e.Client.BackupConfig(ctx, node, opts.Archive)
	if err != nil {
		return nil, fmt.Errorf("%w (reading an archive needs VM.Backup on the guest it is of, /vms/%s)", err, archiveVMID(opts.Archive))
	}
	conf := parseConfigText(withoutVMADeviceMap(text))
	if of := appOf(plan.ParseTags(conf["tags"])); of != "" && of != opts.App {
		return nil, fmt.Errorf("archive %s is a backup of app %s, not of %s: run `corral restore %s --archive %s`", opts.Archive, of, opts.App, of, opts.Archive)
	}
	rp := &VMRestorePlan{App: opts.App, Name: name, Kind: plan.KindVM, Archive: opts.Archive, Node: node, Storage: opts.Storage, Replace: opts.Replace,
		Volumes: []VMRestoredVolume{}, Renamed: []Renamed{}, Notes: []string{}, stamp: uniqueStamp(obs, name, time.Now())}
	if opts.Replace {
		rp.OldVMID = old.VMID
		if why := plan.VMChangedElsewhere(opts.App, old, opts.Project, opts.Origin, opts.Explicit, "restore an archive in its place"); why != "" {
			return nil, &RestoreRefusedError{App: opts.App, TokenID: e.Client.TokenID(), Problems: []string{why}}
		}
	}
	if name != opts.App && !slices.Contains(opts.Listed, name) {
		rp.CopyOf = opts.App
	}
	rp.planDisks(obs, opts, conf, old)
	if err := rp.identity(conf, opts, old); err != nil {
		return nil, err
	}
	rp.VMID, err = e.Client.NextID(ctx)
	if err != nil {
		return nil, fmt.Errorf("next vmid: %w", err)
	}
	return rp, nil
}

// vmRestoreNodes are the nodes the archive is looked for on, best first:
// the replaced VM's, else the node whose keeper VM holds disks of the
// app the restore makes (its retained disks stay on their node), else
// every node.
func vmRestoreNodes(obs *plan.Observed, name string, old *plan.VM) []string {
	if old != nil {
		return []string{old.Node}
	}
	var first []string
	for _, n := range slices.Sorted(maps.Keys(obs.VMKeepers)) {
		for _, k := range obs.VMKeepers[n] {
			for serial, vk := range plan.ParseVMKeeperNotes(k.Config["description"]) {
				if _, held := k.Disks()[serial]; held && vk.App == name && !slices.Contains(first, n) {
					first = append(first, n)
				}
			}
		}
	}
	if len(first) == 1 {
		return first
	}
	return obs.Nodes
}

// vmRestoreName is the app the restore makes (--as; the app itself with
// --replace or when it has no VM, else <app>-restored beside it) and the
// app's VM, if any. A --replace with no VM becomes a restore as the app.
func vmRestoreName(obs *plan.Observed, opts *RestoreOptions) (string, *plan.VM, error) {
	if r := obs.VMRestores[opts.App]; r != nil {
		return "", nil, fmt.Errorf("a restore of app %s was interrupted: run corral apply first, which finishes or rolls it back", opts.App)
	}
	var old *plan.VM
	if len(obs.VMs[opts.App]) > 0 {
		vm, err := AppVM(obs, opts.App)
		if err != nil {
			return "", nil, err
		}
		old = vm
	}
	name := opts.As
	switch {
	case opts.Replace && name != "" && name != opts.App:
		return "", nil, fmt.Errorf("--replace restores in place of app %s; it cannot also be --as %s", opts.App, name)
	case name == "" && (opts.Replace || old == nil):
		name = opts.App
	case name == "":
		name = opts.App + "-restored"
	}
	if !validName(name) {
		return "", nil, fmt.Errorf("app name %q: use lower-case letters, digits and '-', starting with a letter (it becomes the VM's name)", name)
	}
	if name == opts.App && old != nil && !opts.Replace {
		return "", nil, fmt.Errorf("app %s runs as vm %d: restore beside it with --as NEWNAME, or in its place with --replace", opts.App, old.VMID)
	}
	if name != opts.App && len(obs.VMs[name])+len(obs.Apps[name]) > 0 {
		return "", nil, fmt.Errorf("app %s already has a guest; choose another --as name", name)
	}
	if name != opts.App && obs.VMRestores[name] != nil {
		return "", nil, fmt.Errorf("a restore as app %s was interrupted: run corral apply first, which finishes or rolls it back", name)
	}
	if opts.Replace && old == nil {
		opts.Replace = false // nothing runs: restoring as the app is enough
	}
	return name, old, nil
}

// archiveNodeVM is the node that restores the archive: the first of
// nodes whose storage lists it (a local backup storage is read only by
// its own node); a single node is taken as it is.
func archiveNodeVM(ctx context.Context, client *pve.Client, volid string, nodes []string) (string, error) {
	if len(nodes) == 1 {
		return nodes[0], nil
	}
	storage, _, _ := strings.Cut(volid, ":")
	for _, node := range nodes {
		vols, err := client.Backups(ctx, node, storage, 0)
		if err != nil {
			continue // not a storage of this node
		}
		if slices.ContainsFunc(vols, func(v pve.Volume) bool { return v.VolID == volid }) {
			return node, nil
		}
	}
	return "", fmt.Errorf("no node lists archive %s (`corral backups` lists the archives)", volid)
}

// withoutVMADeviceMap drops the "#qmdump#map:…" lines vzdump appends to
// a VM archive's config, which a config reader would take for Notes.
func withoutVMADeviceMap(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, "#qmdump#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// identity is what the restored VM is told it is: its name and Notes
// say the new app (a copy's Notes say whose copy it is); its tags say a
// restore in flight until switchRestored gives it the app's. An address
// the running app uses is refused for a copy beside it unless --ip gives
// another.
func (rp *VMRestorePlan) identity(conf map[string]string, opts RestoreOptions, old *plan.VM) error {
	var tags []string
	for _, t := range plan.ParseTags(conf["tags"]) {
		if !strings.HasPrefix(t, "corral-") && t != plan.TagManaged {
			tags = append(tags, t)
		}
	}
	m := plan.ParseMarker(conf["description"])
	project, declared := opts.Project, opts.Origin
	if opts.Project == "" && opts.Listed == nil {
		project, declared = projectOf(plan.ParseTags(conf["tags"])), m.Declared // no manifest: the archive's
	}
	a := plan.App{Name: rp.Name, Project: project, Tags: tags, Origin: declared, Description: userDescription(conf["description"]),
		VM: &plan.VMSpec{Image: plan.VMImageOf(conf["description"])}}
	desc := plan.VMDescription(a)
	if rp.CopyOf != "" {
		desc += plan.CopyMarker(rp.CopyOf)
	}
	inFlight := append([]string{plan.TagManaged, plan.TagRestoringPrefix + rp.Name}, tags...)
	if project != "" {
		inFlight = append(inFlight, plan.TagProjectPrefix+project) // kept by switchRestored
	}
	rp.config = map[string]string{"name": rp.Name, "tags": strings.Join(inFlight, ";"),
		"description": desc + plan.RestoreMarker(rp.stamp) + plan.VMVolumeLines(rp.records)}
	ipc := conf["ipconfig0"]
	if opts.IP != "" {
		ipc = withIPConfig(ipc, opts.IP)
		rp.config["ipconfig0"] = ipc
	}
	ip := propValue(ipc, "ip")
	if !opts.Replace && old != nil && ip != "" && ip != "dhcp" && propValue(old.Config["ipconfig0"], "ip") == ip {
		return fmt.Errorf("restore refused before any change: the archive's ipconfig0 has the static address %s, which app %s (vm %d) uses: pass --ip dhcp or --ip <cidr> for the copy", ip, opts.App, old.VMID)
	}
	rp.Notes = append(rp.Notes, "new MACs and SMBIOS UUID (unique=1); the name, tags and Notes say app "+rp.Name)
	if rp.CopyOf != "" {
		rp.Notes = append(rp.Notes, fmt.Sprintf("the manifest does not list %s: it is marked a copy of %s, which apply leaves alone and `corral destroy %s` removes", rp.Name, rp.CopyOf, rp.Name))
	}
	return nil
}

// planDisks lists the archive's retained disks (drives with a serial
// corral gave) under their volumes' names: the one a keeper VM's Notes
// record for the serial, else the manifest's volume of the app whose
// serial it is, else the drive key. Each takes the restored app's serial
// for that name; a disk that already has it (on the node's keeper VM, or
// on the VM a --replace replaces) is kept as <name>-replaced-<stamp>.
func (rp *VMRestorePlan) planDisks(obs *plan.Observed, opts RestoreOptions, conf map[string]string, old *plan.VM) {
	known := map[string]plan.VolumeKey{}
	for _, n := range slices.Sorted(maps.Keys(obs.VMKeepers)) {
		for _, k := range obs.VMKeepers[n] {
			maps.Copy(known, plan.ParseVMKeeperNotes(k.Config["description"]))
		}
	}
	for _, v := range opts.Volumes {
		known[plan.VMVolumeSerial(opts.App, v)] = plan.VolumeKey{App: opts.App, Name: v}
	}
	held := map[string]string{} // serial → volid of a disk the restore displaces
	for _, k := range obs.VMKeepers[rp.Node] {
		for serial, d := range k.Disks() {
			held[serial] = d.Volume
		}
	}
	if rp.Replace && old != nil {
		for serial, d := range plan.VMVolumeDisks(old.Config) {
			held[serial] = d.Volume
		}
	}
	rp.records = map[string]plan.VolumeKey{}
	disks := plan.VMVolumeDisks(conf)
	for _, serial := range slices.Sorted(maps.Keys(disks)) {
		d := disks[serial]
		name := d.Key
		if vk, ok := known[serial]; ok && vk.App == opts.App {
			name = vk.Name
		}
		final := plan.VMVolumeSerial(rp.Name, name)
		v := VMRestoredVolume{Name: name, Key: d.Key, Serial: final, Empty: driveOption(conf[d.Key], "backup") == "0"}
		rp.Volumes = append(rp.Volumes, v)
		if v.Empty {
			rp.Notes = append(rp.Notes, fmt.Sprintf("volume %s (%s) had backup=0: it is not in the archive; a disk app %s has of that name keeps its data and the next apply attaches it", name, d.Key, rp.Name))
			continue
		}
		rp.records[serial] = plan.VolumeKey{App: rp.Name, Name: name}
		if volid, ok := held[final]; ok {
			to := plan.VolumeKey{App: rp.Name, Name: name + "-replaced-" + rp.stamp}
			rp.Renamed = append(rp.Renamed, Renamed{From: rp.Name + "/" + name, To: to.String(), VolID: volid})
		}
	}
}

// driveOption is option k of a drive value, "" when absent.
func driveOption(drive, k string) string {
	for _, item := range strings.Split(drive, ",")[1:] {
		if v, ok := strings.CutPrefix(item, k+"="); ok {
			return v
		}
	}
	return ""
}

// withIPConfig is ipconfig0 with its ip= set to ip ("dhcp" or a CIDR);
// a gateway stays only with a static address.
func withIPConfig(ipc, ip string) string {
	if ip == "dhcp" {
		return "ip=dhcp"
	}
	out := "ip=" + ip
	if gw := propValue(ipc, "gw"); gw != "" {
		out += ",gw=" + gw
	}
	return out
}

// RestoreVM carries out rp: the restore into its VMID as a restore in
// flight (one create at a time, the next free VMID again if another took
// it meanwhile), the switch that makes it the app's (switchRestored),
// its start, since an app runs, and the replaced VM's destroy.
func (e *Executor) RestoreVM(ctx context.Context, rp *VMRestorePlan) (*VMRestoreResult, error) {
	v := vmRestoreOps{vmOps{r: e.ops(), corralKey: e.SSH.AuthorizedKey}}
	if err := v.restoreArchive(ctx, rp); err != nil {
		return nil, err
	}
	if err := v.switchRestored(ctx, rp.Name, rp.Node, rp.VMID, rp.OldVMID, rp.stamp); err != nil {
		return nil, fmt.Errorf("%w\nthe restore of vm %d is not finished: the next corral apply finishes it (or, while the old VM is still the app's, removes vm %d)", err, rp.VMID, rp.VMID)
	}
	res := &VMRestoreResult{VMRestorePlan: rp}
	if err := v.renamedVolIDs(ctx, rp); err != nil {
		return nil, err
	}
	if err := v.start(ctx, rp.Name, rp.Node, rp.VMID); err != nil {
		return nil, fmt.Errorf("vm %d is restored as app %s but did not start: %w; `corral apply` starts it (and removes the replaced VM, whose retained disks are on the keeper VM)", rp.VMID, rp.Name, err)
	}
	if rp.OldVMID != 0 {
		if err := v.destroy(ctx, plan.Change{App: rp.Name, Kind: plan.KindVM, Node: rp.Node, OldVMID: rp.OldVMID}); err != nil {
			return nil, fmt.Errorf("vm %d runs as app %s; the replaced vm %d was not removed: %w; the next corral apply removes it", rp.VMID, rp.Name, rp.OldVMID, err)
		}
		res.Destroyed = rp.OldVMID
	}
	conf, err := v.r.client.VMConfigOf(ctx, rp.Node, rp.VMID, true)
	if err != nil {
		return nil, err
	}
	res.MAC = vmMAC(conf.Values["net0"])
	st, err := v.r.client.VMStatusOf(ctx, rp.Node, rp.VMID)
	if err != nil {
		return nil, err
	}
	res.Status = st.Status
	return res, nil
}

// renamedVolIDs sets the volids of rp's displaced disks as the keeper VM
// holds them now: a replaced VM's disks were renamed by their reassign.
func (v vmRestoreOps) renamedVolIDs(ctx context.Context, rp *VMRestorePlan) error {
	if len(rp.Renamed) == 0 {
		return nil
	}
	keeper, err := v.keeperVM(ctx, rp.Name, rp.Node, false)
	if err != nil || keeper == 0 {
		return err
	}
	conf, err := v.r.client.VMConfigOf(ctx, rp.Node, keeper, true)
	if err != nil {
		return err
	}
	disks := plan.VMVolumeDisks(conf.Values)
	for i, r := range rp.Renamed {
		if d, ok := disks[plan.VMVolumeSerial(rp.Name, strings.TrimPrefix(r.To, rp.Name+"/"))]; ok {
			rp.Renamed[i].VolID = d.Volume
		}
	}
	return nil
}

// restoreArchive runs qmrestore of rp's archive into rp.VMID, or the
// next free VMID when another client took it meanwhile.
func (v vmRestoreOps) restoreArchive(ctx context.Context, rp *VMRestorePlan) error {
	return v.r.step(rp.Name, "restore", fmt.Sprintf("%s into vm %d on %s", rp.Archive, rp.VMID, rp.Node), func() error {
		for attempt := 1; ; attempt++ {
			v.r.creating.Lock()
			upid, err := v.r.client.RestoreVM(ctx, rp.Node, rp.VMID, rp.Archive, pve.VMRestoreOptions{Storage: rp.Storage, Unique: true, Config: rp.config})
			if pve.IsAlreadyExists(err) && attempt < 5 {
				rp.VMID, err = v.r.client.NextID(ctx)
				v.r.creating.Unlock()
				if err != nil {
					return err
				}
				continue
			}
			v.r.creating.Unlock()
			if err != nil {
				return err
			}
			return v.r.wait(ctx, rp.Name, upid)
		}
	})
}

// vmMAC is the MAC of a netN value ("virtio=BC:24:…,bridge=vmbr0").
func vmMAC(net string) string {
	first, _, _ := strings.Cut(net, ",")
	if _, mac, ok := strings.Cut(first, "="); ok {
		return mac
	}
	return ""
}
