package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// BlindReason says that the token cannot see app's container on node,
// and what to do about it.
func BlindReason(app, node string) string {
	return fmt.Sprintf("app %s: the token cannot see guests on node %s: it lacks VM.Audit on /vms, so corral cannot tell whether the app's container exists; run corral doctor (corral doctor --print-setup prints a role that has it)", app, node)
}

// App is one desired app, in Proxmox VE's terms (sizes in bytes, memory in
// MiB). It is built from the manifest by FromManifest.
type App struct {
	Name string
	// Kind is KindVM for a kind: vm app, "" for a container; VM is the
	// VM app's virtual machine (vm.go), nil for a container.
	Kind string
	VM   *VMSpec
	// Project is the manifest's project: the app's CT is tagged
	// corral-project-<Project>, and a plan prunes the project's CTs
	// whose app the manifest no longer lists. "" (callers without a
	// manifest) leaves projects out.
	Project string
	// ProjectSet: the manifest names its project; else it is defaulted
	// from the directory's base name and may collide (see Origin).
	ProjectSet bool
	// Origin is manifest.File.Origin: who declares the app. It is recorded
	// on the container (corral-declared:) and, as OriginID, in the keeper
	// beside its volumes' project. Under a defaulted project a plan
	// deletes no app and frees no volume another origin declared.
	Origin string
	Node   string // "" = the CT's current node, else one chosen by Placement
	// Placement is how a node is chosen for a new container that names
	// none (the manifest's placement:, the same for every app).
	Placement    Placement
	VMID         int    // 0 = keep the CT's VMID, or the next free one
	Template     string // volid of the ostemplate
	Unprivileged bool
	Cores        int
	MemoryMiB    int
	SwapMiB      int
	RootStorage  string
	RootSize     int64
	Nesting      bool
	Bridge       string
	IP           string // "dhcp" or CIDR
	Gateway      string
	DNS          []string
	Tags         []string
	OnBoot       bool
	Description  string
	SSHKeys      []string
	HasPassword  bool
	// GuestDigest summarises everything corral does inside the container
	// (provisioning steps and health checks); "" when there is nothing.
	// The last digest corral finished is kept in the CT description, so a
	// plan sees without logging in whether the guest work changed.
	GuestDigest string
	// GuestUnknown names the references (${env:X}) a command that needs
	// no provisioning values left unread: the guest work cannot be
	// compared, and the plan says so instead of guessing.
	GuestUnknown []string
	// GuestTemplate is the guest work as the manifest writes it when its
	// strings name other apps' facts (${app:APP.FACT}, GuestStep.Facts);
	// Make reads the facts from the cluster and the plan (resolveFacts)
	// and sets GuestDigest and Steps from the work they give. nil when
	// the work names no fact.
	GuestTemplate *GuestWork
	// FactApps are the other apps whose facts the guest work reads: their
	// changes are applied first (Change.After).
	FactApps []string
	// Facts are the facts the guest work reads, APP.FACT → value, as the
	// plan knows them; FactsUnknown those known only once apply changed
	// their app (a container to create, replace or move, an address
	// a stopped container does not report yet).
	Facts        map[string]string
	FactsUnknown []string
	// Steps are the provisioning steps, in order, with their checksums,
	// so that a plan can say which of them an apply runs and why.
	Steps []Step
	// Rerun names steps to run although they did not change (plan and
	// apply --rerun), with what they notify: a compose step with pull:
	// always pulls again, an install script fetches the latest release.
	Rerun []string
	// NeedsKeyctl: the app runs Docker (a compose step) in an unprivileged
	// container, which needs keyctl=1, a flag only root@pam can set.
	NeedsKeyctl bool
	// SnapshotBeforeChange: an in-place change is protected by a snapshot
	// (or, where the storage cannot snapshot, a backup to BackupStorage)
	// and rolled back when the app is unhealthy afterwards.
	SnapshotBeforeChange bool
	BackupStorage        string
	// BackupMode is the manifest's backup.mode (snapshot, stop,
	// suspend): it says how consistent a VM app's backup is.
	BackupMode string
	Volumes    []Volume
	// Pool and firewall (issue 33), one block. Pool is the resource
	// pool the container joins, "" to leave its membership alone;
	// Firewall its firewall, nil to leave it alone (firewall.go).
	Pool     string
	Firewall *Firewall
	// HA is the app's ha: (ha.go); nil without.
	HA *HA
	// DeleteSnapshots consents to deleting the container's snapshots when
	// it moves to another node: PVE migrates no container whose
	// snapshots reference volumes on LVM-thin (corral move, drain and
	// apply --delete-snapshots). Without it such a move is refused.
	DeleteSnapshots bool
}

// Volume is one desired persistent volume of an app, converted once from
// manifest.Volume; VolumeChange and apply's attachment carry this value
// on (docs/architecture.md).
type Volume struct {
	Name    string
	Storage string
	Size    int64 // bytes; 0 only for an adopted volume without a size
	Mount   string
	Backup  bool
	Reclaim Reclaim
	Adopt   string // volid to take over, "" for a new volume
}

// Reclaim says what destroy may do with a volume.
type Reclaim string

const (
	Retain       Reclaim = "retain" // never freed by corral
	DeleteOnDrop Reclaim = "delete" // freed by destroy --delete-volumes
)

// Observed is the cluster as corral found it: its containers (by tag), its
// keepers and the volumes they hold.
type Observed struct {
	Nodes []string
	// Templates lists the volids present per node.
	Templates map[string][]string
	// Apps maps an app name to every CT tagged corral-app-<name>
	// (normally one; more means an interrupted operation to report).
	Apps map[string][]*CT
	// Keepers maps a node to its keeper CTs, oldest (lowest VMID) first.
	// One keeper holds at most MaxKeeperVolumes; more volumes on a node
	// get more keepers.
	Keepers map[string][]*Keeper
	// Volumes maps "node/volid" to the size in bytes of each image volume
	// found on the storages corral uses.
	Volumes map[string]int64
	// Offline lists nodes that do not answer: their storages could not be
	// read, so apps there are left alone this time.
	Offline []string
	// CannotSeeGuests is set when the token lacks VM.Audit on /vms: PVE
	// then leaves every guest it cannot audit out of /cluster/resources,
	// so a missing container proves nothing. Plans are refused with it
	// instead of creating what may exist.
	CannotSeeGuests bool
	// Others are the guests corral does not manage, by VMID: a pinned
	// vmid that one of them holds cannot be used.
	Others map[int]Guest
	// Restores are restores that were interrupted, by app: the new
	// container (tagged corral-restoring-<app>) and the one it replaces
	// (tagged corral-replaced-<app>) if it was already set aside. The
	// next changing command finishes or rolls them back first.
	Restores map[string]*Restore
	// VMRestores are the interrupted restores of VM apps, by app
	// (vmrestore.go): the next changing command finishes or rolls them
	// back first, as Restores.
	VMRestores map[string]*VMRestore
	// Carriers are moves under way or interrupted, by app (see
	// Carrier): the next changing command finishes them first.
	Carriers map[string]*Carrier
	// Rescues are the rescue containers of apps (corral rescue), by app:
	// one a corral rescue is using now (it holds corral's lock), or one a
	// killed run left. The next changing command ends them first, giving
	// their volumes back to the app's container.
	Rescues map[string][]*Rescue
	// LeftoverCarriers are carriers of an app that has another one
	// (GroupCarriers): empty, made by a run killed right after the
	// create; the move destroys them. BadCarriers are carriers corral
	// cannot finish (Carrier.Problem): the apps they may hold volumes of
	// are refused until the user fixes them.
	LeftoverCarriers, BadCarriers []*Carrier
	// Warnings are findings of the observation itself (a container
	// recognized although its tags were edited), shown with the plan.
	Warnings []string
	// NodeMemory is each node's memory in bytes (GET /nodes maxmem; absent
	// when the token may not see it), and GuestMemory the memory configured
	// for the guests on each node (/cluster/resources maxmem, summed): the
	// memory placement policy gives a new app the node with the most
	// memory not yet given to guests.
	NodeMemory  map[string]int64
	GuestMemory map[string]int64
	// StorageTypes maps a storage ID to its type (dir, lvmthin, zfspool,
	// …) as the nodes' storage lists report it; the type decides whether
	// PVE can snapshot a volume on it.
	StorageTypes map[string]string
	// Storages maps a node to the storages the token sees there, with
	// their content types: a template or rootfs on a storage not listed
	// cannot be used there (it does not exist, is disabled or not on that
	// node, or the token holds no privilege on it). Nil for a node whose
	// list was not read.
	Storages map[string]map[string][]string
	// Bridges maps a node to the bridges GET /nodes/{node}/network lists
	// to the token (PVE lists only those it holds SDN.Audit or SDN.Use
	// on). A node is absent when the list could not be read or was empty;
	// BridgeWarnings then says why, and bridges are not checked there.
	Bridges        map[string][]string
	BridgeWarnings map[string]string
	// SharedStorages are the storages the nodes list as shared (NFS,
	// CIFS, RBD, …): one volid names the same data on every node.
	SharedStorages map[string]bool
	// Stale are app containers a recovered container stands in for
	// (SplitStale): left on a node that was offline during the recovery.
	Stale []*StaleCT
	// Damaged are keepers and carriers whose tags were edited while their
	// other signals still say what they are (ReadDamaged): the apps whose
	// data they may hold are refused until the tags are back.
	Damaged []*Damaged
	// VMKeepers maps a node to its keeper VMs (vmkeeper.go): the owner
	// of the kind: vm apps' retained disks there. More than one on a node
	// is refused, never guessed between.
	VMKeepers map[string][]*VMKeeper
	// Pools are the resource pools the token may audit, read only when an
	// app names a pool (apply.ObserveApps): one not listed is created.
	Pools []string
	// HAUnread says why the HA resources could not be read ("" when
	// they were); HARules is set when the cluster serves HA rules (PVE
	// 9), HARuleSet holds them by name (ha.go).
	HAUnread  string
	HARules   bool
	HARuleSet map[string]HARule
	// SetupDeferred says the observation left out the nodes' bridges and
	// the templates of template-only storages (apply.ObserveOptions.
	// DeferSetup): a plan without changes needs neither, so Make plans
	// only that and returns ErrSetupUnread for anything else.
	SetupDeferred bool
	// StoragesDeferred (with SetupDeferred) says the nodes' storage lists
	// were left out too: Storages, StorageTypes and SharedStorages are
	// empty, and Volumes holds only the storages the keepers' records
	// name (apply.ObserveSetup reads the rest).
	StoragesDeferred bool
	// VMs maps an app name to the VMs tagged as its own (vm.go);
	// MarkedVMs are VMs whose Notes carry corral's marker for an app but
	// not corral's tags: refused for that app, never adopted.
	VMs       map[string][]*VM
	MarkedVMs []*VM
	// Recover is the operator's consent (corral apply --recover) to build
	// apps whose node is offline anew on another node. It is not read
	// from the cluster; the caller sets it before planning.
	Recover bool
}

// Guest is a VM or CT that is not corral's.
type Guest struct {
	VMID int
	Node string
	Type string // lxc | qemu
	Name string
	// RootFS is a container's root file system volume ("" unread).
	RootFS string
}

// Holder returns the keeper on node that records key, or nil.
func (o *Observed) Holder(node string, key VolumeKey) *Keeper {
	for _, k := range o.Keepers[node] {
		if k.Records[key] != "" {
			return k
		}
	}
	return nil
}

// CT is one observed container.
type CT struct {
	VMID int
	Node string
	// Project is the project its corral-project-<project> tag names; ""
	// for a CT made before projects existed, which belongs to the project
	// whose manifest names its app.
	Project string
	Status  string // running | stopped
	Lock    string
	Config  map[string]string // active config (current=1), raw values
	// Pending are changes waiting for the next start: key → new value,
	// "" for a delete (left by an interrupted run, or made by hand).
	Pending map[string]string
	// Digest is apply's digest of the config as read (every current and
	// pending value but PVE's lock, apply.plannedDigest): what a change of
	// this container is planned against (Change.Digest).
	Digest string
	// Pool is the resource pool /cluster/resources puts it in, "" for
	// none.
	Pool string
	// Firewall is its firewall as read, only for the apps that declare
	// one (apply.ObserveApps); nil when not read.
	Firewall *ObservedFirewall
	// Address is the IPv4 address the running container reports for
	// eth0 when its config gives none (DHCP): read only for the apps
	// whose facts a manifest's guest strings name (apply.ObserveAddresses),
	// "" otherwise.
	Address string
	// HA is the container's HA resource, nil when it has none; HAState
	// is its service state as /cluster/resources reports it (hastate).
	HA      *HAResource
	HAState string

	mounts *ctMounts // set by ParseMounts
}

// KeyedMount is one mpN mount point of a CT, parsed, with its key.
type KeyedMount struct {
	Key string // "mp3"
	MountPoint
}

// ctMounts are a CT's rootfs and mpN values, parsed.
type ctMounts struct {
	root MountPoint
	mps  []KeyedMount
}

func parseCTMounts(conf map[string]string) *ctMounts {
	m := &ctMounts{root: ParseMountPoint(conf["rootfs"])}
	for _, k := range sortedConfigKeys(conf, "mp") {
		m.mps = append(m.mps, KeyedMount{Key: k, MountPoint: ParseMountPoint(conf[k])})
	}
	return m
}

// ParseMounts parses c's rootfs and mpN values once, for RootFS and
// Mounts; the observer calls it for every CT it reads. Config must not
// change afterwards. Without it, each call parses Config again.
func (c *CT) ParseMounts() { c.mounts = parseCTMounts(c.Config) }

func (c *CT) parsedMounts() *ctMounts {
	if c.mounts != nil {
		return c.mounts
	}
	return parseCTMounts(c.Config)
}

// RootFS is c's rootfs, parsed (zero when the config has none).
func (c *CT) RootFS() MountPoint { return c.parsedMounts().root }

// Mounts are c's mpN mount points, parsed, in key order (mp0, mp1, …,
// mp10). The slice is shared: do not modify it.
func (c *CT) Mounts() []KeyedMount { return c.parsedMounts().mps }

// Keeper is the observed per-node keeper CT. Records come from its mount
// points (see KeeperRecords).
type Keeper struct {
	VMID      int
	Node      string
	Protected bool
	Config    map[string]string
	Records   map[VolumeKey]string
	// Lost are records whose mount point was removed (PVE kept the volume
	// as unusedN): still records, mounted again by the keeper's repair.
	Lost map[VolumeKey]string
	// Lease is the lock a corral process holds on the node, if any.
	Lease *Lease
	// Intents are adoptions that were in flight (see AdoptIntent).
	Intents map[VolumeKey]AdoptIntent
	// Projects maps an app with records to its project
	// ("corral-project: app=project"); absent for records written before
	// projects existed.
	Projects map[string]string
	// Declared maps an app with records to the OriginID of the manifest
	// that declared it ("corral-declared: app=ID"); absent for records
	// written before origins were recorded.
	Declared map[string]string
	// Digest is PVE's digest of the config as read (its compare-and-swap
	// token), "" when unknown or when the read showed pending changes:
	// a first write may be sent with it instead of a read of its own.
	Digest string
}

// AppProject is the project app belongs to as far as the cluster says:
// the keepers' corral-project line for it, else the project tag of its
// container; "" when neither says.
func (o *Observed) AppProject(app string) string {
	if p := o.RecordProject(app); p != "" {
		return p
	}
	for _, ct := range o.Apps[app] {
		if ct.Project != "" {
			return ct.Project
		}
	}
	return ""
}

// RecordProject is the project the keepers say app's volumes belong to,
// or "" when none says.
func (o *Observed) RecordProject(app string) string {
	for _, node := range slices.Sorted(maps.Keys(o.Keepers)) {
		for _, k := range o.Keepers[node] {
			if p := k.Projects[app]; p != "" && k.RecordsApp(app) {
				return p
			}
		}
	}
	return ""
}

// RecordDeclared is the OriginID the keepers record for app's volumes,
// or "" when none does.
func (o *Observed) RecordDeclared(app string) string {
	for _, node := range slices.Sorted(maps.Keys(o.Keepers)) {
		for _, k := range o.Keepers[node] {
			if id := k.Declared[app]; id != "" && k.RecordsApp(app) {
				return id
			}
		}
	}
	return ""
}

// RecordsApp reports whether the keeper records a volume of app.
func (k *Keeper) RecordsApp(app string) bool {
	for vk := range k.Records {
		if vk.App == app {
			return true
		}
	}
	return false
}

// VolumeKey names a volume: app and volume name.
type VolumeKey struct{ App, Name string }

func (k VolumeKey) String() string { return k.App + "/" + k.Name }

func volKey(node, volid string) string { return node + "/" + volid }

// Restore is an interrupted restore of an app.
type Restore struct {
	App      string
	New      *CT // tagged corral-restoring-<app>; nil once it became the app's
	Replaced *CT // tagged corral-replaced-<app>; nil before it was set aside
	Stamp    string
}

// Rollback reports whether the restore is undone rather than finished:
// the app still has its own container, so the new one never took over.
// (A restored container whose marker lost the stamp of its temporary
// records cannot be finished safely either, nor one that still owns a
// volume it mounts: its restore stopped before the restored volumes moved
// into the keeper, and made the app's it would run on a volume no keeper
// records, which its next recreate would free.)
func (r *Restore) Rollback(o *Observed) bool {
	return r.New != nil && (len(o.Apps[r.App]) > 0 || r.Stamp == "" || len(r.Unadopted()) > 0)
}

// Unadopted lists the volumes the restored container mounts and still
// owns: restored from the archive but not yet moved into the keeper.
func (r *Restore) Unadopted() []string {
	if r.New == nil {
		return nil
	}
	var out []string
	for key, v := range r.New.Config {
		if !strings.HasPrefix(key, "mp") {
			continue
		}
		if vol := ParseMountPoint(v).Volume; vol != "" && VolumeOwner(vol) == r.New.VMID {
			out = append(out, vol)
		}
	}
	sort.Strings(out)
	return out
}

// String says what the next changing command does about it.
func (r *Restore) String(o *Observed) string {
	switch {
	case r.Rollback(o):
		keeps := "the app has no container until the next apply makes one"
		if cts := o.Apps[r.App]; len(cts) > 0 {
			keeps = fmt.Sprintf("the app keeps container %d", cts[0].VMID)
		}
		volumes := fmt.Sprintf("its restored volumes stay in the keeper as %s/*-restored-*", r.App)
		if un := r.Unadopted(); len(un) > 0 {
			volumes = fmt.Sprintf("with %s, restored copies that never reached the keeper (the archive still holds them); the volumes it did hand over stay in the keeper as %s/*-restored-*", strings.Join(un, ", "), r.App)
		}
		return fmt.Sprintf("a restore of app %s was interrupted before the restored container %d took over: it is removed (%s) and %s", r.App, r.New.VMID, volumes, keeps)
	case r.New != nil:
		return fmt.Sprintf("a restore of app %s was interrupted after its old container was set aside: the restored container %d becomes the app's and the old one is removed (its volumes stay in the keeper)", r.App, r.New.VMID)
	default:
		return fmt.Sprintf("a restore of app %s left the replaced container %d: it is removed (its volumes stay in the keeper)", r.App, r.Replaced.VMID)
	}
}

// blindNode is the node a refusal for a token that cannot see guests
// names: the app's, or the first.
func blindNode(a *App, obs *Observed) string {
	if a.Node != "" || len(obs.Nodes) == 0 {
		return a.Node
	}
	return obs.Nodes[0]
}
