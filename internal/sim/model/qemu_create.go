package model

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/pvesize"
)

// Creating a VM: POST /nodes/{node}/qemu (qemu-server API2/Qemu.pm
// create_vm), from scratch or with disks imported (import-from). The
// request checks the privileges and the drives, reserves the VMID with
// a config holding "lock: create", and returns the UPID of task
// qmcreate, which allocates the disks and writes the real config.

// vmNewDiskRE is NEW_DISK_RE: "<storage>:<size in GiB>".
var vmNewDiskRE = regexp.MustCompile(`^([^:\s]+):(\d+(?:\.\d+)?)$`)

// vmDrive is one drive of a create or update, as parsed from its value.
type vmDrive struct {
	key   string
	props PropString
	// sid and gib are set for a new disk, importFrom for an import,
	// cloudinit for the cloud-init drive.
	sid        string
	gib        float64
	importFrom string
	cloudinit  bool
}

// CreateVM is create_vm without archive (no restore).
func (q *qemuVMs) CreateVM(auth Auth, node string, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	st := q.state()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	if params["archive"] != "" {
		return "", Failf("restoring a VM backup is not served by the emulator yet: create the VM from scratch or with import-from\n")
	}
	vmid, err := strconv.Atoi(params["vmid"])
	if err != nil {
		return "", ParamError(map[string]string{"vmid": "property is missing and it is not optional"})
	}
	conf := maps.Clone(params)
	for _, k := range []string{"vmid", "pool", "start", "unique", "force", "storage", "live-restore", "bwlimit", "ha-managed", "import-working-storage"} {
		delete(conf, k)
	}
	if err := q.checkCreatePermLocked(auth, vmid, params["pool"], conf); err != nil {
		return "", err
	}
	drives, err := q.parseDrivesLocked(auth, node, conf)
	if err != nil {
		return "", err
	}
	if g := st.Guests[vmid]; g != nil {
		return "", Failf("unable to create VM %d - CT %d already exists on node '%s'\n", vmid, vmid, g.Node)
	}
	if vm := st.VMs[vmid]; vm != nil {
		return "", Failf("unable to create VM %d - VM %d already exists on node '%s'\n", vmid, vmid, vm.Node)
	}
	if st.VMs == nil {
		st.VMs = map[int]*VM{}
	}
	st.VMs[vmid] = &VM{VMID: vmid, Node: node, Config: map[string]string{"lock": "create"}}
	if pool := params["pool"]; pool != "" {
		st.Access.addToPool(vmid, pool)
	}
	if err := q.changedLocked(); err != nil {
		return "", err
	}
	start := isTrue(params["start"])
	return q.tasks.spawn(auth, node, "qmcreate", strconv.Itoa(vmid), func(w *Worker) error {
		return q.createTask(w, auth, node, vmid, conf, drives, start)
	}), nil
}

// checkCreatePermLocked is create_vm's checks before the drives: the
// pool, VM.Allocate on the VM (or its pool), then each key's privilege.
func (q *qemuVMs) checkCreatePermLocked(auth Auth, vmid int, pool string, conf map[string]string) error {
	a := q.state().Access
	if pool != "" {
		if err := a.PoolExists(pool); err != nil {
			return err
		}
	}
	if !a.HasPriv(auth, fmt.Sprintf("/vms/%d", vmid), "VM.Allocate") &&
		(pool == "" || !a.HasPriv(auth, "/pool/"+pool, "VM.Allocate")) {
		return PermError("")
	}
	return vmCheckModifyPermLocked(a, auth, vmid, slices.Collect(maps.Keys(conf)))
}

// parseDrivesLocked is check_storage_access over the drives of conf:
// a new disk needs Datastore.AllocateSpace on a storage with images, an
// import source must be an 'images' or 'import' volume the caller may
// read, an existing volume must exist.
func (q *qemuVMs) parseDrivesLocked(auth Auth, node string, conf map[string]string) ([]vmDrive, error) {
	var out []vmDrive
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		if !vmDriveRE.MatchString(k) {
			continue
		}
		d, err := q.parseDriveLocked(auth, node, k, conf[k])
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (q *qemuVMs) parseDriveLocked(auth Auth, node, key, value string) (vmDrive, error) {
	a := q.state().Access
	props, err := ParseProp(value, "file")
	if err != nil || props["file"] == "" {
		return vmDrive{}, ParamError(map[string]string{key: fmt.Sprintf("invalid format - format error\n%s.file: property is missing and it is not optional", key)})
	}
	d := vmDrive{key: key, props: props}
	file := props["file"]
	sid, name, _ := ParseVolID(file)
	switch m := vmNewDiskRE.FindStringSubmatch(file); {
	case file == "none" || file == "cdrom":
	case name == "cloudinit":
		d.sid, d.cloudinit = sid, true
		if err := q.checkImagesStorageLocked(auth, node, sid); err != nil {
			return d, err
		}
	case m != nil && props["media"] != "cdrom":
		d.sid = m[1]
		d.gib, _ = strconv.ParseFloat(m[2], 64)
		if err := q.checkImagesStorageLocked(auth, node, d.sid); err != nil {
			return d, err
		}
	default:
		if q.state().Volumes[q.state().volKey(node, file)] == nil {
			return d, Failf("volume '%s' does not exist\n", file)
		}
		if err := a.Check(auth, "/storage/"+sid, []string{"Datastore.AllocateSpace", "Datastore.Audit"}, true); err != nil {
			return d, err
		}
	}
	if src := props["import-from"]; src != "" {
		if err := q.checkImportLocked(auth, node, key, src); err != nil {
			return d, err
		}
		d.importFrom = src
		delete(d.props, "import-from")
	}
	return d, nil
}

// checkImagesStorageLocked: a new disk's storage must be enabled, hold
// images, and let the caller allocate space.
func (q *qemuVMs) checkImagesStorageLocked(auth Auth, node, sid string) error {
	if err := q.state().Access.Check(auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false); err != nil {
		return err
	}
	s, err := q.storage.storageCheckEnabledLocked(sid, node)
	if err != nil {
		return err
	}
	if !s.HasContent("images") {
		return ParamError(map[string]string{"storage": fmt.Sprintf("storage '%s' does not support vm images", sid)})
	}
	return nil
}

// checkImportLocked checks an import-from source: an 'images' or
// 'import' volume that exists and that the caller may read.
func (q *qemuVMs) checkImportLocked(auth Auth, node, key, src string) error {
	st := q.state()
	v := st.Volumes[st.volKey(node, src)]
	if v == nil {
		return Failf("volume '%s' does not exist\n", src)
	}
	if v.Content != "images" && v.Content != "import" {
		return ParamError(map[string]string{key: fmt.Sprintf("%s has wrong type '%s' - needs to be 'images' or 'import'", src, v.Content)})
	}
	if v.Owner != 0 {
		return st.Access.Check(auth, fmt.Sprintf("/vms/%d", v.Owner), []string{"VM.Clone"}, false)
	}
	return st.Access.Check(auth, "/storage/"+v.Storage, []string{"Datastore.AllocateSpace", "Datastore.Audit"}, true)
}

// createTask is the qmcreate worker: allocate each disk (and the
// cloud-init drive) under the State's lock, fill them outside it (an
// import copies hundreds of MB: the emulator keeps answering), then
// write the config without the lock, with the MACs and the generated
// keys; on a failure free what it made and drop the config.
func (q *qemuVMs) createTask(w *Worker, auth Auth, node string, vmid int, conf map[string]string, drives []vmDrive, start bool) error {
	var made []string
	var fills []vmFill
	err := w.Do(func(st *State) error {
		for _, d := range drives {
			volid, fill, err := q.makeDriveLocked(w.logLocked, node, vmid, d)
			if err != nil {
				return err
			}
			if volid != "" {
				made, fills = append(made, volid), append(fills, fill)
			}
			conf[d.key] = d.props.Print("file")
		}
		return nil
	})
	for _, fill := range fills {
		if err == nil {
			err = fill(w.Log)
		}
	}
	if err == nil {
		err = w.Do(func(st *State) error {
			vmFillDefaults(conf, q.clock())
			st.VMs[vmid].Config = conf
			q.journal.markCore()
			return nil
		})
	}
	if err != nil {
		w.cleanup(func(st *State) {
			for _, volid := range made {
				q.storage.freeVolumeLocked(node, volid)
			}
			delete(st.VMs, vmid)
			st.Access.RemoveVMAccess(vmid)
			q.journal.markCore()
		})
		return fmt.Errorf("unable to create VM %d - %w", vmid, err)
	}
	if start {
		return q.startTask(w, node, vmid)
	}
	return nil
}

// vmFill writes a new volume's data (a copy, or a sparse file), logging
// to logf; it runs without the State's lock.
type vmFill func(logf func(format string, args ...any)) error

// makeDriveLocked allocates d's volume (new, imported or cloud-init)
// and points d's file at it; it returns the new volid ("" for none) and
// what writes its data.
func (q *qemuVMs) makeDriveLocked(logf func(format string, args ...any), node string, vmid int, d vmDrive) (string, vmFill, error) {
	if d.sid == "" && d.importFrom == "" {
		return "", nil, nil
	}
	sid := d.sid
	if sid == "" {
		sid, _, _ = ParseVolID(d.props["file"])
	}
	s, err := q.storage.storageCheckEnabledLocked(sid, node)
	if err != nil {
		return "", nil, err
	}
	size, format, src := int64(d.gib*float64(gib)), "raw", ""
	if d.importFrom != "" {
		st := q.state()
		v := st.Volumes[st.volKey(node, d.importFrom)]
		srcSID, srcName, _ := ParseVolID(d.importFrom)
		src = q.storage.volumePath(node, srcSID, srcName)
		size, format = v.Size, v.Format
		if s.LVMLike() {
			format = "raw" // the volume holds the source's bytes (docs/emulator.md)
		}
	}
	name := ""
	if d.cloudinit {
		name, size = fmt.Sprintf("vm-%d-cloudinit", vmid), 4*mib
		if s.DirLike() {
			name += ".qcow2"
			format = "qcow2"
		}
	} else if s.DirLike() && format != "raw" {
		name = fmt.Sprintf("vm-%d-disk-%d.%s", vmid, q.storage.freeDiskNumberLocked(node, sid, vmid), format)
	}
	v, lines, err := q.storage.allocImageLocked(node, s, vmid, name, format, size)
	if err != nil {
		return "", nil, err
	}
	for _, l := range lines {
		logf("%s", l)
	}
	path, from := q.storage.volumePath(node, sid, v.Name), d.importFrom
	fill := func(logf func(format string, args ...any)) error {
		if from != "" {
			logf("importing disk '%s' to VM %d ...", from, vmid)
		}
		if err := vmWriteVolume(path, src, size); err != nil {
			return err
		}
		if from != "" {
			logf("transferred %s of %s (100.00%%)", pvesize.Format(size), pvesize.Format(size))
		}
		return nil
	}
	d.props["file"] = v.VolID()
	if d.cloudinit {
		d.props["media"] = "cdrom"
	} else {
		d.props["size"] = pvesize.Format(size)
	}
	return v.VolID(), fill, nil
}

// vmWriteVolume makes a VM volume's data a file (allocImageLocked made
// a directory, as a CT's volume is): a copy of src, or sparse of size.
func vmWriteVolume(path, src string, size int64) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("allocate %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("allocate %s: %w", path, err)
	}
	if src != "" {
		err = sparseCopy(f, src)
	}
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// sparseCopy copies src into f, leaving holes where src has blocks of
// zeros (an imported empty disk stays sparse, as qemu-img convert keeps
// it); the caller truncates f to its size.
func sparseCopy(f *os.File, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("import %s: %w", src, err)
	}
	defer in.Close()
	buf, zero := make([]byte, 1<<20), make([]byte, 1<<20)
	var off int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return err
			}
		}
		off += int64(n)
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("import %s: %w", src, rerr)
		}
	}
}

// vmFillDefaults is what create_vm adds: a MAC for each netN without
// one (Proxmox's BC:24:11 prefix), smbios1's uuid, vmgenid, meta, and
// the boot order when none is given.
func vmFillDefaults(conf map[string]string, now time.Time) {
	for k, v := range conf {
		if vmNetKeyRE.MatchString(k) {
			conf[k] = vmNetWithMAC(v)
		}
	}
	if conf["smbios1"] == "" {
		conf["smbios1"] = "uuid=" + vmUUID()
	}
	if conf["vmgenid"] == "" {
		conf["vmgenid"] = vmUUID()
	}
	conf["meta"] = fmt.Sprintf("creation-qemu=9.2.0,ctime=%d", now.Unix())
	if conf["boot"] == "" {
		var order []string
		for _, k := range slices.Sorted(maps.Keys(conf)) {
			if vmDriveRE.MatchString(k) && !strings.Contains(conf[k], "media=cdrom") {
				order = append(order, k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(conf)) {
			if vmNetKeyRE.MatchString(k) {
				order = append(order, k)
			}
		}
		conf["boot"] = "order=" + strings.Join(order, ";")
	}
}

// vmNetWithMAC gives a netN value its model's MAC when it has none:
// "virtio,bridge=vmbr0" becomes "virtio=BC:24:11:…,bridge=vmbr0".
func vmNetWithMAC(v string) string {
	p, err := ParseProp(v, "model")
	if err != nil {
		return v
	}
	model := p["model"]
	delete(p, "model")
	for k := range p {
		if qemuNICModels[k] {
			model = k
		}
	}
	if model == "" {
		return v
	}
	if p[model] == "" {
		b := make([]byte, 3)
		rand.Read(b)
		p[model] = fmt.Sprintf("BC:24:11:%02X:%02X:%02X", b[0], b[1], b[2])
	}
	return p.Print("", model)
}

// vmUUID is a random RFC 4122 version 4 UUID.
func vmUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
