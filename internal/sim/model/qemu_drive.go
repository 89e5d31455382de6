package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
)

// The drives of a create or an update (qemu-server check_storage_access):
// what each drive key asks for, checked before anything is made.

// vmNewDiskRE is NEW_DISK_RE: "<storage>:<size in GiB>".
var vmNewDiskRE = lazyre.New(`^([^:\s]+):(\d+(?:\.\d+)?)$`)

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

// parseDrivesLocked is check_storage_access over the drives of conf,
// in valid_drive_names' order (the buses, then efidisk0 and tpmstate0),
// the order create_disks allocates them in: a new disk needs
// Datastore.AllocateSpace on a storage with images, an import source
// must be an 'images' or 'import' volume the caller may read, an
// existing volume must exist.
func (q *vmCreator) parseDrivesLocked(auth Auth, node string, conf map[string]string) ([]vmDrive, error) {
	var out []vmDrive
	for _, k := range slices.SortedFunc(maps.Keys(conf), vmDriveOrder) {
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

func (q *vmCreator) parseDriveLocked(auth Auth, node, key, value string) (vmDrive, error) {
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
		if err := vmCheckStateDiskImport(key, props); err != nil {
			return d, err
		}
		if err := q.checkImportLocked(auth, node, key, src); err != nil {
			return d, err
		}
		d.importFrom = src
		delete(d.props, "import-from")
	}
	return d, nil
}

// vmDriveOrder orders drive keys as valid_drive_names lists them: ide,
// scsi, virtio, sata (each by number), then efidisk0 and tpmstate0.
func vmDriveOrder(a, b string) int {
	rank := func(k string) (int, int) {
		for i, bus := range []string{"ide", "scsi", "virtio", "sata", "efidisk", "tpmstate"} {
			if n, err := strconv.Atoi(strings.TrimPrefix(k, bus)); err == nil && strings.HasPrefix(k, bus) {
				return i, n
			}
		}
		return 99, 0
	}
	ab, an := rank(a)
	bb, bn := rank(b)
	if ab != bb {
		return cmp.Compare(ab, bb)
	}
	if an != bn {
		return cmp.Compare(an, bn)
	}
	return strings.Compare(a, b)
}

// checkImagesStorageLocked: a new disk's storage must be enabled, hold
// images, and let the caller allocate space.
func (q *vmCreator) checkImagesStorageLocked(auth Auth, node, sid string) error {
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
func (q *vmCreator) checkImportLocked(auth Auth, node, key, src string) error {
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
