package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/pvesize"
)

// Clones: POST /nodes/{node}/lxc/{vmid}/clone (pve-container
// API2/LXC.pm clone_vm). The source is locked "disk" and the new CT
// "create" while a vzclone task copies each volume: a full clone
// allocates a volume and copies the data (rsync, as copy_volume); a
// linked clone of an LVM-thin base volume (a template's) or snapshot is a
// thin snapshot, here a new vm-<newid>-disk-N with the same data. Every
// other storage refuses linked clones of container volumes as PVE does
// (a dir storage's would be qcow2, which a CT cannot use).

// cloneRequest is a clone's parameters and what the checks derived.
type cloneRequest struct {
	auth                    Auth
	node, target            string // target "" when the clone stays on node
	vmid, newid             int
	pool, snapname, storage string
	hostname, description   string
	full                    bool
	mounts                  map[string]MountPoint // rootfs/mpN of the source
	fullKeys                map[string]bool
	conf                    map[string]string // the new CT's config without volumes
}

// CloneCT is clone_vm's synchronous part: the checks in PVE's order,
// then the "disk" lock on the source, the new CT's config with the
// "create" lock, and a vzclone task (its UPID is the answer).
func (cr *ctCreator) CloneCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	st := cr.state()
	req := cloneRequest{auth: auth, node: node, vmid: vmid, pool: params["pool"], snapname: params["snapname"],
		storage: params["storage"], target: params["target"], hostname: params["hostname"], description: params["description"]}
	newid, err := strconv.Atoi(params["newid"])
	if err != nil {
		return "", ParamError(map[string]string{"newid": "property is missing and it is not optional"})
	}
	req.newid = newid
	if req.target == node || req.target == "localhost" {
		req.target = ""
	}
	release, err := cr.guests.acquireFlock(vmid, configLockTimeout)
	if err != nil {
		return "", err
	}
	defer release()
	cr.stateMu.Lock()
	defer cr.stateMu.Unlock()
	if err := cr.cloneCheckLocked(&req, params); err != nil {
		return "", err
	}
	src := st.Guests[vmid]
	src.Config["lock"] = "disk"
	conf := map[string]string{"lock": "create"}
	for k, v := range req.conf {
		conf[k] = v
	}
	for k, mp := range req.mounts {
		conf[k] = mp.String() // the source's volume until the task replaces it
	}
	st.Guests[newid] = &Guest{VMID: newid, Node: node, Config: conf}
	cr.firewall.cloneFirewallLocked(vmid, newid)
	cr.journal.markGuest(vmid)
	cr.journal.markGuest(newid)
	if err := cr.journal.saveLocked(); err != nil {
		return "", err
	}
	return cr.tasks.spawn(auth, node, "vzclone", strconv.Itoa(vmid), func(w *Worker) error {
		return cr.cloneTask(w, req)
	}), nil
}

// cloneCheckLocked runs clone_vm's checks up to writing the new config.
func (cr *ctCreator) cloneCheckLocked(req *cloneRequest, params map[string]string) error {
	st := cr.state()
	if params["pool"] != "" {
		if err := st.Access.PoolExists(req.pool); err != nil {
			return err
		}
	}
	if err := cr.guests.checkNodeLocked(req.node); err != nil {
		return err
	}
	if req.target != "" && st.node(req.target) == nil {
		return Failf("no such cluster node '%s'\n", req.target)
	}
	if req.storage != "" {
		if _, err := cr.storage.storageCheckEnabledLocked(req.storage, req.node); err != nil {
			return err
		}
		if req.target != "" {
			if _, err := cr.storage.storageCheckEnabledLocked(req.storage, req.target); err != nil {
				return err
			}
			if s := st.storage(req.storage); !s.Shared {
				return Failf("can't clone to non-shared storage '%s'\n", req.storage)
			}
		}
	}
	src, err := cr.guests.guestLocked(req.node, req.vmid)
	if err != nil {
		return err
	}
	if err := checkLock(src); err != nil {
		return err
	}
	if err := cr.ctCheckVMIDUnusedLocked(req.newid); err != nil {
		return err
	}
	req.full = !src.IsTemplate()
	if v, ok := params["full"]; ok {
		req.full = isTrue(v)
	}
	if req.storage != "" && !req.full {
		return Failf("parameter 'storage' not allowed for linked clones\n")
	}
	conf := src.Config
	if req.snapname != "" {
		snap := src.Snapshots[req.snapname]
		if snap == nil {
			return Failf("snapshot '%s' does not exist\n", req.snapname)
		}
		conf = snap.Config
	}
	return cr.cloneConfigLocked(req, src, conf)
}

// cloneConfigLocked is clone_vm's loop over the source config: volumes
// checked and noted, every netN with a new MAC address, the rest copied;
// snapshot keys, pending changes and template dropped.
func (cr *ctCreator) cloneConfigLocked(req *cloneRequest, src *Guest, conf map[string]string) error {
	st := cr.state()
	req.mounts, req.fullKeys, req.conf = map[string]MountPoint{}, map[string]bool{}, map[string]string{}
	shared := true
	for _, opt := range sortedConfigKeys(conf) {
		value := conf[opt]
		switch {
		case strings.HasPrefix(opt, "unused") || opt == "lock" || opt == "template" || opt == "parent" || opt == "snaptime" || opt == "snapstate":
		case opt == "rootfs" || ctKeyIs(opt, "mp"):
			mp, err := parseVolumeKey(opt, value)
			if err != nil {
				return err
			}
			if mp.Type() != "volume" {
				return Failf("unable to clone mountpoint '%s' (type %s)\n", opt, mp.Type())
			}
			sid, _, _ := ParseVolID(mp.Volume())
			if req.storage != "" {
				sid = req.storage
			}
			if s := st.storage(sid); s == nil || !s.Shared {
				shared = false
			}
			if err := st.Access.Check(req.auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false); err != nil {
				return err
			}
			if req.full {
				if src.Running && req.snapname == "" {
					return Failf("Full clone of a running container is only possible from a snapshot\n")
				}
				req.fullKeys[opt] = true
			} else if !cr.canLinkedCloneLocked(req.node, mp.Volume(), req.snapname) {
				return Failf("Linked clone feature for '%s' is not available\n", mp.Volume())
			}
			req.mounts[opt] = mp
		case ctKeyIs(opt, "net"):
			net, err := ParseNet(value)
			if err != nil {
				return Failf("%s\n", err)
			}
			net["hwaddr"] = ctRandomMAC()
			req.conf[opt] = net.String()
			if !req.auth.IsRoot() {
				if err := cr.config.ctCheckBridgeAccessLocked(req.auth, req.conf[opt]); err != nil {
					return err
				}
			}
		default:
			req.conf[opt] = value
		}
	}
	if req.target != "" && !shared {
		return Failf("can't clone CT to node '%s' (CT uses local storage)\n", req.target)
	}
	if req.hostname != "" {
		req.conf["hostname"] = req.hostname
	}
	if req.description != "" {
		req.conf["description"] = req.description
	}
	return nil
}

// sortedConfigKeys is the config's keys in Perl's sort order.
func sortedConfigKeys(conf map[string]string) []string {
	keys := make([]string, 0, len(conf))
	for k := range conf {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// canLinkedCloneLocked is volume_has_feature(clone) with the target
// formats raw and subvol: an LVM-thin base volume, or any LVM-thin
// volume from a snapshot. RBD could as well, but the emulator does not
// model RBD's base/clone volume names, so it refuses them too
// (docs/emulator.md).
func (cr *ctCreator) canLinkedCloneLocked(node, volid, snapname string) bool {
	st := cr.state()
	v := st.Volumes[st.volKey(node, volid)]
	if v == nil {
		return false
	}
	s := st.storage(v.Storage)
	if s == nil || s.Type != "lvmthin" {
		return false
	}
	return snapname != "" || strings.HasPrefix(v.Name, "base-")
}

// cloneTask is the vzclone worker: copy or link each volume, join the
// pool, then drop the new CT's "create" lock (moving its config to the
// target node) and, in any case, the source's "disk" lock. On failure the
// new volumes and config go again: "clone failed: …".
func (cr *ctCreator) cloneTask(w *Worker, req cloneRequest) error {
	w.Log("creating a clone of container %d with ID %d", req.vmid, req.newid)
	var newVols []string
	err := cr.cloneVolumes(w, req, &newVols)
	if err == nil {
		err = w.Do(func(*State) error { cr.joinPoolLocked(req.newid, req.pool); return nil })
	}
	unlockErr := w.cleanup(func(st *State) {
		if g := st.Guests[req.vmid]; g != nil && g.Lock() == "disk" {
			delete(g.Config, "lock")
			cr.journal.markGuest(req.vmid)
		}
	})
	if err != nil {
		w.cleanup(func(st *State) {
			cr.freeImagesLocked(w, req.node, newVols)
			delete(st.Guests, req.newid)
			cr.journal.markGuest(req.newid)
			cr.firewall.removeFirewallLocked(req.newid)
		})
		return Failf("clone failed: %s", errText(err))
	}
	if unlockErr != nil {
		return unlockErr
	}
	return w.doGuest(req.node, req.newid, func(st *State, g *Guest) error {
		delete(g.Config, "lock")
		if req.target != "" {
			g.Node = req.target
		}
		return nil
	})
}

// cloneVolumes makes each of the new CT's volumes, recording them in
// newVols as they are made, and points its config at them.
func (cr *ctCreator) cloneVolumes(w *Worker, req cloneRequest, newVols *[]string) error {
	for _, key := range ctMountKeys(mountsConf(req.mounts)) {
		mp := req.mounts[key]
		volid := mp.Volume()
		var newVolid, srcDir, dstDir string
		err := w.Do(func(st *State) (err error) {
			old := st.Volumes[st.volKey(req.node, volid)]
			if old == nil {
				return Failf("no such volume '%s'\n", volid)
			}
			newVolid, dstDir, err = cr.cloneAllocLocked(w, req, key, mp, old)
			srcDir = cr.storage.volumePath(req.node, old.Storage, old.Name)
			if req.snapname != "" && len(old.Snapshots) > 0 {
				srcDir = cr.storage.snapshotPath(req.node, old, req.snapname)
			}
			return err
		})
		if err != nil {
			return err
		}
		*newVols = append(*newVols, newVolid)
		stats, err := copyTree(srcDir, dstDir)
		if err != nil {
			return fmt.Errorf("copy %s: %w", volid, err)
		}
		if req.fullKeys[key] {
			w.Log("Number of files: %d (reg: %d, dir: %d)", stats.files+stats.dirs, stats.files, stats.dirs)
			w.Log("Total file size: %d bytes", stats.bytes)
		}
		if err := w.Phase("vzclone", 1/float64(len(req.mounts))); err != nil {
			return err
		}
		err = w.doGuest(req.node, req.newid, func(st *State, g *Guest) error {
			if g.Lock() != "create" {
				return Failf("Lost 'create' config lock, aborting.\n")
			}
			mp.Props["volume"] = newVolid
			g.Config[key] = mp.String()
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// cloneAllocLocked allocates the new volume for mount point key: a full
// clone's on the target storage (alloc_disk, as copy_volume), a linked
// clone's beside the base (lvcreate -s). It logs what PVE prints and
// returns the new volume and its data directory.
func (cr *ctCreator) cloneAllocLocked(w *Worker, req cloneRequest, key string, mp MountPoint, old *Volume) (string, string, error) {
	st := cr.state()
	var v *Volume
	var lines []string
	var err error
	if req.fullKeys[key] {
		w.logLocked("create full clone of mountpoint %s (%s)", key, mp.Volume())
		storage := req.storage
		if storage == "" {
			storage = old.Storage
		}
		size := old.Size
		if n, perr := pvesize.Parse(mp.Props["size"]); perr == nil && n > 0 {
			size = n
		}
		v, lines, err = cr.ctAllocDiskLocked(req.node, storage, req.newid, size)
	} else {
		w.logLocked("create linked clone of mount point %s (%s)", key, mp.Volume())
		v, lines, err = cr.storage.allocImageLocked(req.node, st.storage(old.Storage), req.newid, "", "raw", old.Size)
	}
	if err != nil {
		return "", "", err
	}
	for _, l := range lines {
		w.logLocked("%s", l)
	}
	return v.VolID(), cr.storage.volumePath(req.node, v.Storage, v.Name), nil
}

// mountsConf is a config holding just the mount point keys, for
// ctMountKeys' order.
func mountsConf(mounts map[string]MountPoint) map[string]string {
	out := make(map[string]string, len(mounts))
	for k := range mounts {
		out[k] = ""
	}
	return out
}
