package model

import (
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/pvesize"
	"golang.org/x/crypto/ssh"
)

// Creating a CT: POST /nodes/{node}/lxc (pve-container API2/LXC.pm
// create_vm; behaviour.md "Create / restore", (b), (c)). The request
// checks everything it can, writes a config holding only "lock: create"
// and returns the UPID of task vzcreate, which allocates the volumes,
// extracts the template into the rootfs, sets the guest up and writes the
// real config. Restoring a backup (restore=1) is restore.go's.

// ctCreator creates CTs: from a template here, from a backup in
// restore.go; it also keeps what creation gave a CT outside its config
// (GuestExtra). Cluster embeds it. It holds no *Cluster: the State's
// lock and the State, its settings, and one field per part it calls;
// the create and restore tasks get the Cluster from their Worker, as
// every task's steps do.
type ctCreator struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	// dataDir is the root of the data plane (bind mounts' host side);
	// version the emulated release.
	dataDir string
	version string
	log     *slog.Logger
	guests  creatorGuests
	storage creatorStorage
	config  creatorConfig
	// power (ctPower) marks a CT started at the end of a create.
	power interface{ markRunningLocked(g *Guest) }
	// firewall copies a clone's firewall config, and drops it again.
	firewall interface {
		cloneFirewallLocked(from, to int)
		removeFirewallLocked(vmid int)
	}
	tasks interface {
		spawn(auth Auth, node, typ, id string, fn func(w *Worker) error) string
	}
	journal interface {
		markGuest(vmid int)
		markCore()
		saveLocked() error
	}
	// ha (haGuest) makes a new CT an HA resource with ha-managed=1.
	ha interface {
		haManageCreated(w *Worker, vmid int, managed, started bool) error
	}
	// admit is memory admission (admission.go); formatVolumes gives new
	// volumes to the CT's root (the id shift, idmap.go). Both are the
	// Cluster's own.
	admit         func(w *Worker, node string, g *Guest) error
	formatVolumes func(node string, conf map[string]string, volids []string) error
}

// creatorGuests is what ctCreator needs of guests: the node check, a
// CT's lookup, its config flock, and the flock alone for a CT that does
// not exist yet.
type creatorGuests interface {
	checkNodeLocked(node string) error
	guestLocked(node string, vmid int) (*Guest, error)
	lockConfig(node string, vmid int) (g *Guest, unlock func(), err error)
	acquireFlock(vmid int, timeout time.Duration) (release func(), err error)
}

// creatorStorage is what ctCreator needs of storageLayer: the storage
// check, where volumes and snapshots live, and image allocation, rename
// and free.
type creatorStorage interface {
	storageCheckEnabledLocked(sid, node string) (*Storage, error)
	volumePath(node, storage, name string) string
	snapshotPath(node string, v *Volume, snap string) string
	allocImageLocked(node string, s *Storage, vmid int, name, format string, size int64) (*Volume, []string, error)
	renameVolumeLocked(node, volid, newName string, owner int) string
	freeImageLocked(w *Worker, node, volid string) error
}

// creatorConfig is what ctCreator needs of ctConfig: the permission
// checks of the new config and update_pct_config.
type creatorConfig interface {
	ctModifyConfigPermLocked(auth Auth, vmid int, pool string, oldconf, newconf map[string]string, deletes []string, unprivileged bool) error
	ctCheckBridgeAccessLocked(auth Auth, value string) error
	ctCheckVolumeAccessLocked(auth Auth, vmid int, volid, typ string) error
	ctUpdateConfigLocked(g *Guest, running bool, set map[string]string, deletes, reverts []string) (errs map[string]string, err error)
}

// ctCreateLockTimeout is create_and_lock_config's flock timeout.
const ctCreateLockTimeout = 5 * time.Second

// ctSystemdNestingMin is the systemd version from which an unprivileged
// CT without nesting gets PVE's "You may need to enable nesting" warning.
const ctSystemdNestingMin = 231

// ctMACPrefix is the datacenter's default mac_prefix (Proxmox's OUI).
const ctMACPrefix = "BC:24:11"

// GuestExtra is what a CT was given at creation that PVE writes into the
// guest and never into its config: the root password (kept only as a
// salted hash) and root's authorized SSH keys. The guest layer reads it.
type GuestExtra struct {
	SSHPublicKeys    string `json:"ssh_public_keys,omitempty"`
	RootPasswordHash string `json:"root_password_hash,omitempty"`
}

// CheckRootPassword reports whether password is the root password the CT
// was created with (false when none was set).
func (e GuestExtra) CheckRootPassword(password string) bool {
	return e.RootPasswordHash != "" && accessCheckPassword(e.RootPasswordHash, password)
}

// GuestExtra returns a copy of CT vmid's creation secrets, ok false when
// the CT has none.
func (cr *ctCreator) GuestExtra(vmid int) (GuestExtra, bool) {
	cr.stateMu.RLock()
	defer cr.stateMu.RUnlock()
	st := cr.state()
	if e := st.Extra[vmid]; e != nil {
		return *e, true
	}
	return GuestExtra{}, false
}

// ctCreateSpec is a create request after its synchronous checks.
type ctCreateSpec struct {
	node string
	vmid int
	// conf is the config without volumes, as update_pct_config made it.
	conf map[string]string
	// mounts holds rootfs and mpN as given, plain sizes made STORAGE:SIZE.
	mounts   map[string]string
	storage  string
	template string
	extra    GuestExtra
	start    bool
	// haManaged: ha-managed=1, the CT becomes an HA resource at the end.
	haManaged bool
	// pool is the pool the new CT joins (pool=), "" for none.
	pool string
}

// CreateCT is POST /nodes/{node}/lxc. params are the request's (vmid,
// ostemplate, storage, password, ssh-public-keys, start, unprivileged, and
// every config key). The synchronous checks run in PVE's order; the CT is
// unprivileged unless asked otherwise on PVE 9 (a privileged one needs
// Sys.Modify on /), privileged by default on PVE 8 (behaviour.md (c)).
func (cr *ctCreator) CreateCT(auth Auth, node string, params map[string]string) (string, error) {
	st := cr.state()
	if isTrue(params["restore"]) {
		return cr.restoreCT(auth, node, params) // restore.go
	}
	cr.stateMu.Lock()
	spec, err := cr.ctPrepareCreateLocked(auth, node, params)
	cr.stateMu.Unlock()
	if err != nil {
		return "", err
	}
	// create_and_lock_config: take the flock, check the VMID once more and
	// write {lock: create}.
	release, err := cr.guests.acquireFlock(spec.vmid, ctCreateLockTimeout)
	if err != nil {
		return "", Failf("unable to create CT %d - %s", spec.vmid, errText(err))
	}
	defer release()
	cr.stateMu.Lock()
	defer cr.stateMu.Unlock()
	if err := cr.ctCheckVMIDUnusedLocked(spec.vmid); err != nil {
		return "", Failf("unable to create CT %d - %s", spec.vmid, errText(err))
	}
	st.Guests[spec.vmid] = &Guest{VMID: spec.vmid, Node: node, Config: map[string]string{"lock": "create"}}
	cr.journal.markGuest(spec.vmid)
	if err := cr.journal.saveLocked(); err != nil {
		delete(st.Guests, spec.vmid) // the model stays as the disk has it
		return "", err
	}
	return cr.tasks.spawn(auth, node, "vzcreate", strconv.Itoa(spec.vmid), func(w *Worker) error {
		return cr.ctCreateTask(w, spec)
	}), nil
}

// checkAllocateLocked is create_vm's check: the pool (when given) must exist,
// and the caller needs VM.Allocate on /vms/<vmid> or on /pool/<pool>
// (403 otherwise).
func (cr *ctCreator) checkAllocateLocked(auth Auth, vmid int, pool string, hasPool bool) error {
	st := cr.state()
	if hasPool {
		if err := st.Access.PoolExists(pool); err != nil {
			return err
		}
	}
	if st.Access.HasPriv(auth, fmt.Sprintf("/vms/%d", vmid), "VM.Allocate") {
		return nil
	}
	if pool != "" && st.Access.HasPriv(auth, "/pool/"+pool, "VM.Allocate") {
		return nil
	}
	return PermError("")
}

// joinPoolLocked is add_vm_to_pool at the end of a create, restore or
// clone.
func (cr *ctCreator) joinPoolLocked(vmid int, pool string) {
	st := cr.state()
	if pool == "" {
		return
	}
	st.Access.addToPool(vmid, pool)
	cr.journal.markCore()
}

// ctCheckVMIDUnusedLocked is PVE::Cluster::check_vmid_unused.
func (cr *ctCreator) ctCheckVMIDUnusedLocked(vmid int) error {
	st := cr.state()
	if g := st.Guests[vmid]; g != nil {
		return Failf("CT %d already exists on node '%s'\n", vmid, g.Node)
	}
	if vm := st.VMs[vmid]; vm != nil {
		return Failf("VM %d already exists on node '%s'\n", vmid, vm.Node)
	}
	return nil
}

// ctPrepareCreateLocked is create_vm up to create_and_lock_config.
func (cr *ctCreator) ctPrepareCreateLocked(auth Auth, node string, params map[string]string) (ctCreateSpec, error) {
	st := cr.state()
	req, err := cr.ctReadCreateRequestLocked(node, params)
	if err != nil {
		return ctCreateSpec{}, err
	}
	p, take, vmid := req.p, req.take, req.vmid
	spec := ctCreateSpec{node: node, vmid: vmid, start: req.start, haManaged: req.haManaged}
	unprivStr, unprivSet := take("unprivileged")
	take("restore") // restore=1 never gets here: CreateCT hands it to restoreCT
	take("unique")
	unprivileged := isTrue(unprivStr)
	if cr.version == "9.1" {
		// pve-container 6.0.6 "api: create: default to unprivileged containers".
		if !unprivSet {
			unprivileged = true
		}
		if !unprivileged {
			if err := st.Access.Check(auth, "/", []string{"Sys.Modify"}, false); err != nil {
				return ctCreateSpec{}, err
			}
		}
	}
	if err := cr.checkHAManagedLocked(auth, req); err != nil {
		return ctCreateSpec{}, err
	}
	take("force") // only meaningful with restore
	if err := cr.ctCheckVMIDUnusedLocked(vmid); err != nil {
		return ctCreateSpec{}, err
	}

	password, _ := take("password")
	if password != "" {
		spec.extra.RootPasswordHash = accessHashPassword(password)
	}
	if keys, ok := take("ssh-public-keys"); ok {
		if err := ctValidateSSHKeys(keys); err != nil {
			return ctCreateSpec{}, err
		}
		spec.extra.SSHPublicKeys = keys
	}
	pool, hasPool := take("pool")
	if err := cr.checkAllocateLocked(auth, vmid, pool, hasPool); err != nil {
		return ctCreateSpec{}, err
	}
	spec.pool = pool
	spec.template, _ = take("ostemplate")
	spec.storage, _ = take("storage")
	if spec.storage == "" {
		spec.storage = "local"
	}
	spec.mounts, spec.conf, err = cr.ctCheckCreateParamsLocked(auth, node, vmid, pool, p, spec.storage, spec.template, "vztmpl", unprivileged)
	if err != nil {
		return ctCreateSpec{}, err
	}
	return spec, nil
}

// ctCreateRequest is a create or restore request (POST /nodes/{node}/lxc)
// as create_vm first reads it: p holds the parameters not yet taken.
type ctCreateRequest struct {
	p         map[string]string
	vmid      int
	start     bool
	haManaged bool
	// ignoreUnpack is ignore-unpack-errors: a restore goes on when tar
	// reports errors (idmap.go).
	ignoreUnpack bool
}

// take removes parameter k and returns its value.
func (r *ctCreateRequest) take(k string) (string, bool) {
	v, ok := r.p[k]
	delete(r.p, k)
	return v, ok
}

// ctReadCreateRequestLocked is the start of create_vm for a create and a
// restore alike: the node, the VMID, and the parameters that only steer
// the request (ignore-unpack-errors, bwlimit, start, ha-managed).
func (cr *ctCreator) ctReadCreateRequestLocked(node string, params map[string]string) (*ctCreateRequest, error) {
	if err := cr.guests.checkNodeLocked(node); err != nil {
		return nil, err
	}
	r := &ctCreateRequest{p: map[string]string{}}
	for k, v := range params {
		r.p[k] = v
	}
	vmidStr, _ := r.take("vmid")
	vmid, err := strconv.Atoi(vmidStr)
	if err != nil {
		return nil, ParamError(map[string]string{"vmid": fmt.Sprintf("type check ('integer') failed - got '%s'", vmidStr)})
	}
	r.vmid = vmid
	ignore, _ := r.take("ignore-unpack-errors")
	r.ignoreUnpack = isTrue(ignore)
	r.take("bwlimit") // only throttles the extraction
	start, _ := r.take("start")
	r.start = isTrue(start)
	ha, _ := r.take("ha-managed")
	r.haManaged = isTrue(ha)
	return r, nil
}

// checkHAManaged is create_vm's check for ha-managed=1: Sys.Console on
// "/" (403 without it). The task adds the HA resource at its end
// (haManageCreated).
func (cr *ctCreator) checkHAManagedLocked(auth Auth, r *ctCreateRequest) error {
	st := cr.state()
	if !r.haManaged {
		return nil
	}
	return st.Access.Check(auth, "/", []string{"Sys.Console"}, false)
}

// ctCheckCreateParamsLocked is what create_vm checks for a create and a
// restore alike once the caller's own permission checks passed: the
// config keys in p (check_ct_modify_config_perm), access to volid (the
// template, content vztmpl, or the backup archive), the rootfs/mpN
// parameters and their storages (a bare size goes on storage), and
// update_pct_config of the other keys. It returns rootfs/mpN as given,
// plain sizes made STORAGE:SIZE, and the config without volumes. pool is
// the pool= the CT joins ("" for none).
func (cr *ctCreator) ctCheckCreateParamsLocked(auth Auth, node string, vmid int, pool string, p map[string]string, storage, volid, content string, unprivileged bool) (mounts, conf map[string]string, err error) {
	if err := cr.config.ctModifyConfigPermLocked(auth, vmid, pool, nil, p, nil, unprivileged); err != nil {
		return nil, nil, err
	}
	if err := cr.config.ctCheckVolumeAccessLocked(auth, vmid, volid, content); err != nil {
		return nil, nil, err
	}

	mounts = map[string]string{}
	noDisk := map[string]string{}
	for _, opt := range slices.Sorted(maps.Keys(p)) {
		value := p[opt]
		switch {
		case opt == "rootfs" || ctKeyIs(opt, "mp"):
			if ctPlainSizeRE.MatchString(value) {
				value = storage + ":" + value
			}
			mounts[opt] = value
		case ctKeyIs(opt, "unused"):
			cr.log.Warn(fmt.Sprintf("ignoring '%s', cannot create/restore with unused volume", opt), "vmid", vmid)
		default:
			noDisk[opt] = value
		}
	}
	if _, ok := mounts["rootfs"]; len(mounts) > 0 && !ok {
		return nil, nil, Failf("mount points configured, but 'rootfs' not set - aborting\n")
	}
	for _, key := range ctVolumeKeys(mounts) {
		mp, err := ParseMountPoint(key, mounts[key])
		if err != nil {
			return nil, nil, Failf("%s\n", err)
		}
		if mp.Type() != "volume" {
			if !auth.IsRoot() {
				return nil, nil, Failf("Only root can pass arbitrary filesystem paths.\n")
			}
			continue
		}
		sid, _, ok := ParseVolID(mp.Volume())
		if !ok {
			return nil, nil, Failf("unable to parse volume ID '%s'\n", mp.Volume())
		}
		if err := cr.ctCheckCreateStorageLocked(auth, node, sid); err != nil {
			return nil, nil, err
		}
	}
	if len(mounts) == 0 {
		if err := cr.ctCheckCreateStorageLocked(auth, node, storage); err != nil {
			return nil, nil, err
		}
	}

	g := &Guest{VMID: vmid, Node: node, Config: map[string]string{}}
	if _, err := cr.config.ctUpdateConfigLocked(g, false, noDisk, nil, nil); err != nil {
		return nil, nil, err
	}
	if unprivileged {
		g.Config["unprivileged"] = "1"
	}
	return mounts, g.Config, nil
}

// ctCreateDisksLocked is create_disks for a create or a restore: each
// rootfs/mpN in mounts given as STORAGE:SIZE (GiB) gets a new volume,
// logged as alloc_disk logs it and added to vols (for the cleanup of a
// failed task); conf gets every mount point with its volume and size.
func (cr *ctCreator) ctCreateDisksLocked(w *Worker, node string, vmid int, mounts, conf map[string]string, vols *[]string) error {
	for _, key := range ctVolumeKeys(mounts) {
		mp, err := ParseMountPoint(key, mounts[key])
		if err != nil {
			return Failf("%s\n", err)
		}
		if sid, sizeGiB, ok := ParseNewDisk(mp.Volume()); ok && mp.Type() == "volume" {
			size := int64(sizeGiB*1024) * mib
			v, lines, err := cr.ctAllocDiskLocked(node, sid, vmid, size)
			for _, l := range lines {
				w.logLocked("%s", l)
			}
			if err != nil {
				return err
			}
			*vols = append(*vols, v.VolID())
			if err := cr.formatVolumes(node, conf, []string{v.VolID()}); err != nil {
				return err
			}
			mp.Props["volume"] = v.VolID()
			mp.Props["size"] = pvesize.Format(size)
		}
		conf[key] = mp.String()
	}
	return nil
}

// ctPlainSizeRE is a rootfs/mpN given as a bare size in GiB.
var ctPlainSizeRE = lazyre.New(`^\d+(\.\d+)?$`)

// ctCheckCreateStorageLocked is create_vm's $check_and_activate_storage.
func (cr *ctCreator) ctCheckCreateStorageLocked(auth Auth, node, sid string) error {
	st := cr.state()
	s, err := cr.storage.storageCheckEnabledLocked(sid, node)
	if err != nil {
		return err
	}
	if !s.HasContent("rootdir") {
		return ParamError(map[string]string{"storage": fmt.Sprintf("storage '%s' does not support container directories", sid)})
	}
	return st.Access.Check(auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false)
}

// ctValidateSSHKeys is PVE::Tools::validate_ssh_public_keys: every
// non-blank line must be a public key.
func ctValidateSSHKeys(keys string) error {
	for _, line := range strings.Split(keys, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil {
			return Failf("SSH public key validation error\n")
		}
	}
	return nil
}

// ctCreateTask is the vzcreate worker. On failure the new volumes and the
// config go again and the error reads "unable to create CT <vmid> - …".
// With start it then starts the CT in the same task.
func (cr *ctCreator) ctCreateTask(w *Worker, spec ctCreateSpec) error {
	r := &ctCreate{c: w.c, w: w, spec: spec}
	return r.run()
}

// ctCreate is one vzcreate task: the request's spec and what the steps
// learn on the way. create reads top-down, as create_vm's worker:
// create the volumes, extract the template, set the OS up, write the
// config.
type ctCreate struct {
	c    *Cluster
	w    *Worker
	spec ctCreateSpec

	conf            map[string]string // the config being built
	mounts          map[string]string // the mount points to create
	vols            []string          // volumes created so far, freed on failure
	rootDir         string            // where the rootfs is mounted
	archive         string            // the template's path
	archiveHostPath string            // its path as PVE logs it
	rootSize        int64             // of a raw rootfs volume; 0 for a subvol, which has no fixed size
	systemd         int               // the template's systemd version, 0 if none
}

// run creates the CT, cleans up after a failure, and starts it if asked.
func (r *ctCreate) run() error {
	c, w, spec := r.c, r.w, r.spec
	if err := w.LockConfig(spec.vmid); err != nil {
		return err // the config keeps "lock: create", as on PVE
	}
	if err := r.create(); err != nil {
		w.cleanup(func(st *State) {
			c.freeImagesLocked(w, spec.node, r.vols)
			if g := st.Guests[spec.vmid]; g != nil && g.Node == spec.node {
				delete(st.Guests, spec.vmid)
			}
			delete(st.Extra, spec.vmid)
		})
		return Failf("unable to create CT %d - %s", spec.vmid, errText(err))
	}
	return c.finishCreated(w, spec.node, spec.vmid, spec.pool, spec.start, spec.haManaged)
}

// finishCreated is what a create and a restore do once the CT's
// volumes and config are done: the CT joins its pool, starts with
// start=1 (in the same task), and becomes an HA resource with
// ha-managed=1.
func (cr *ctCreator) finishCreated(w *Worker, node string, vmid int, pool string, start, haManaged bool) error {
	if err := w.Do(func(*State) error { cr.joinPoolLocked(vmid, pool); return nil }); err != nil {
		return err
	}
	if start {
		if err := cr.ctStartCreated(w, node, vmid); err != nil {
			return err
		}
	}
	return cr.ha.haManageCreated(w, vmid, haManaged, start)
}

// ctStartCreated is start=1 of a create or a restore whose volumes and
// config are done: the task's vzstart time, then the CT runs.
func (cr *ctCreator) ctStartCreated(w *Worker, node string, vmid int) error {
	if err := w.Phase("vzstart", 1); err != nil {
		return err
	}
	return w.doGuest(node, vmid, func(st *State, g *Guest) error {
		return cr.createStartLocked(w, node, g)
	})
}

// freeImagesLocked frees the volumes a failed create or restore
// allocated; what cannot be freed is logged, as PVE's cleanup does.
func (cr *ctCreator) freeImagesLocked(w *Worker, node string, volids []string) {
	for _, volid := range volids {
		if err := cr.storage.freeImageLocked(w, node, volid); err != nil {
			w.logLocked("%s", errText(err))
		}
	}
}

// createStartLocked starts a just-created CT as vm_start would: no
// templates, no quotas on an unprivileged CT, then running with a PID.
func (cr *ctCreator) createStartLocked(w *Worker, node string, g *Guest) error {
	if g.IsTemplate() {
		return Failf("you can't start a CT if it's a template\n")
	}
	if err := checkBridges(g.Config); err != nil {
		return err
	}
	if err := checkQuotas(g); err != nil {
		return err
	}
	if err := cr.admit(w, node, g); err != nil {
		return err
	}
	cr.power.markRunningLocked(g)
	return nil
}

// create is the body of create_vm's worker: create_disks, mount,
// restore_archive, OS setup, defaults, write_config. New volumes are
// added to r.vols as they are made, for the cleanup.
func (r *ctCreate) create() error {
	spec := r.spec
	r.conf = map[string]string{}
	for k, v := range spec.conf {
		r.conf[k] = v
	}
	r.mounts = map[string]string{}
	for k, v := range spec.mounts {
		r.mounts[k] = v
	}
	if len(r.mounts) == 0 {
		r.mounts["rootfs"] = spec.storage + ":4" // defaults to 4GB
	}
	if err := r.createVolumes(); err != nil {
		return err
	}
	if err := r.w.Phase("vzcreate", 0.2); err != nil {
		return err
	}
	if err := r.extract(); err != nil {
		return err
	}
	if err := r.setupOS(); err != nil {
		return err
	}
	if err := r.w.Phase("vzcreate", 0.8); err != nil {
		return err
	}
	return r.writeConfig()
}

// createVolumes is create_disks and mount_all: the volumes are made and
// the rootfs's directory and the template's path found.
func (r *ctCreate) createVolumes() error {
	c, w, spec, conf := r.c, r.w, r.spec, r.conf
	return w.Do(func(st *State) error {
		if err := c.ctCreateDisksLocked(w, spec.node, spec.vmid, r.mounts, conf, &r.vols); err != nil {
			return err
		}
		// mount_all activates every volume, which fails for a missing one.
		for _, mp := range mountPoints(conf) {
			if mp.Type() == "volume" && st.Volumes[st.volKey(spec.node, mp.Volume())] == nil {
				return Failf("volume '%s' does not exist\n", mp.Volume())
			}
		}
		r.rootDir = c.ctMountDirLocked(spec.node, conf["rootfs"])
		if mp, err := ParseMountPoint("rootfs", conf["rootfs"]); err == nil && mp.Type() == "volume" {
			if v := st.Volumes[volumeKey(spec.node, mp.Volume())]; v != nil && v.Format == "raw" {
				r.rootSize = v.Size
			}
		}
		sid, name, ok := ParseVolID(spec.template)
		if !ok || st.Volumes[st.volKey(spec.node, spec.template)] == nil {
			return Failf("can't find file '%s'\n", spec.template)
		}
		r.archive = c.storage.volumePath(spec.node, sid, name)
		r.archiveHostPath = c.storage.hostPath(st.storage(sid), name)
		return nil
	})
}

// extract is restore_archive: the template unpacked into the rootfs,
// failing as tar does when an appliance does not fit.
func (r *ctCreate) extract() error {
	w, conf, archive := r.w, r.conf, r.archive
	w.Log("extracting archive '%s'", r.archiveHostPath)
	if a, ok := applianceFor(filepath.Base(archive)); ok && r.rootSize > 0 && r.rootSize < a.InstalledMiB*mib {
		// tar fills the file system and fails (restore_tar_archive).
		w.Log("tar: ./usr/share/doc: Cannot mkdir: No space left on device")
		w.Log("tar: Exiting with failure status due to previous errors")
		return Failf("command '%s' failed: exit code 2\n", ctTarCommand(conf, r.spec.vmid, archive))
	}
	began := time.Now()
	systemd, err := extractTemplate(archive, r.rootDir, r.c.ctIDMap(conf))
	if err != nil {
		return Failf("unable to extract '%s': %s\n", r.archiveHostPath, err)
	}
	r.systemd = systemd
	if n, err := ctTarSize(archive); err == nil {
		w.Log("Total bytes read: %d (%s, %s/s)", n, ctHumanBytes(float64(n)), ctHumanBytes(float64(n)/max(time.Since(began).Seconds(), 1e-3)))
	}
	return nil
}

// setupOS is the OS setup after extraction: architecture and OS type,
// hostname, SSH keys, host keys, and the nesting warning for a recent
// systemd in an unprivileged CT.
func (r *ctCreate) setupOS() error {
	w, spec, conf, archive, rootDir := r.w, r.spec, r.conf, r.archive, r.rootDir
	if conf["arch"] == "" {
		conf["arch"] = "amd64"
		if a, ok := applianceFor(filepath.Base(archive)); ok && a.Architecture != "" {
			conf["arch"] = a.Architecture
		}
		w.Log("Detected container architecture: %s", conf["arch"])
	}
	if conf["ostype"] == "" {
		ostype, err := ctDetectOSType(rootDir)
		if err != nil {
			return err
		}
		conf["ostype"] = ostype
	}
	if conf["hostname"] == "" {
		conf["hostname"] = fmt.Sprintf("CT%d", spec.vmid)
	}
	if err := ctPostCreate(rootDir, conf["hostname"], spec.extra.SSHPublicKeys); err != nil {
		return err
	}
	if err := ctSetupNetworkAndDNS(rootDir, conf); err != nil {
		return err
	}
	keyLines, err := writeHostKeys(rootDir, conf["hostname"])
	if err != nil {
		return err
	}
	for _, l := range keyLines {
		w.Log("%s", l)
	}
	if isTrue(conf["unprivileged"]) && ctParseFeatures(conf["features"])["nesting"] != "1" && r.systemd >= ctSystemdNestingMin {
		w.Warn("Systemd %d detected. You may need to enable nesting.", r.systemd)
	}
	return nil
}

// writeConfig sets the defaults and writes the config, without "lock:
// create", and the guest's extras.
func (r *ctCreate) writeConfig() error {
	spec, conf := r.spec, r.conf
	// set some defaults
	if conf["memory"] == "" || conf["memory"] == "0" {
		conf["memory"] = "512"
	}
	if _, ok := conf["swap"]; !ok {
		conf["swap"] = "512"
	}
	return r.w.doGuest(spec.node, spec.vmid, func(st *State, g *Guest) error {
		g.Config = conf // without "lock: create"
		if spec.extra != (GuestExtra{}) {
			extra := spec.extra
			st.Extra[spec.vmid] = &extra
		}
		return nil
	})
}

// ctAllocDiskLocked is LXC.pm alloc_disk + format_disk: a raw volume
// with an ext4 filesystem (a subvol on a dir storage for size 0). It
// returns what lvcreate and mkfs print.
func (cr *ctCreator) ctAllocDiskLocked(node, sid string, vmid int, size int64) (*Volume, []string, error) {
	s, err := cr.storage.storageCheckEnabledLocked(sid, node)
	if err != nil {
		return nil, nil, err
	}
	// alloc_disk: a storage with a path needs rootdir content like any
	// other; only then does size 0 on it mean a subvol.
	format := "raw"
	switch {
	case !s.HasContent("rootdir"):
		return nil, nil, Failf("content type 'rootdir' is not available or configured on storage '%s'\n", sid)
	case s.DirLike() && size == 0:
		format = "subvol"
	}
	v, lines, err := cr.storage.allocImageLocked(node, s, vmid, "", format, size)
	if err != nil {
		return nil, nil, err
	}
	if format == "raw" {
		lines = append(lines, fmt.Sprintf("Creating filesystem with %d 4k blocks and %d inodes", size/4096, size/(16*kib)))
	}
	return v, lines, nil
}

// ctMountDirLocked is where a rootfs value's files live on the data
// plane: the volume's directory, or for a bind or device mount (root@pam
// only) the host path under the data directory.
func (cr *ctCreator) ctMountDirLocked(node, rootfs string) string {
	mp, _ := ParseMountPoint("rootfs", rootfs)
	if mp.Type() == "volume" {
		if sid, name, ok := ParseVolID(mp.Volume()); ok {
			return cr.storage.volumePath(node, sid, name)
		}
	}
	return filepath.Join(cr.dataDir, "host", filepath.FromSlash(mp.Volume()))
}

// ctTarSize is the size of the tar stream in a .tar.zst, what tar's
// --totals reports as "Total bytes read".
func ctTarSize(archive string) (int64, error) {
	zr, closeZstd, err := openZstd(archive)
	if err != nil {
		return 0, err
	}
	defer closeZstd()
	return io.Copy(io.Discard, zr)
}

// ctHumanBytes prints a size as GNU tar's --totals does (1024-based, one
// decimal below 10): "10KiB", "1.5MiB".
func ctHumanBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if n < 10 && i > 0 {
		return strconv.FormatFloat(n, 'f', 1, 64) + units[i]
	}
	return strconv.FormatFloat(n, 'f', 0, 64) + units[i]
}

// ctOSTypes maps os-release IDs to PVE's ostype.
var ctOSTypes = map[string]string{
	"debian": "debian", "devuan": "devuan", "ubuntu": "ubuntu", "alpine": "alpine", "centos": "centos",
	"fedora": "fedora", "arch": "archlinux", "archlinux": "archlinux", "gentoo": "gentoo", "nixos": "nixos",
	"opensuse": "opensuse", "opensuse-leap": "opensuse", "opensuse-tumbleweed": "opensuse",
}

// ctDetectOSType is PVE::LXC::Setup's distribution detection, from the
// rootfs's etc/os-release (usr/lib/os-release without it, as
// os-release(5) says). The rootfs may come from a template or backup its
// users made: links are resolved inside it, as the CT sees them, never
// out to the host's files (readCTFileInRoot).
func ctDetectOSType(rootDir string) (string, error) {
	data, err := readCTFileInRoot(rootDir, "etc/os-release")
	if err == nil && data == "" {
		data, err = readCTFileInRoot(rootDir, "usr/lib/os-release")
	}
	if err != nil || data == "" {
		return "", Failf("unable to detect OS distribution\n")
	}
	for _, line := range strings.Split(data, "\n") {
		if id, ok := strings.CutPrefix(line, "ID="); ok {
			if t, ok := ctOSTypes[strings.Trim(id, `"'`)]; ok {
				return t, nil
			}
		}
	}
	return "", Failf("unable to detect OS distribution\n")
}

// ctPostCreate is the part of post_create_hook the emulator's guests see:
// the hostname, its /etc/hosts line in PVE's marked section, and root's
// authorized keys inside PVE's marked section.
func ctPostCreate(rootDir, hostname, sshKeys string) error {
	// The rootfs may come from a backup its users made: its files are
	// written through ReadCTFile/WriteCTFile, never through a link.
	if err := WriteCTFile(rootDir, "etc/hostname", hostname+"\n"); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if err := ctUpdateHosts(rootDir, hostname); err != nil {
		return fmt.Errorf("update /etc/hosts: %w", err)
	}
	if sshKeys == "" {
		return nil
	}
	if !strings.HasSuffix(sshKeys, "\n") {
		sshKeys += "\n"
	}
	body := "# --- BEGIN PVE ---\n" + sshKeys + "# --- END PVE ---\n"
	if err := writeCTFile(rootDir, "root/.ssh/authorized_keys", body, 0o600, 0o700); err != nil {
		return fmt.Errorf("set authorized keys: %w", err)
	}
	return nil
}

// ctRandomMAC is PVE::Tools::random_ether_addr with the datacenter's
// prefix: BC:24:11 and three random bytes.
func ctRandomMAC() string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%s:%02X:%02X:%02X", ctMACPrefix, b[0], b[1], b[2])
}

// ctTarCommand is restore_tar_archive_command as run_command prints it in
// its error: lxc-usernsexec with the id map for an unprivileged CT, tar
// with the archive's compression, the --totals and COMMON_TAR_FLAGS of
// pve-storage, into the CT's rootfs mount.
func ctTarCommand(conf map[string]string, vmid int, archive string) string {
	var cmd []string
	if isTrue(conf["unprivileged"]) {
		cmd = append(cmd, "lxc-usernsexec", "-m", "u:0:100000:65536", "-m", "g:0:100000:65536", "--")
	}
	cmd = append(cmd, "tar", "xpf", "-")
	for ext, opt := range map[string]string{".gz": "-z", ".bz2": "-j", ".xz": "-J", ".lzo": "--lzop", ".zst": "--zstd"} {
		if strings.HasSuffix(archive, ".tar"+ext) {
			cmd = append(cmd, opt)
		}
	}
	cmd = append(cmd, "--totals", "--one-file-system", "-p", "--sparse", "--numeric-owner", "--acls", "--xattrs",
		"'--xattrs-include=user.*'", "'--xattrs-include=security.capability'", "'--warning=no-file-ignored'", "'--warning=no-xattr-write'",
		"-C", fmt.Sprintf("/var/lib/lxc/%d/rootfs", vmid), "--skip-old-files", "--anchored", "--exclude", "'./dev/*'")
	return strings.Join(cmd, " ")
}

// ctUpdateHosts is Setup::Base's update_etc_hosts for a CT without a
// static address: 127.0.1.1 names the host, in PVE's marked section,
// which replaces an earlier one (a template's own lines stay).
func ctUpdateHosts(rootDir, hostname string) error {
	data, err := ReadCTFile(rootDir, "etc/hosts")
	if err != nil {
		return err
	}
	short, _, _ := strings.Cut(hostname, ".")
	names := short
	if hostname != short {
		names = hostname + " " + short
	}
	var kept []string
	in := false
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case line == "# --- BEGIN PVE ---":
			in = true
		case line == "# --- END PVE ---":
			in = false
		case !in && line != "":
			kept = append(kept, line)
		}
	}
	body := "# --- BEGIN PVE ---\n127.0.1.1 " + names + "\n# --- END PVE ---\n"
	if len(kept) > 0 {
		body = strings.Join(kept, "\n") + "\n" + body
	}
	return WriteCTFile(rootDir, "etc/hosts", body)
}
