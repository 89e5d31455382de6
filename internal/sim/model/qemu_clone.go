package model

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/pvesize"
)

// Cloning a VM: POST /nodes/{node}/qemu/{vmid}/clone (qemu-server
// API2/Qemu.pm clone_vm, QemuServer clone_disk). The checks run before
// the task and again in it; task qmclone holds the source's config flock
// and the new VM's config ("lock: clone") while it copies each disk (a
// full clone, the default for a VM) or links it to a base volume (a
// linked clone, the default for a template). The emulator's linked clone
// is a copy named as PVE names it (docs/emulator.md).

// vmCloneReq is a clone's parameters and what the checks derived.
type vmCloneReq struct {
	auth           Auth
	node, target   string // target: the clone's node (node when not moved)
	vmid, newid    int
	snapname       string
	storage        string
	format         string
	pool           string
	name, desc     string
	full           bool
	conf           map[string]string // the source config (or the snapshot's)
	fullKeys       map[string]bool   // drives copied, not linked
	drives         []vmVolDrive      // the drives with a volume, the cloud-init one too
	sourceStorages []string
}

// vmCloner makes a VM a template (qemu_template.go) and clones a VM or
// template, fully or linked to its base volumes (qemu_clone.go): the
// two halves of linked clones. A destroy asks it whether a base is in
// use, a move_disk of a template's disk makes the new volume a base.
type vmCloner struct {
	vmParts
	// images (vmCreator) is check_storage_access for a target storage.
	images interface {
		checkImagesStorageLocked(auth Auth, node, sid string) error
	}
	// bases is vdisk_create_base (the CTs' template conversion does the
	// same to a volume).
	bases interface {
		createBaseLocked(node, volid string) (string, []string, error)
	}
	// firewall is clone_vmfw_conf: the clone gets the source's firewall.
	firewall interface{ cloneFirewallLocked(from, to int) }
}

// CloneVM is clone_vm: the early checks, the new VM reserved with
// "lock: clone", and the qmclone task.
func (q *vmCloner) CloneVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	newid, err := strconv.Atoi(params["newid"])
	if err != nil {
		return "", ParamError(map[string]string{"newid": "property is missing and it is not optional"})
	}
	req := vmCloneReq{auth: auth, node: node, target: node, vmid: vmid, newid: newid, snapname: params["snapname"],
		storage: params["storage"], format: params["format"], pool: params["pool"], name: params["name"], desc: params["description"]}
	if t := params["target"]; t != "" {
		req.target = t
	}
	if err := q.cloneCheckLocked(&req, params); err != nil {
		return "", err
	}
	st := q.state()
	st.VMs[newid] = &VM{VMID: newid, Node: req.target, Config: map[string]string{"lock": "clone"}}
	if err := q.changedLocked(); err != nil {
		return "", err
	}
	return q.tasks.spawn(auth, node, "qmclone", strconv.Itoa(vmid), func(w *Worker) error {
		release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
		if err != nil {
			w.cleanup(func(st *State) { delete(st.VMs, newid) })
			return err
		}
		defer release()
		return q.cloneTask(w, req)
	}), nil
}

// cloneCheckLocked is clone_vm's load_and_check.
func (q *vmCloner) cloneCheckLocked(req *vmCloneReq, params map[string]string) error {
	st := q.state()
	if req.pool != "" {
		if err := st.Access.PoolExists(req.pool); err != nil {
			return err
		}
	}
	if req.target != req.node {
		if err := q.nodes.checkNodeLocked(req.target); err != nil {
			return err
		}
	}
	if req.storage != "" {
		if err := q.images.checkImagesStorageLocked(req.auth, req.node, req.storage); err != nil {
			return err
		}
		if s := st.storage(req.storage); req.target != req.node && !s.Shared {
			return Failf("can't clone to non-shared storage '%s'\n", req.storage)
		}
	}
	src, err := q.vmLocked(req.node, req.vmid)
	if err != nil {
		return err
	}
	if err := vmCheckLock(src); err != nil {
		return err
	}
	req.conf = src.Config
	if req.snapname != "" {
		snap := src.Snapshots[req.snapname]
		if snap == nil {
			return Failf("snapshot '%s' does not exist\n", req.snapname)
		}
		req.conf = snap.Config
	}
	req.full = !isTrue(src.Config["template"])
	if v, ok := params["full"]; ok {
		req.full = isTrue(v)
	}
	if req.storage != "" && !req.full {
		return Failf("parameter 'storage' not allowed for linked clones\n")
	}
	if req.format != "" && !req.full {
		return Failf("parameter 'format' not allowed for linked clones\n")
	}
	if err := q.cloneDrivesLocked(req); err != nil {
		return err
	}
	if g := st.Guests[req.newid]; g != nil || st.VMs[req.newid] != nil {
		return Failf("unable to create VM %d: config file already exists\n", req.newid)
	}
	return nil
}

// cloneDrivesLocked checks each drive: the storage's privilege, the
// copy or clone feature, and local storage when the clone changes node.
func (q *vmCloner) cloneDrivesLocked(req *vmCloneReq) error {
	st := q.state()
	req.fullKeys, req.drives = map[string]bool{}, nil
	for _, d := range q.vmVolumeDrivesOrCloudInitLocked(req.node, req.conf) {
		sid := d.vol.Storage
		if req.storage != "" {
			sid = req.storage
		}
		if err := st.Access.Check(req.auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return err
		}
		what := "clone feature is not supported for"
		if req.snapname != "" {
			what += " a snapshot of"
		}
		what += fmt.Sprintf(" '%s' (%s)", d.drive["file"], d.key)
		s := st.storage(d.vol.Storage)
		cloudinit := strings.Contains(d.vol.Name, "-cloudinit")
		if req.full || cloudinit {
			if req.snapname != "" && !vmVolumeCanSnapshot(s, d.vol) {
				return Failf("Full %s\n", what)
			}
			req.fullKeys[d.key] = true
		} else if !vmCanLinkedClone(s, d.vol, req.snapname) {
			return Failf("Linked %s\n", what)
		}
		if req.target != req.node && !s.Shared && req.storage == "" {
			return Failf("can't clone VM to node '%s' (VM uses local storage)\n", req.target)
		}
		req.drives = append(req.drives, d)
	}
	return nil
}

// vmCanLinkedClone is volume_has_feature('clone'): an LVM-thin or RBD
// base volume or a snapshot of one; a dir or NFS base image (a linked
// clone there is a qcow2 file whose backing file is the base).
func vmCanLinkedClone(s *Storage, v *Volume, snapname string) bool {
	base := strings.HasPrefix(path.Base(v.Name), "base-")
	switch {
	case s == nil:
		return false
	case s.LVMLike():
		return snapname != "" || base
	case s.DirLike():
		return snapname == "" && base
	}
	return false
}

// vmLinkedCloneName is the volume name clone_image gives a linked clone
// own of base on s: LVM-thin's own name, RBD's "<base>/<own>" (own
// alone from a snapshot), a dir storage's "<base>/<own>" with both
// under their VMIDs' directories.
func vmLinkedCloneName(s *Storage, base, own, snapname string) string {
	if s.Type == "lvmthin" || snapname != "" {
		return own
	}
	return base + "/" + own
}

// cloneTask is the qmclone worker: each disk copied or linked (its
// volume made under the State's lock, its data copied outside it), then
// the new config; on a failure the new volumes and config go again.
func (q *vmCloner) cloneTask(w *Worker, req vmCloneReq) error {
	var made []string
	var conf map[string]string
	err := w.Do(func(st *State) error {
		if err := q.cloneCheckAgainLocked(&req); err != nil {
			return err
		}
		w.logLocked("creating a clone of VM %d with ID %d", req.vmid, req.newid)
		conf = vmCloneConfig(req)
		if src := st.VMs[req.vmid]; req.snapname == "" && len(src.Pending) > 0 {
			w.logLocked("found pending changes for '%s', discarding for clone", strings.Join(sortedConfigKeys(src.Pending), ","))
		}
		return nil
	})
	for _, d := range req.drives {
		if err == nil {
			err = q.cloneDisk(w, req, d, conf, &made)
		}
	}
	if err == nil {
		err = w.Do(func(st *State) error {
			st.VMs[req.newid].Config = conf
			q.firewall.cloneFirewallLocked(req.vmid, req.newid)
			if req.pool != "" {
				st.Access.addToPool(req.newid, req.pool)
			}
			q.journal.markCore()
			return nil
		})
	}
	if err != nil {
		w.cleanup(func(st *State) {
			for _, volid := range made {
				q.storage.freeVolumeLocked(req.node, volid)
			}
			delete(st.VMs, req.newid)
			q.journal.markCore()
		})
		return Failf("clone failed: %s", strings.TrimSuffix(errText(err), "\n"))
	}
	return nil
}

// cloneDisk makes drive d's new volume (recorded in made) and copies its
// data, then points conf's drive at it.
func (q *vmCloner) cloneDisk(w *Worker, req vmCloneReq, d vmVolDrive, conf map[string]string, made *[]string) error {
	var job vmCopyJob
	var volid string
	err := w.Do(func(st *State) error {
		var err error
		volid, job, err = q.cloneDiskLocked(w, req, d)
		if volid != "" {
			*made = append(*made, volid)
		}
		return err
	})
	if err == nil {
		err = job.run()
	}
	if err != nil {
		return err
	}
	if req.fullKeys[d.key] {
		w.Log("transferred %s of %s (100.00%%)", pvesize.Format(job.size), pvesize.Format(job.size))
	}
	d.drive["file"] = volid
	if vmStateDisk(d.key) {
		d.drive["size"] = pvesize.Format(job.size)
	}
	conf[d.key] = d.drive.Print("file")
	return nil
}

// cloneCheckAgainLocked repeats the checks under the flock, with the
// reserved new VM set aside.
func (q *vmCloner) cloneCheckAgainLocked(req *vmCloneReq) error {
	st := q.state()
	reserved := st.VMs[req.newid]
	delete(st.VMs, req.newid)
	full := "0"
	if req.full {
		full = "1"
	}
	err := q.cloneCheckLocked(req, map[string]string{"full": full})
	st.VMs[req.newid] = reserved
	return err
}

// vmCloneConfig is the new VM's config before its disks: the source's
// (or the snapshot's) without snapshot bookkeeping and pending changes,
// new MACs, a new SMBIOS UUID and vmgenid, the name given or
// "Copy-of-VM-<name>".
func vmCloneConfig(req vmCloneReq) map[string]string {
	conf := snapshotCopyConfig(req.conf)
	delete(conf, "parent")
	delete(conf, "template")
	delete(conf, "snapstate")
	for k, v := range conf {
		if vmNetKeyRE.MatchString(k) {
			conf[k] = vmNetNewMAC(v)
		}
	}
	conf["smbios1"] = "uuid=" + vmUUID()
	if conf["vmgenid"] != "" {
		conf["vmgenid"] = vmUUID()
	}
	conf["name"] = req.name
	if req.name == "" {
		name := req.conf["name"]
		if name == "" {
			name = strconv.Itoa(req.vmid)
		}
		conf["name"] = "Copy-of-VM-" + name
	}
	if d := req.conf["description"]; d != "" {
		conf["description"] = d // clone_vm copies it; snapshotCopyConfig drops it
	}
	if req.desc != "" {
		conf["description"] = req.desc
	}
	return conf
}

// cloneDiskLocked is clone_disk for one drive: allocate the new volume
// (on the target storage for a full clone, beside the base for a linked
// one) and return the copy of the data (from the snapshot with snapname).
func (q *vmCloner) cloneDiskLocked(w *Worker, req vmCloneReq, d vmVolDrive) (string, vmCopyJob, error) {
	kind := "linked"
	if req.fullKeys[d.key] {
		kind = "full"
	}
	w.logLocked("create %s clone of drive %s (%s)", kind, d.key, d.drive["file"])
	sid := d.vol.Storage
	if req.storage != "" && kind == "full" {
		sid = req.storage
	}
	s, err := q.storage.storageCheckEnabledLocked(sid, req.node)
	if err != nil {
		return "", vmCopyJob{}, err
	}
	format := d.vol.Format
	if req.format != "" {
		format = req.format
	}
	if s.LVMLike() {
		format = "raw"
	}
	name := ""
	if strings.Contains(d.vol.Name, "-cloudinit") {
		name = fmt.Sprintf("vm-%d-cloudinit", req.newid)
		if s.DirLike() {
			name += "." + format
		}
	} else if s.DirLike() {
		name = fmt.Sprintf("vm-%d-disk-%d.%s", req.newid, q.storage.freeDiskNumberLocked(req.node, sid, req.newid), format)
	}
	if kind == "linked" && s.DirLike() {
		format = "qcow2" // the clone's file names its base as backing file
		name = fmt.Sprintf("vm-%d-disk-%d.qcow2", req.newid, q.storage.freeDiskNumberLocked(req.node, sid, req.newid))
	}
	size := d.vol.Size
	if vmStateDisk(d.key) && kind != "linked" {
		size = vmStateDiskSize(s, d.key, d.drive) // clone_disk's efisize, TPMSTATE_DISK_SIZE
	}
	v, lines, err := q.storage.allocImageLocked(req.node, s, req.newid, name, format, size)
	if err != nil {
		return "", vmCopyJob{}, err
	}
	for _, l := range lines {
		w.logLocked("%s", l)
	}
	volid := v.VolID()
	if kind == "linked" {
		volid = q.storage.renameVolumeLocked(req.node, volid, vmLinkedCloneName(s, d.vol.Name, v.Name, req.snapname), req.newid)
	}
	src := q.storage.volumePath(req.node, d.vol.Storage, d.vol.Name)
	if req.snapname != "" {
		src = q.vmSnapPath(req.node, d.vol, req.snapname)
	}
	return volid, vmCopyJob{what: "clone " + d.drive["file"], dst: q.storage.volumePath(req.node, s.ID, v.Name), src: src, size: size}, nil
}
