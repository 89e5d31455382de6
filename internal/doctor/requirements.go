package doctor

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
)

// SDNZone is the zone PVE checks bridge use in: every plain Linux bridge
// is a vnet of the "localnetwork" zone (behaviour.md, check_vnet_access).
const SDNZone = "localnetwork"

// Requirement is one privilege an operation of the manifest needs on one
// ACL path.
type Requirement struct {
	Path string `json:"path"`
	Priv string `json:"privilege"`
	// Alt are privileges PVE accepts instead of Priv (check_any).
	Alt []string `json:"alternatives,omitempty"`
	// Propagate says Path stands for children not known yet (a VMID that
	// /cluster/nextid will hand out), so the privilege must be inherited.
	Propagate bool   `json:"propagate,omitempty"`
	Operation string `json:"operation"`
	Why       string `json:"why"`
	App       string `json:"app,omitempty"`
	// Later marks a privilege this manifest does not need against the
	// cluster as it is, but a likely next change does (a template the
	// node does not hold yet is downloaded): the setup grants it, and
	// doctor warns instead of failing when it is missing.
	Later bool `json:"later,omitempty"`
}

// Placement is where an app's container is, or will be created.
type Placement struct {
	Node string `json:"node"`
	VMID int    `json:"vmid,omitempty"` // 0: not created and not pinned
}

// Targets is what Requirements must know about the cluster to name exact
// paths. The zero value means: nothing exists yet, nodes unknown (an app
// without node needs its node privileges on /nodes), PVE 9.
type Targets struct {
	// Version is the PVE release ("9.1", "8.4"); "" is taken as 9.
	Version string
	// Apps maps an app to its placement; a missing app is on DefaultNode.
	Apps map[string]Placement
	// DefaultNode is where an app without node and container goes.
	DefaultNode string
	// Keepers maps a node to its keeper CT's VMID (absent: none yet).
	Keepers map[string]int
	// MissingTemplates holds "node/volid" of templates a node lacks.
	MissingTemplates map[string]bool
}

// major is the PVE major version of t, 9 when unknown.
func (t Targets) major() int {
	if t.Version == "" {
		return 9
	}
	m, _, _ := strings.Cut(t.Version, ".")
	n, err := strconv.Atoi(m)
	if err != nil {
		return 9
	}
	return n
}

func (t Targets) placement(a manifest.App) Placement {
	p, ok := t.Apps[a.Name]
	if !ok {
		p = Placement{Node: a.Node, VMID: a.VMID}
	}
	if p.Node == "" {
		p.Node = a.Node
	}
	if p.Node == "" {
		p.Node = t.DefaultNode
	}
	if p.VMID == 0 {
		p.VMID = a.VMID
	}
	return p
}

// vmPath is the ACL path of a guest: /vms/<vmid>, or /vms with
// propagation when the VMID is not known yet.
func vmPath(vmid int) (string, bool) {
	if vmid > 0 {
		return "/vms/" + strconv.Itoa(vmid), false
	}
	return "/vms", true
}

// storageOf is the storage part of a volid ("local" of "local:vztmpl/x").
func storageOf(volid string) string {
	sid, _, _ := strings.Cut(volid, ":")
	return sid
}

// ownerOf is the VMID a volume is named for (vm-105-disk-0 → 105), or 0.
func ownerOf(volid string) int {
	_, name, ok := strings.Cut(volid, ":")
	if !ok {
		return 0
	}
	for _, prefix := range []string{"vm-", "base-", "subvol-"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			id, _, _ := strings.Cut(rest, "-")
			if n, err := strconv.Atoi(id); err == nil {
				return n
			}
		}
	}
	return 0
}

// Requirements lists every privilege the manifest's operations need:
// apply (create, configure, start, replace, destroy), the keeper that
// holds retained volumes, backup, restore, snapshot and rollback. Paths
// are the narrowest PVE checks: /vms/<vmid> (or /vms for a VMID still to
// come), /storage/<sid>, /nodes/<node> and /sdn/zones/localnetwork/<bridge>.
// The checks follow pve-container's check_ct_modify_config_perm and the
// API schema's permissions (behaviour.md (b), (c); seed 004 §3.6).
// Entries are unique by path, privilege and operation, in manifest order.
func Requirements(f *manifest.File, t Targets) []Requirement {
	rs := &reqSet{t: t, seen: map[string]bool{}}
	keeperDone := map[string]bool{}
	for _, a := range f.Apps {
		p := t.placement(a)
		if a.IsVM() {
			rs.vm(a, p)       // requirements_vm.go
			rs.vmBackup(a, p) // requirements_vmbackup.go
			rs.node(a, p)
			rs.poolAndFirewall(a, p)
			continue
		}
		rs.container(a, p)
		rs.template(a, p)
		rs.node(a, p)
		rs.backup(a)
		rs.poolAndFirewall(a, p)
		if len(a.Volumes) == 0 {
			continue
		}
		rs.volumes(a)
		if keeperDone[p.Node] {
			continue
		}
		keeperDone[p.Node] = true
		rs.keeper(p.Node)
	}
	return rs.out
}

// reqSet collects Requirements' entries, unique by path, privilege and
// operation, in the order they are first added (manifest order).
type reqSet struct {
	t    Targets
	out  []Requirement
	seen map[string]bool
}

func (rs *reqSet) add(r Requirement) {
	k := r.Path + "\x00" + r.Priv + "\x00" + r.Operation
	if rs.seen[k] {
		return
	}
	rs.seen[k] = true
	rs.out = append(rs.out, r)
}

// container adds what creating, configuring, running, snapshotting,
// backing up and moving app a's container at placement p needs: on its
// /vms path, and for a privileged CT on PVE 9, its bridge and its rootfs
// storage, on theirs.
func (rs *reqSet) container(a manifest.App, p Placement) {
	vp, prop := vmPath(p.VMID)
	vm := func(priv, op, why string) {
		rs.add(Requirement{Path: vp, Priv: priv, Propagate: prop, Operation: op, Why: why, App: a.Name})
	}
	ct := "ct of app " + a.Name
	vm("VM.Allocate", "create and destroy the "+ct, "PVE checks VM.Allocate on /vms/<vmid> to create a container, to destroy it (corral replaces what cannot change in place) and to set the nesting feature")
	vm("VM.Audit", "read the config and status of the "+ct, "plan reads each corral container; /cluster/resources hides guests without VM.Audit")
	vm("VM.Config.Disk", "set rootfs and attach volumes on the "+ct, "rootfs and mpN keys need VM.Config.Disk (check_ct_modify_config_perm)")
	vm("VM.Config.CPU", "set cores on the "+ct, "cores needs VM.Config.CPU")
	vm("VM.Config.Memory", "set memory and swap on the "+ct, "memory and swap need VM.Config.Memory")
	vm("VM.Config.Network", "set net0, hostname and DNS on the "+ct, "netN, hostname and nameserver need VM.Config.Network")
	vm("VM.Config.Options", "set description, tags and onboot on the "+ct, "every other option needs VM.Config.Options")
	vm("VM.PowerMgmt", "start and shut down the "+ct, "status/start and status/shutdown need VM.PowerMgmt")
	snapWhy := "corral snapshot takes and removes snapshots"
	if a.SnapshotBeforeChange {
		snapWhy = "snapshotBeforeChange takes a snapshot before each change; corral snapshot takes and removes them"
	}
	vm("VM.Snapshot", "snapshot the "+ct, snapWhy)
	vm("VM.Snapshot.Rollback", "roll back the "+ct, "rolling back to a snapshot needs VM.Snapshot.Rollback (or VM.Snapshot)")
	vm("VM.Backup", "back up and restore the "+ct, "vzdump checks VM.Backup per guest inside its task; a restore over the container needs it too")
	rs.add(Requirement{Path: vp, Priv: "VM.Migrate", Propagate: prop, Operation: "move the " + ct + " to another node (corral move, corral drain, a change of node:)", Why: "POST …/lxc/{vmid}/migrate needs VM.Migrate on /vms/<vmid>; a move also migrates a carrier container that takes the volumes along", App: a.Name, Later: true})
	if !a.Unprivileged && rs.t.major() >= 9 {
		rs.add(Requirement{Path: "/", Priv: "Sys.Modify", Operation: "create the privileged " + ct, Why: "since PVE 9 creating or restoring a privileged container needs Sys.Modify on / (pve-container checks it for unprivileged=0)", App: a.Name})
	}
	rs.ha(a, ct)
	if br := a.Network.Bridge; br != "" {
		rs.add(Requirement{Path: "/sdn/zones/" + SDNZone + "/" + br, Priv: "SDN.Use", Operation: "attach net0 of the " + ct + " to bridge " + br, Why: "PVE checks SDN.Use on the bridge's vnet in zone localnetwork for every netN", App: a.Name})
	}
	if sid := a.RootFS.Storage; sid != "" {
		rs.add(Requirement{Path: "/storage/" + sid, Priv: "Datastore.AllocateSpace", Operation: "allocate the rootfs of the " + ct + " on " + sid, Why: "a new volume (STORAGE:GiB) needs Datastore.AllocateSpace on its storage", App: a.Name})
	}
}

// ha adds what app a's ha: needs, for its guest (what names it: "ct of
// app …", "vm of app …"): the HA API's checks are the same for a CT's
// and a VM's resource.
func (rs *reqSet) ha(a manifest.App, what string) {
	if a.HA == nil {
		return
	}
	rs.add(Requirement{Path: "/", Priv: "Sys.Audit", Operation: "read the HA resources (ha: of app " + a.Name + ")", Why: "GET /cluster/ha/resources and /cluster/ha/rules need Sys.Audit on / (pve-ha-manager)", App: a.Name})
	rs.add(Requirement{Path: "/", Priv: "Sys.Console", Operation: "make the " + what + " an HA resource", Why: "adding, changing and removing an HA resource or its rule membership needs Sys.Console on / (pve-ha-manager API2/HA)", App: a.Name})
}

// poolAndFirewall adds what app a's pool: and firewall: need (pve-manager
// API2/Pool.pm, pve-firewall API2/Firewall/VM.pm): creating the pool and
// putting the container in it need Pool.Allocate on /pool/<pool>, and
// PUT /pools checks the right to change the permissions of the guest it
// adds (VM.Allocate on /vms/<vmid>, already needed for the create); the
// pool list shows only pools the token holds Pool.Audit on. The guest
// firewall is read with VM.Audit and written with VM.Config.Network.
func (rs *reqSet) poolAndFirewall(a manifest.App, p Placement) {
	ct := "ct of app " + a.Name
	if a.IsVM() {
		ct = "vm of app " + a.Name
	}
	if a.Pool != "" {
		pp := "/pool/" + a.Pool
		rs.add(Requirement{Path: pp, Priv: "Pool.Audit", Alt: []string{"Pool.Allocate"}, Operation: "see pool " + a.Pool + " (pool: of app " + a.Name + ")", Why: "GET /pools lists only the pools the token holds Pool.Audit on; a pool corral cannot see would be created again", App: a.Name})
		rs.add(Requirement{Path: pp, Priv: "Pool.Allocate", Operation: "create pool " + a.Pool + " and put the " + ct + " in it", Why: "POST /pools and PUT /pools need Pool.Allocate on /pool/<pool>", App: a.Name})
		vp, prop := vmPath(p.VMID)
		rs.add(Requirement{Path: vp, Priv: "VM.Allocate", Alt: []string{"Permissions.Modify"}, Propagate: prop, Operation: "add the " + ct + " to pool " + a.Pool, Why: "PUT /pools checks the right to modify the permissions of each guest it adds (check_perm_modify)", App: a.Name})
	}
	if a.Firewall != nil {
		vp, prop := vmPath(p.VMID)
		rs.add(Requirement{Path: vp, Priv: "VM.Audit", Propagate: prop, Operation: "read the firewall options and rules of the " + ct, Why: "GET …/firewall/options and …/firewall/rules need VM.Audit", App: a.Name})
		rs.add(Requirement{Path: vp, Priv: "VM.Config.Network", Propagate: prop, Operation: "write the firewall options and rules of the " + ct, Why: "PUT …/firewall/options and POST/PUT/DELETE …/firewall/rules need VM.Config.Network", App: a.Name})
	}
}

// template adds what using app a's template needs on its storage, and
// downloading it when node p.Node lacks it (now) or may lack the next
// one (later).
func (rs *reqSet) template(a manifest.App, p Placement) {
	tsid := storageOf(a.Template)
	if tsid == "" {
		return
	}
	rs.add(Requirement{Path: "/storage/" + tsid, Priv: "Datastore.Audit", Alt: []string{"Datastore.AllocateSpace"}, Operation: "use template " + a.Template, Why: "check_volume_access needs read access to a template's storage", App: a.Name})
	// corral downloads a template the node lacks, so its role
	// holds Datastore.AllocateTemplate on the template's storage:
	// needed now when the template is missing, and for the next
	// template change otherwise (apply would stop in preflight).
	if rs.t.MissingTemplates[p.Node+"/"+a.Template] {
		rs.add(Requirement{Path: "/storage/" + tsid, Priv: "Datastore.AllocateTemplate", Operation: "download template " + a.Template + " to node " + p.Node, Why: "the template is not on node " + p.Node + "; POST aplinfo needs Datastore.AllocateTemplate (or upload it once by hand)", App: a.Name})
	} else {
		rs.add(Requirement{Path: "/storage/" + tsid, Priv: "Datastore.AllocateTemplate", Operation: "download a template not on node " + p.Node + " yet (a change of template)", Why: "apply downloads a template the node lacks, which POST aplinfo allows only with Datastore.AllocateTemplate; without it, upload each new template by hand first", App: a.Name, Later: true})
	}
}

// node adds Sys.Audit on app a's node, which reading other users' tasks
// there needs.
func (rs *reqSet) node(a manifest.App, p Placement) {
	nodePath, nodeProp, onNode := "/nodes/"+p.Node, false, "node "+p.Node
	if p.Node == "" {
		nodePath, nodeProp, onNode = "/nodes", true, "the node corral picks"
	}
	rs.add(Requirement{Path: nodePath, Priv: "Sys.Audit", Propagate: nodeProp, Operation: "see tasks on " + onNode + " that this token did not start", Why: "a create left half-done by another run is judged from its task, and other users' tasks need Sys.Audit on the node", App: a.Name})
}

// backup adds what writing, listing and pruning app a's backups needs on
// its backup storage.
func (rs *reqSet) backup(a manifest.App) {
	bs := a.Backup.Storage
	if bs == "" {
		return
	}
	ct := "ct of app " + a.Name
	rs.add(Requirement{Path: "/storage/" + bs, Priv: "Datastore.AllocateSpace", Operation: "write backups of the " + ct + " to " + bs, Why: "vzdump needs Datastore.AllocateSpace on the backup storage", App: a.Name})
	rs.add(Requirement{Path: "/storage/" + bs, Priv: "Datastore.Audit", Alt: []string{"Datastore.AllocateSpace"}, Operation: "list the backups of app " + a.Name + " on " + bs, Why: "listing storage content needs Datastore.Audit or Datastore.AllocateSpace", App: a.Name})
	if a.Backup.Keep > 0 {
		rs.add(Requirement{Path: "/storage/" + bs, Priv: "Datastore.Allocate", Operation: fmt.Sprintf("prune backups of app %s beyond keep: %d", a.Name, a.Backup.Keep), Why: "vzdump's prune-backups needs Datastore.Allocate on the backup storage", App: a.Name})
	}
}

// volumes adds what allocating or adopting app a's volumes needs, and
// attaching them while the keeper owns them.
func (rs *reqSet) volumes(a manifest.App) {
	ct := "ct of app " + a.Name
	for _, v := range a.Volumes {
		sp := "/storage/" + v.Storage
		if v.Adopt == "" {
			rs.add(Requirement{Path: sp, Priv: "Datastore.AllocateSpace", Operation: "allocate volume " + v.Name + " of app " + a.Name + " on " + v.Storage, Why: "a new volume needs Datastore.AllocateSpace on its storage", App: a.Name})
		} else {
			rs.add(Requirement{Path: sp, Priv: "Datastore.AllocateSpace", Operation: "adopt volume " + v.Adopt + " as " + v.Name + " of app " + a.Name, Why: "moving a volume to another container needs Datastore.AllocateSpace on its storage", App: a.Name})
			if owner := ownerOf(v.Adopt); owner > 0 {
				rs.add(Requirement{Path: "/vms/" + strconv.Itoa(owner), Priv: "VM.Config.Disk", Operation: "adopt volume " + v.Adopt + " (move it from CT " + strconv.Itoa(owner) + " to the keeper)", Why: "move_volume needs VM.Config.Disk on the source container", App: a.Name})
			}
		}
		rs.add(Requirement{Path: sp, Priv: "Datastore.Audit", Alt: []string{"Datastore.Allocate"}, Operation: "attach volume " + v.Name + " (owned by the keeper) to the " + ct, Why: "check_volume_access lets a container use another guest's volume with Datastore.Audit on the storage and VM.Config.Disk on the owner, or with Datastore.Allocate", App: a.Name})
	}
}

// keeper adds what the keeper CT on node needs: creating it when there
// is none yet, and holding and recording the retained volumes.
func (rs *reqSet) keeper(node string) {
	kvmid := rs.t.Keepers[node]
	kp, kprop := vmPath(kvmid)
	kr := func(priv, op, why string) {
		rs.add(Requirement{Path: kp, Priv: priv, Propagate: kprop, Operation: op, Why: why})
	}
	kname := "the keeper on node " + node
	if node == "" {
		kname = "the node's keeper"
	}
	if kvmid == 0 {
		kr("VM.Allocate", "create "+kname, "the keeper is a container; creating it needs VM.Allocate")
		kr("VM.Config.CPU", "set cores of "+kname, "create sets cores")
		kr("VM.Config.Memory", "set memory of "+kname, "create sets memory and swap")
		kr("VM.Config.Network", "set the hostname of "+kname, "create sets hostname")
	}
	kr("VM.Audit", "read the volume records of "+kname, "the keeper's description records which volume is which")
	kr("VM.Config.Disk", "hold, grow and free retained volumes in "+kname, "the keeper owns retained volumes as unusedN; allocating, resizing and freeing them are disk changes on it")
	kr("VM.Config.Options", "record volumes and toggle protection of "+kname, "the records live in its description and protection guards them")
}

// HostNeeds are container settings that only a root@pam session can make
// (behaviour.md §0 "root@pam vs API tokens", (b), (c)). No API token
// qualifies, not even root's own.
type HostNeeds struct {
	// Features are feature flags besides nesting ("keyctl": "1", "fuse":
	// "1", "mknod": "1", "mount": "nfs;cifs").
	Features map[string]string `json:"features,omitempty"`
	// Privileged is set when the container is privileged and has any
	// feature flag: every feature change on it is root-only.
	Privileged bool `json:"privileged,omitempty"`
	// BindMounts are host paths mounted into the container.
	BindMounts []HostMount `json:"bind_mounts,omitempty"`
	// Devices are device nodes passed through (devN: /dev/…).
	Devices []string `json:"devices,omitempty"`
	// Hookscript is a snippet volid ("local:snippets/hook.pl").
	Hookscript string `json:"hookscript,omitempty"`
	// RawLXC are lxc.* keys for the container's config file.
	RawLXC [][2]string `json:"raw_lxc,omitempty"`
}

// HostMount is a bind or device mount point.
type HostMount struct {
	Source string `json:"source"` // host path or /dev/… device
	Path   string `json:"path"`   // mount path in the container
}

// Empty reports whether nothing root-only is needed.
func (h HostNeeds) Empty() bool {
	return len(h.Features) == 0 && !h.Privileged && len(h.BindMounts) == 0 && len(h.Devices) == 0 && h.Hookscript == "" && len(h.RawLXC) == 0
}

// NeedsOf returns what of app a only root@pam can set. The manifest can
// express keyctl today (App.NeedsKeyctl: Docker in an unprivileged CT)
// and a privileged container with features; the other HostNeeds fields
// are for manifest fields to come.
func NeedsOf(a manifest.App) HostNeeds {
	var h HostNeeds
	if a.NeedsKeyctl {
		h.Features = map[string]string{"keyctl": "1"}
	}
	if !a.Unprivileged && (a.Features.Nesting || len(h.Features) > 0) {
		h.Privileged = true
	}
	return h
}

// Missing drops from h what the container's current features already
// have: root set them once, and PVE keeps them (a restore too).
func (h HostNeeds) Missing(current map[string]string) HostNeeds {
	out := h
	out.Features = nil
	for k, v := range h.Features {
		if current[k] != v {
			if out.Features == nil {
				out.Features = map[string]string{}
			}
			out.Features[k] = v
		}
	}
	if h.Privileged && len(out.Features) == 0 && current["nesting"] != "" {
		out.Privileged = false
	}
	return out
}

// RootCommands are the one-time commands root runs on node's shell for
// vmid (0: the container corral is about to create, written <vmid>).
// nesting is the app's nesting flag, which the features line must keep;
// firstMP is the first mpN index corral does not use for volumes.
func RootCommands(vmid int, nesting bool, firstMP int, h HostNeeds) []string {
	id := "<vmid>"
	if vmid > 0 {
		id = strconv.Itoa(vmid)
	}
	var out []string
	if len(h.Features) > 0 || h.Privileged {
		var parts []string
		if nesting {
			parts = append(parts, "nesting=1")
		}
		for _, k := range slices.Sorted(maps.Keys(h.Features)) {
			if k != "nesting" {
				parts = append(parts, k+"="+h.Features[k])
			}
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("pct set %s -features %s", id, strings.Join(parts, ",")))
		}
	}
	for i, m := range h.BindMounts {
		out = append(out, fmt.Sprintf("pct set %s -mp%d %s,mp=%s", id, firstMP+i, m.Source, m.Path))
	}
	for i, d := range h.Devices {
		out = append(out, fmt.Sprintf("pct set %s -dev%d %s", id, i, d))
	}
	if h.Hookscript != "" {
		out = append(out, fmt.Sprintf("pct set %s -hookscript %s", id, h.Hookscript))
	}
	for _, kv := range h.RawLXC {
		out = append(out, fmt.Sprintf("echo '%s: %s' >> /etc/pve/lxc/%s.conf", kv[0], kv[1], id))
	}
	return out
}

// rootWhat says in words what of h is root-only.
func rootWhat(h HostNeeds) string {
	var parts []string
	if len(h.Features) > 0 {
		var fs []string
		for _, k := range slices.Sorted(maps.Keys(h.Features)) {
			fs = append(fs, k+"="+h.Features[k])
		}
		parts = append(parts, "feature flags other than nesting ("+strings.Join(fs, ",")+")")
	}
	if h.Privileged {
		parts = append(parts, "feature flags on a privileged container")
	}
	if len(h.BindMounts) > 0 {
		parts = append(parts, "bind or device mount points")
	}
	if len(h.Devices) > 0 {
		parts = append(parts, "device passthrough")
	}
	if h.Hookscript != "" {
		parts = append(parts, "a hookscript")
	}
	if len(h.RawLXC) > 0 {
		parts = append(parts, "raw lxc.* keys")
	}
	return strings.Join(parts, ", ")
}
