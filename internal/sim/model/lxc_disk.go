package model

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/pvesize"
	"golang.org/x/sys/unix"
)

// Disk operations on a CT's mount points: PUT .../resize and POST
// .../move_volume (pve-container API2/LXC.pm resize_vm, move_volume;
// behaviour.md (d), (f) 5).

// ctDisks resizes and moves a CT's volumes. Cluster embeds it. It holds
// no *Cluster: the State's lock and the State, the release, and one
// field per part it calls.
type ctDisks struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	version string
	guests  interface {
		checkNodeLocked(node string) error
		guestLocked(node string, vmid int) (*Guest, error)
	}
	storage diskStorage
	// alloc (ctCreator) allocates a copy's volume as alloc_disk does.
	alloc interface {
		ctAllocDiskLocked(node, sid string, vmid int, size int64) (*Volume, []string, error)
	}
	tasks   taskStarter
	journal guestJournal
}

// diskStorage is what ctDisks needs of storageLayer: a volume's name
// and path, a free disk number, a rename and a free.
type diskStorage interface {
	parseVolnameLocked(volid string) (s *Storage, name, vtype string, owner int, err error)
	freeDiskNumberLocked(node, sid string, vmid int) int
	volumePath(node, storage, name string) string
	renameVolumeLocked(node, volid, newName string, target int) string
	freeVolumeLocked(node, volid string) error
}

// Lines of API2/LXC.pm (pve-container 6.1) whose die has no trailing
// newline, so that Perl appends " at FILE line N." (behaviour.md (f) 5).
const (
	resizeSizeDieLine  = 2344 // "invalid size string"
	resizeOwnerDieLine = 2365 // "can't resize mount point owned by another container"
)

// ResizeCT is PUT /nodes/{node}/lxc/{vmid}/resize: grow the volume of
// rootfs or an mpN (params disk, size — "+" means relative — and digest).
// Every check runs once before the task, failing the request, and again
// in the task under the config lock. Only the owner (by volume name) can
// grow a volume, so a pet volume is resized through its keeper CT.
func (d *ctDisks) ResizeCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	if err := d.guests.checkNodeLocked(node); err != nil {
		return "", err
	}
	sizeStr := params["size"]
	relative := strings.HasPrefix(sizeStr, "+")
	request, err := pvesize.Parse(strings.TrimPrefix(sizeStr, "+"))
	if err != nil {
		return "", Failf("invalid size string at /usr/share/perl5/PVE/API2/LXC.pm line %d.\n", resizeSizeDieLine)
	}
	if params["disk"] == "" {
		return "", Failf("no options specified\n")
	}
	if !strings.HasPrefix(params["disk"], "mp") && params["disk"] != "rootfs" {
		// The schema's enum; it leaves out unusedN, which cannot be resized.
		return "", ParamError(map[string]string{"disk": fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", params["disk"], resizableKeys())})
	}
	req := resizeRequest{auth: auth, node: node, vmid: vmid, disk: params["disk"], digest: params["digest"], relative: relative, size: request}
	if _, err := d.checkResizeLocked(req); err != nil {
		return "", err
	}
	return d.tasks.spawn(auth, node, "resize", strconv.Itoa(vmid), func(w *Worker) error {
		if err := w.LockConfig(vmid); err != nil {
			return err
		}
		var lines []string
		err := w.Do(func(st *State) error {
			p, err := d.checkResizeLocked(req)
			if err != nil {
				return err
			}
			lines = d.applyResizeLocked(p)
			return nil
		})
		if err != nil {
			return err
		}
		for _, l := range lines {
			w.Log("%s", l)
		}
		return w.Phase("resize", 1)
	}), nil
}

type resizeRequest struct {
	auth     Auth
	node     string
	vmid     int
	disk     string
	digest   string
	relative bool
	size     int64
}

// resizePlan is a checked resize: what to grow and to which size.
type resizePlan struct {
	g       *Guest
	mp      MountPoint
	storage *Storage
	vol     *Volume
	newSize int64
}

// checkResizeLocked is resize_vm's $load_and_check, in PVE's order.
func (d *ctDisks) checkResizeLocked(r resizeRequest) (resizePlan, error) {
	st := d.state()
	g, err := d.guests.guestLocked(r.node, r.vmid)
	if err != nil {
		return resizePlan{}, err
	}
	if err := checkLock(g); err != nil {
		return resizePlan{}, err
	}
	// check_ct_modify_config_perm sees only {disk}, which falls into its
	// generic branch: VM.Config.Options on the CT.
	if !r.auth.IsRoot() {
		if err := st.Access.Check(r.auth, fmt.Sprintf("/vms/%d", r.vmid), []string{"VM.Config.Options"}, false); err != nil {
			return resizePlan{}, err
		}
	}
	if r.digest != "" && r.digest != g.Digest() {
		return resizePlan{}, Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	mp, err := parseVolumeKey(r.disk, g.Config[r.disk])
	if err != nil {
		return resizePlan{}, err
	}
	s, _, _, owner, err := d.storage.parseVolnameLocked(mp.Volume())
	if err != nil {
		return resizePlan{}, err
	}
	if owner != r.vmid {
		ownerText := ""
		if owner != 0 {
			ownerText = strconv.Itoa(owner)
		}
		return resizePlan{}, Failf("can't resize mount point owned by another container (%s) at /usr/share/perl5/PVE/API2/LXC.pm line %d.\n", ownerText, resizeOwnerDieLine)
	}
	if !r.auth.IsRoot() {
		if err := st.Access.Check(r.auth, "/storage/"+s.ID, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return resizePlan{}, err
		}
	}
	v := st.Volumes[st.volKey(g.Node, mp.Volume())]
	if v == nil {
		return resizePlan{}, Failf("Could not determine current size of volume '%s'\n", mp.Volume())
	}
	newSize := r.size
	if r.relative {
		newSize += v.Size
	}
	switch {
	case newSize < v.Size:
		return resizePlan{}, Failf("unable to shrink disk size\n")
	case newSize == v.Size:
		return resizePlan{}, Failf("disk is already at specified size\n")
	}
	return resizePlan{g: g, mp: mp, storage: s, vol: v, newSize: newSize}, nil
}

// applyResizeLocked grows the volume and writes size= into the key; it
// returns the task log lines of lvresize, e2fsck and resize2fs. LVM rounds
// the LV up to whole 4 MiB extents; the config gets the size asked for.
func (d *ctDisks) applyResizeLocked(p resizePlan) []string {
	var lines []string
	old := p.vol.Size
	dev := ""
	switch p.storage.Type {
	case "lvmthin":
		p.vol.Size = roundUp(p.newSize, 4*mib)
		lv := p.storage.VGName + "/" + p.vol.Name
		lines = append(lines,
			fmt.Sprintf("  Size of logical volume %s changed from %s (%d extents) to %s (%d extents).", lv, lvmSize(old), old/(4*mib), lvmSize(p.vol.Size), p.vol.Size/(4*mib)),
			fmt.Sprintf("  Logical volume %s successfully resized.", lv))
		dev = "/dev/" + lv
	case "rbd":
		p.vol.Size = p.newSize
		dev = "/dev/rbd/" + p.storage.Pool + "/" + p.vol.Name
	default:
		p.vol.Size = p.newSize
		if p.vol.Format == "raw" {
			dev = p.storage.Path + "/images/" + strings.TrimPrefix(p.vol.Name, "images/")
		}
	}
	p.mp.Props["size"] = pvesize.Format(p.newSize)
	p.g.Config[p.mp.Key] = p.mp.String()
	if dev == "" {
		return lines // subvol: a quota, no filesystem to grow
	}
	e2fs := "1.47.2 (1-Jan-2025)"
	if d.version == "8.4" {
		e2fs = "1.47.0 (5-Feb-2023)"
	}
	if !p.g.Running {
		lines = append(lines, "e2fsck "+e2fs,
			"Pass 1: Checking inodes, blocks, and sizes",
			"Pass 2: Checking directory structure",
			"Pass 3: Checking directory connectivity",
			"Pass 4: Checking reference counts",
			"Pass 5: Checking group summary information")
	}
	blocks := p.newSize / 4096
	lines = append(lines, "resize2fs "+e2fs)
	if p.g.Running {
		lines = append(lines, fmt.Sprintf("Filesystem at %s is mounted on /tmp; on-line resizing required", dev))
	} else {
		lines = append(lines, fmt.Sprintf("Resizing the filesystem on %s to %d (4k) blocks.", dev, blocks))
	}
	return append(lines, fmt.Sprintf("The filesystem on %s is now %d (4k) blocks long.", dev, blocks))
}

// resizableKeys is the enum of resize's disk parameter.
func resizableKeys() string {
	keys := []string{"rootfs"}
	for i := 0; i < 256; i++ {
		keys = append(keys, "mp"+strconv.Itoa(i))
	}
	return strings.Join(keys, ", ")
}

func roundUp(n, unit int64) int64 { return (n + unit - 1) / unit * unit }

// lvmSize prints a size as LVM's reports do ("8.00 GiB", "512.00 MiB").
func lvmSize(b int64) string {
	if b >= gib {
		return fmt.Sprintf("%.2f GiB", float64(b)/float64(gib))
	}
	return fmt.Sprintf("%.2f MiB", float64(b)/float64(mib))
}

// parseVolumeKey is LXC::Config->parse_volume: an unusedN holds a bare
// volid; an unset rootfs/mpN fails JSON-schema parsing of the empty
// string, which PVE reports as a 500 "format error" with per-key errors.
func parseVolumeKey(key, value string) (MountPoint, error) {
	if strings.HasPrefix(key, "unused") {
		return MountPoint{Key: key, Props: PropString{"volume": value}}, nil
	}
	if value == "" {
		errs := map[string]string{"volume": "property is missing and it is not optional"}
		if key != "rootfs" {
			errs["mp"] = "property is missing and it is not optional"
		}
		return MountPoint{}, &Error{Kind: ErrFail, Message: "format error\n", Params: errs}
	}
	mp, err := ParseMountPoint(key, value)
	if err != nil {
		return MountPoint{}, Failf("%s\n", err)
	}
	return mp, nil
}

// MoveVolume is POST /nodes/{node}/lxc/{vmid}/move_volume (behaviour.md
// (d)). With target-vmid it reassigns the volume of key "volume" to
// another CT on the same node under key target-volume (default: the same
// key): the volume is renamed to the target's lowest free
// vm-<target>-disk-N (its data moves with it) and the source key is
// deleted; task id "<vmid>-<key>><target>-<targetkey>". With storage it
// copies the volume to a new one on that storage for the same CT, keeping
// the old one as unusedN unless delete=1; task id "<vmid>".
func (d *ctDisks) MoveVolume(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	if err := d.guests.checkNodeLocked(node); err != nil {
		return "", err
	}
	key, storage, target := params["volume"], params["storage"], params["target-vmid"]
	if storage != "" && target != "" {
		return "", Failf("either set storage or target-vmid, but not both\n")
	}
	switch {
	case target != "":
		tvmid, err := strconv.Atoi(target)
		if err != nil {
			return "", ParamError(map[string]string{"target-vmid": fmt.Sprintf("type check ('integer') failed - got '%s'", target)})
		}
		m := reassignment{node: node, vmid: vmid, key: key, target: tvmid, targetKey: params["target-volume"],
			digest: params["digest"], targetDigest: params["target-digest"]}
		if m.targetKey == "" {
			m.targetKey = key
		}
		return d.reassignVolumeLocked(auth, m)
	case storage != "":
		return d.moveToStorageLocked(auth, node, vmid, key, storage, params["digest"], isTrue(params["delete"]))
	default:
		msg := "both 'storage' and 'target-vmid' missing, either needs to be set"
		return "", ParamError(map[string]string{"target-vmid": msg, "storage": msg})
	}
}

// reassignment is a move_volume to another CT.
type reassignment struct {
	node                 string
	vmid, target         int
	key, targetKey       string
	digest, targetDigest string
}

func (d *ctDisks) reassignVolumeLocked(auth Auth, m reassignment) (string, error) {
	st := d.state()
	if !auth.IsRoot() {
		if err := st.Access.Check(auth, fmt.Sprintf("/vms/%d", m.target), []string{"VM.Config.Disk"}, false); err != nil {
			return "", err
		}
	}
	_, _, mp, err := d.checkReassignLocked(m)
	if err != nil {
		return "", err
	}
	sid, _, _ := ParseVolID(mp.Volume())
	if !auth.IsRoot() {
		if err := st.Access.Check(auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return "", err
		}
	}
	id := fmt.Sprintf("%d-%s>%d-%s", m.vmid, m.key, m.target, m.targetKey)
	return d.tasks.spawn(auth, m.node, "move_volume", id, func(w *Worker) error {
		if err := w.LockConfig(m.vmid); err != nil {
			return err
		}
		if m.target != m.vmid {
			if err := w.LockConfig(m.target); err != nil {
				return err
			}
		}
		if err := w.Phase("move_volume", 1); err != nil {
			return err
		}
		return w.Do(func(st *State) error { return d.doReassignLocked(w, m) })
	}), nil
}

// checkReassignLocked is $load_and_check_reassign_configs, every check in
// PVE's order. It runs before the task and again inside it.
func (d *ctDisks) checkReassignLocked(m reassignment) (src, dst *Guest, mp MountPoint, err error) {
	st := d.state()
	fail := func(format string, args ...any) (*Guest, *Guest, MountPoint, error) {
		return nil, nil, MountPoint{}, Failf(format, args...)
	}
	if m.key == "rootfs" || m.targetKey == "rootfs" {
		return fail("Cannot move to/from 'rootfs'\n")
	}
	if strings.HasPrefix(m.key, "unused") && !strings.HasPrefix(m.targetKey, "unused") {
		return fail("Moving an unused volume to a used one is not possible\n")
	}
	sg, tg := st.Guests[m.vmid], st.Guests[m.target]
	if sg == nil {
		return fail("could not find CT %d\n", m.vmid)
	}
	if tg == nil {
		return fail("could not find CT %d\n", m.target)
	}
	if sg.Node != tg.Node {
		return fail("Both containers need to be on the same node (%s != %s)\n", sg.Node, tg.Node)
	}
	if src, err = d.guests.guestLocked(m.node, m.vmid); err != nil {
		return nil, nil, MountPoint{}, err
	}
	if lock := src.Lock(); lock != "" {
		return fail("CT is locked (%s)\n", lock)
	}
	dst = src
	if m.target != m.vmid {
		if dst, err = d.guests.guestLocked(m.node, m.target); err != nil {
			return nil, nil, MountPoint{}, err
		}
		if lock := dst.Lock(); lock != "" {
			return fail("CT is locked (%s)\n", lock)
		}
	}
	if src.IsTemplate() || dst.IsTemplate() {
		return fail("Can't move volumes from or to template CT\n")
	}
	const modified = "detected modified configuration - file changed by other user? Try again.\n"
	if m.digest != "" && m.digest != src.Digest() {
		return fail("Container %d: "+modified, m.vmid)
	}
	if m.targetDigest != "" && m.targetDigest != dst.Digest() {
		return fail("Container %d: "+modified, m.target)
	}
	value, ok := src.Config[m.key]
	if !ok {
		return fail("volume '%s' for container '%d' does not exist\n", m.key, m.vmid)
	}
	if _, used := dst.Config[m.targetKey]; used {
		return fail("Target volume key '%s' is already in use for container '%d'\n", m.targetKey, m.target)
	}
	if mp, err = parseVolumeKey(m.key, value); err != nil {
		return nil, nil, MountPoint{}, err
	}
	volid := mp.Volume()
	if volid == "" {
		return fail("Volume '%s' has no associated image\n", m.key)
	}
	if volumeInUse(&Guest{Snapshots: src.Snapshots}, volid, true, false) {
		return fail("Cannot move volume used by a snapshot to another container\n")
	}
	if !d.canRenameLocked(src.Node, volid) {
		return fail("Storage does not support moving of this disk to another container\n")
	}
	if mp.Type() != "volume" {
		return fail("Cannot move a bindmount or device mount to another container\n")
	}
	if src.Running && !strings.HasPrefix(m.key, "unused") {
		return fail("Cannot move in-use volume while the source CT is running - detach or shutdown first\n")
	}
	return src, dst, mp, nil
}

// doReassignLocked is $volume_reassignfn after its checks: rename, drop
// the source key, write the target key. A target mpN goes through the
// normal set path, whose protection check fires after the rename and the
// source update, leaving the renamed volume unreferenced exactly as PVE
// does (behaviour.md (d) "Caveat").
func (d *ctDisks) doReassignLocked(w *Worker, m reassignment) error {
	st := d.state()
	src, dst, mp, err := d.checkReassignLocked(m)
	if err != nil {
		return err
	}
	w.logLocked("moving volume '%s' from container '%d' to '%d'", m.key, m.vmid, m.target)
	newVolid, lines, err := d.renameVolumeLocked(src.Node, mp.Volume(), m.target)
	for _, l := range lines {
		w.logLocked("%s", l)
	}
	if err != nil {
		return err
	}
	delete(src.Config, m.key)
	w.logLocked("removing volume '%s' from container '%d' config", m.key, m.vmid)
	if strings.HasPrefix(m.targetKey, "unused") {
		dst.Config[m.targetKey] = newVolid
	} else {
		if isTrue(dst.Config["protection"]) {
			return Failf("can't update CT %d drive '%s' - protection mode enabled\n", m.target, m.targetKey)
		}
		mp.Key = m.targetKey
		mp.Props["volume"] = newVolid
		if v := st.Volumes[st.volKey(dst.Node, newVolid)]; v != nil {
			mp.Props["size"] = pvesize.Format(v.Size) // the set path rescans the size
		}
		dst.Config[m.targetKey] = mp.String()
		pruneUsedUnused(dst.Config)
	}
	w.logLocked("target container '%d' updated with '%s'", m.target, m.targetKey)
	return nil
}

// canRenameLocked is volume_has_feature(rename): LVM-thin can rename a
// current (vm-) raw volume, a dir storage a raw/qcow2/vmdk image; base
// volumes, subvols and non-volumes cannot.
func (d *ctDisks) canRenameLocked(node, volid string) bool {
	st := d.state()
	v := st.Volumes[st.volKey(node, volid)]
	if v == nil {
		return false
	}
	s := st.storage(v.Storage)
	if s == nil {
		return false
	}
	base := strings.HasPrefix(filepath.Base(v.Name), "base-")
	switch s.Type {
	case "lvmthin", "rbd":
		return v.Format == "raw" && !base
	case "dir", "nfs":
		return (v.Format == "raw" || v.Format == "qcow2" || v.Format == "vmdk") && !base
	}
	return false
}

// renameVolumeLocked is PVE::Storage::rename_volume: the volume gets the
// lowest free disk name of target on its storage and keeps its data. It
// returns the new volid and what lvrename prints.
func (d *ctDisks) renameVolumeLocked(node, volid string, target int) (string, []string, error) {
	st := d.state()
	v := st.Volumes[st.volKey(node, volid)]
	if v == nil {
		return "", nil, Failf("no such volume '%s'\n", volid)
	}
	s := st.storage(v.Storage)
	if s == nil {
		return "", nil, Failf("storage '%s' does not exist\n", v.Storage)
	}
	n := d.storage.freeDiskNumberLocked(node, s.ID, target)
	var newName string
	var lines []string
	switch s.Type {
	case "lvmthin":
		newName = fmt.Sprintf("vm-%d-disk-%d", target, n)
		lines = append(lines, fmt.Sprintf("  Renamed \"%s\" to \"%s\" in volume group \"%s\"", v.Name, newName, s.VGName))
	case "rbd":
		newName = fmt.Sprintf("vm-%d-disk-%d", target, n)
	default:
		newName = fmt.Sprintf("%d/vm-%d-disk-%d.%s", target, target, n, v.Format)
	}
	newVolid := s.ID + ":" + newName
	if st.Volumes[st.volKey(node, newVolid)] != nil {
		return "", nil, Failf("target volume '%s' already exists\n", newName)
	}
	oldPath, newPath := d.storage.volumePath(node, s.ID, v.Name), d.storage.volumePath(node, s.ID, newName)
	if err := os.MkdirAll(filepath.Dir(newPath), 0o755); err != nil {
		return "", nil, fmt.Errorf("rename %s: %w", volid, err)
	}
	if err := os.Rename(oldPath, newPath); err != nil {
		return "", nil, fmt.Errorf("rename %s: %w", volid, err)
	}
	return d.storage.renameVolumeLocked(node, volid, newName, target), lines, nil
}

// moveToStorageLocked is the storage branch of move_volume: checks, the
// "disk" lock, then a task that copies the data to a new volume.
func (d *ctDisks) moveToStorageLocked(auth Auth, node string, vmid int, key, storage, digest string, del bool) (string, error) {
	st := d.state()
	if !auth.IsRoot() {
		if err := st.Access.Check(auth, "/storage/"+storage, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return "", err
		}
	}
	g, err := d.guests.guestLocked(node, vmid)
	if err != nil {
		return "", err
	}
	if err := checkLock(g); err != nil {
		return "", err
	}
	if g.Running {
		return "", Failf("cannot move volumes of a running container\n")
	}
	if strings.HasPrefix(key, "unused") {
		return "", Failf("cannot move volume '%s', only configured volumes can be moved to another storage\n", key)
	}
	mp, err := parseVolumeKey(key, g.Config[key])
	if err != nil {
		return "", err
	}
	oldVolid := mp.Volume()
	if del && volumeInUse(&Guest{Snapshots: g.Snapshots}, oldVolid, true, false) {
		return "", Failf("you can't move a volume with snapshots and delete the source\n")
	}
	if digest != "" && digest != g.Digest() {
		return "", Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	g.Config["lock"] = "disk"
	d.journal.markGuest(vmid)
	if err := d.journal.saveLocked(); err != nil {
		return "", err
	}
	return d.tasks.spawn(auth, node, "move_volume", strconv.Itoa(vmid), func(w *Worker) error {
		err := d.copyVolumeTask(w, node, vmid, key, storage, mp, del)
		if lerr := w.cleanup(func(st *State) {
			g := st.Guests[vmid]
			if g == nil {
				return
			}
			switch lock := g.Lock(); {
			case lock == "disk":
				delete(g.Config, "lock")
			case lock == "":
				w.logLocked("no lock found trying to remove 'disk'  lock")
			default:
				w.logLocked("found lock '%s' trying to remove 'disk' lock", lock)
			}
		}); err == nil {
			err = lerr
		}
		return err
	}), nil
}

// copyVolumeTask is $storage_realcmd without the unlock: allocate a
// volume on storage, copy the data (rsync), point key at it and keep or
// free the old volume.
func (d *ctDisks) copyVolumeTask(w *Worker, node string, vmid int, key, storage string, mp MountPoint, del bool) error {
	oldVolid := mp.Volume()
	var digest, srcDir, dstDir string
	var newVolid string
	err := w.doGuest(node, vmid, func(st *State, g *Guest) (err error) {
		digest = g.Digest()
		newVolid, srcDir, dstDir, err = d.allocCopyLocked(w, st, node, vmid, storage, mp)
		return err
	})
	if err != nil {
		return err
	}
	freeNew := func() {
		w.cleanup(func(st *State) {
			if err := d.storage.freeVolumeLocked(node, newVolid); err != nil {
				w.logLocked("%s", strings.TrimRight(errText(err), "\n"))
			}
		})
	}
	stats, err := copyTree(srcDir, dstDir)
	if err != nil {
		freeNew()
		return fmt.Errorf("copy %s: %w", oldVolid, err)
	}
	w.Log("Number of files: %d (reg: %d, dir: %d)", stats.files+stats.dirs, stats.files, stats.dirs)
	w.Log("Total file size: %d bytes", stats.bytes)
	if err := w.Phase("move_volume", 1); err != nil {
		freeNew()
		return err
	}
	err = w.doGuest(node, vmid, func(st *State, g *Guest) error {
		if g.Digest() != digest {
			return Failf("detected modified configuration - file changed by other user? Try again.\n")
		}
		mp.Props["volume"] = newVolid
		g.Config[key] = mp.String()
		if !del {
			if _, err := configAddUnused(g.Config, oldVolid); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		freeNew()
		return err
	}
	if !del {
		return nil
	}
	return w.Do(func(st *State) error {
		if err := d.storage.freeVolumeLocked(node, oldVolid); err != nil {
			w.logLocked("%s", strings.TrimRight(errText(err), "\n"))
			if g := st.Guests[vmid]; g != nil {
				configAddUnused(g.Config, oldVolid)
			}
		}
		return nil
	})
}

// allocCopyLocked is a volume copy's first step: the volume for the copy
// of mp on storage, as large as mp says (else as its volume), and the
// directories to copy from and to.
func (d *ctDisks) allocCopyLocked(w *Worker, st *State, node string, vmid int, storage string, mp MountPoint) (newVolid, srcDir, dstDir string, err error) {
	oldVolid := mp.Volume()
	if mp.Type() != "volume" {
		return "", "", "", Failf("cannot copy volumes of type %s\n", mp.Type())
	}
	old := st.Volumes[st.volKey(node, oldVolid)]
	if old == nil {
		return "", "", "", Failf("no such volume '%s'\n", oldVolid)
	}
	size := old.Size
	if s, err := pvesize.Parse(mp.Props["size"]); err == nil && s > 0 {
		size = s
	}
	// copy_volume allocates with alloc_disk, so the target storage
	// must take container volumes.
	v, lines, err := d.alloc.ctAllocDiskLocked(node, storage, vmid, size)
	if err != nil {
		return "", "", "", err
	}
	for _, l := range lines {
		w.logLocked("%s", l)
	}
	return v.VolID(), d.storage.volumePath(node, old.Storage, old.Name), d.storage.volumePath(node, v.Storage, v.Name), nil
}

// copyStats counts what copyTree copied (rsync --stats).
type copyStats struct {
	files, dirs int
	bytes       int64
	// skipped counts device nodes the host refused to make.
	skipped int
}

// copyTree copies the directory tree src into dst (which may exist) as a
// block-level LVM snapshot or rsync -aHAX would: every file type but
// sockets, with owners, full modes, times, hard links and xattrs (see
// fsmeta.go). Nothing is followed through a symlink on either side.
func copyTree(src, dst string) (copyStats, error) {
	t := &treeCopy{dst: dst, out: newBeneath(dst), links: map[inode]string{}}
	defer t.out.close()
	if err := walkVolume(src, t.entry); err != nil {
		return t.st, err
	}
	// Directories last, deepest first: writing into a directory changes
	// its mtime, and its mode may forbid the writes.
	for i := len(t.dirs) - 1; i >= 0; i-- {
		dirfd, name, err := t.out.parent(t.dirs[i].rel, false)
		if err != nil {
			return t.st, err
		}
		if err := applyMeta(dirfd, name, t.dirs[i].m, t.dirs[i].m.xattrs); err != nil {
			return t.st, err
		}
	}
	return t.st, nil
}

// treeCopy is one copyTree: the destination, opened beneath, the counts,
// the directories whose metadata waits for the end and the first copy
// of each hard-linked file.
type treeCopy struct {
	dst   string
	out   *beneath
	st    copyStats
	dirs  []copyDir
	links map[inode]string
}

// copyDir is a copied directory whose metadata is set last.
type copyDir struct {
	rel string
	m   fileMeta
}

// entry copies the file p, at rel in the tree.
func (t *treeCopy) entry(p, rel string) error {
	m, err := lstatMeta(p)
	if err != nil {
		return err
	}
	dirfd, name, err := t.out.parent(rel, true)
	if err != nil {
		return err
	}
	switch m.kind() {
	case unix.S_IFDIR:
		t.st.dirs++
		if name != "." {
			if err := clearAt(dirfd, name, true); err != nil {
				return err
			}
			if err := unix.Mkdirat(dirfd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("mkdir %s: %w", rel, err)
			}
		}
		t.dirs = append(t.dirs, copyDir{rel, m})
		return nil
	case unix.S_IFREG:
		t.st.files++
		if err := clearAt(dirfd, name, false); err != nil {
			return err
		}
		key := inode{m.dev, m.ino}
		if first, ok := t.links[key]; ok && m.nlink > 1 {
			return linkBeneath(t.dst, first, dirfd, name)
		}
		t.st.bytes += m.size
		if err := copyFileAt(p, dirfd, name); err != nil {
			return fmt.Errorf("copy %s: %w", rel, err)
		}
		if m.nlink > 1 {
			t.links[key] = rel
		}
	case unix.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if err := clearAt(dirfd, name, false); err != nil {
			return err
		}
		if err := unix.Symlinkat(target, dirfd, name); err != nil {
			return fmt.Errorf("symlink %s: %w", rel, err)
		}
	case unix.S_IFIFO, unix.S_IFCHR, unix.S_IFBLK:
		if err := clearAt(dirfd, name, false); err != nil {
			return err
		}
		skipped, err := mknodAt(dirfd, name, m)
		if err != nil {
			return err
		}
		if skipped {
			t.st.skipped++
			return nil
		}
	default:
		return nil // sockets: rsync and tar skip them too
	}
	return applyMeta(dirfd, name, m, m.xattrs)
}

// linkBeneath makes name in dirfd a hard link to first (relative to root).
func linkBeneath(root, first string, dirfd int, name string) error {
	ofd, oname, err := openBeneath(root, first, false)
	if err != nil {
		return err
	}
	defer unix.Close(ofd)
	if err := unix.Linkat(ofd, oname, dirfd, name, 0); err != nil {
		return fmt.Errorf("link %s: %w", first, err)
	}
	return nil
}

// copyFileAt copies the regular file src into a new file name in dirfd.
func copyFileAt(src string, dirfd int, name string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), name)
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
