package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Restoring a VM app's archive (issue 34): qemu-server's restore (POST
// /nodes/{node}/qemu with archive=) into a new VMID, with unique=1 so
// that the copy gets new MACs and a new SMBIOS UUID, and the identity of
// the app it becomes (name, tags, Notes) given as overrides in the same
// request, so the VM is never the old app under a new VMID. A copy under
// a name the manifest does not list is marked as a copy (plan's
// CopyMarker), which the project's apply leaves alone, as for a
// container. Restoring in place of a running VM app (--replace) is not
// there yet.

// VMRestorePlan is what RestoreVM will do, worked out before any change.
type VMRestorePlan struct {
	App     string   `json:"app"`
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Archive string   `json:"archive"`
	Node    string   `json:"node"`
	VMID    int      `json:"vmid"`
	Storage string   `json:"storage"` // "" keeps each disk's archived storage
	CopyOf  string   `json:"copy_of,omitempty"`
	Notes   []string `json:"notes"`

	config map[string]string // the identity overrides
}

// VMRestoreResult is a finished VM restore.
type VMRestoreResult struct {
	Archive string `json:"archive"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	VMID    int    `json:"vmid"`
	Node    string `json:"node"`
	Status  string `json:"status"`
	MAC     string `json:"mac"`
}

// PlanVMRestore reads the VM archive's config, checks it is opts.App's
// and picks the restored app's name, node and identity.
func (e *Executor) PlanVMRestore(ctx context.Context, obs *plan.Observed, opts RestoreOptions) (*VMRestorePlan, error) {
	if opts.Replace {
		return nil, fmt.Errorf("restore --replace of a VM app is not there yet: restore beside it (--as NAME, or without --as as %s-restored), "+
			"or `corral destroy %s` first and restore as the app", opts.App, opts.App)
	}
	name, old, err := vmRestoreName(obs, opts)
	if err != nil {
		return nil, err
	}
	node, err := archiveNodeVM(ctx, e.Client, obs, opts.Archive, old)
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
	rp := &VMRestorePlan{App: opts.App, Name: name, Kind: plan.KindVM, Archive: opts.Archive, Node: node, Storage: opts.Storage, Notes: []string{}}
	if name != opts.App && !slices.Contains(opts.Listed, name) {
		rp.CopyOf = opts.App
	}
	if err := rp.identity(conf, opts, old); err != nil {
		return nil, err
	}
	rp.VMID, err = e.Client.NextID(ctx)
	if err != nil {
		return nil, fmt.Errorf("next vmid: %w", err)
	}
	return rp, nil
}

// vmRestoreName is the app the restore makes (--as, the app itself when
// it has no VM, else <app>-restored beside it) and the app's VM, if any.
func vmRestoreName(obs *plan.Observed, opts RestoreOptions) (string, *plan.VM, error) {
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
	case name == "" && old == nil:
		name = opts.App
	case name == "":
		name = opts.App + "-restored"
	}
	if !validName(name) {
		return "", nil, fmt.Errorf("app name %q: use lower-case letters, digits and '-', starting with a letter (it becomes the VM's name)", name)
	}
	if name == opts.App && old != nil {
		return "", nil, fmt.Errorf("app %s runs as vm %d: restore beside it with --as NEWNAME", opts.App, old.VMID)
	}
	if name != opts.App && len(obs.VMs[name])+len(obs.Apps[name]) > 0 {
		return "", nil, fmt.Errorf("app %s already has a guest; choose another --as name", name)
	}
	return name, old, nil
}

// archiveNodeVM is the node that restores the archive: the app's VM's
// when it has one, else the first node whose storage lists the archive
// (a local backup storage is read only by its own node).
func archiveNodeVM(ctx context.Context, client *pve.Client, obs *plan.Observed, volid string, old *plan.VM) (string, error) {
	if old != nil {
		return old.Node, nil
	}
	storage, _, _ := strings.Cut(volid, ":")
	for _, node := range obs.Nodes {
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

// identity is what the restored VM is told it is: its name, tags and
// Notes say the new app (a copy's Notes say whose copy it is); an
// address the running app uses is refused for a copy beside it unless
// --ip gives another.
func (rp *VMRestorePlan) identity(conf map[string]string, opts RestoreOptions, old *plan.VM) error {
	var tags []string
	for _, t := range plan.ParseTags(conf["tags"]) {
		if !strings.HasPrefix(t, plan.TagAppPrefix) && !strings.HasPrefix(t, plan.TagProjectPrefix) && t != plan.TagManaged {
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
	rp.config = map[string]string{"name": rp.Name, "tags": strings.Join(plan.AppTags(a), ";"), "description": desc}
	ipc := conf["ipconfig0"]
	if opts.IP != "" {
		ipc = withIPConfig(ipc, opts.IP)
		rp.config["ipconfig0"] = ipc
	}
	ip := propValue(ipc, "ip")
	if old != nil && ip != "" && ip != "dhcp" && propValue(old.Config["ipconfig0"], "ip") == ip {
		return fmt.Errorf("restore refused before any change: the archive's ipconfig0 has the static address %s, which app %s (vm %d) uses: pass --ip dhcp or --ip <cidr> for the copy", ip, opts.App, old.VMID)
	}
	rp.Notes = append(rp.Notes, "new MACs and SMBIOS UUID (unique=1); the name, tags and Notes say app "+rp.Name)
	if rp.CopyOf != "" {
		rp.Notes = append(rp.Notes, fmt.Sprintf("the manifest does not list %s: it is marked a copy of %s, which apply leaves alone and `corral destroy %s` removes", rp.Name, rp.CopyOf, rp.Name))
	}
	return nil
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

// RestoreVM carries out rp: the restore into its VMID (one create at a
// time, the next free VMID again if another took it meanwhile), then the
// start, since an app runs.
func (e *Executor) RestoreVM(ctx context.Context, rp *VMRestorePlan) (*VMRestoreResult, error) {
	v := vmOps{r: e.ops(), corralKey: e.SSH.AuthorizedKey}
	err := v.r.step(rp.Name, "restore", fmt.Sprintf("%s into vm %d on %s", rp.Archive, rp.VMID, rp.Node), func() error {
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
	if err != nil {
		return nil, err
	}
	if err := v.start(ctx, rp.Name, rp.Node, rp.VMID); err != nil {
		return nil, fmt.Errorf("vm %d is restored but did not start: %w; `corral apply` starts it", rp.VMID, err)
	}
	res := &VMRestoreResult{Archive: rp.Archive, Name: rp.Name, Kind: plan.KindVM, VMID: rp.VMID, Node: rp.Node}
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

// vmMAC is the MAC of a netN value ("virtio=BC:24:…,bridge=vmbr0").
func vmMAC(net string) string {
	first, _, _ := strings.Cut(net, ",")
	if _, mac, ok := strings.Cut(first, "="); ok {
		return mac
	}
	return ""
}
