package model

import (
	"archive/tar"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Unprivileged CTs and their user namespace. pve-container gives an
// unprivileged CT (unprivileged: 1, no lxc.idmap of its own) the map
// `lxc.idmap = u 0 100000 65536` and `g 0 100000 65536` (LXC.pm
// parse_id_maps; it does not read /etc/subuid), so container root is
// host uid 100000 and a file a guest's uid 1000 writes is host uid
// 101000 on disk. PVE's own tools honour the map:
//
//   - mkfs.ext4 -E root_owner=100000:100000 (and a chown of a subvol)
//     gives every new volume's top directory to container root;
//   - create and restore run tar inside the user namespace
//     (lxc-usernsexec -m u:0:100000:65536 …), so an archive's id x lands
//     as 100000+x; an id outside 0..65535 cannot be set (tar: "Cannot
//     change ownership … Invalid argument", the file stays container
//     root's), a device node cannot be made ("Cannot mknod: Operation not
//     permitted"), and either fails the restore with tar's exit code 2
//     unless ignore-unpack-errors is set;
//   - vzdump's tar runs in the user namespace too, so the archive holds
//     container ids (host 100000+x is x) and a host id outside the map is
//     what stat shows there: the overflow id 65534 (nobody/nogroup);
//   - snapshot, rollback and move_volume copy blocks: ids stay as they
//     are on disk, also when a volume moves to another CT.
//
// The emulator shifts only where its containers really run in such a
// user namespace (the guest layer turns it on with SetIDShift: LXC as
// root on a host that allows user namespaces); elsewhere an unprivileged
// CT's files keep the container's ids on disk, as before.

const (
	// ctIDBase is the host id of container root in PVE's default map.
	ctIDBase = 100000
	// ctIDCount is how many ids the default map covers.
	ctIDCount = 65536
	// overflowID is what the kernel shows for an id outside a user
	// namespace's map (/proc/sys/kernel/overflowuid).
	overflowID = 65534
)

// CTIDMap is PVE's default idmap of an unprivileged CT as LXC config
// lines (lxc.idmap = …), for the guest layer.
var CTIDMap = []string{fmt.Sprintf("u 0 %d %d", ctIDBase, ctIDCount), fmt.Sprintf("g 0 %d %d", ctIDBase, ctIDCount)}

// CTRootID is the host uid (and gid) of an unprivileged CT's root.
const CTRootID = ctIDBase

// idMap is the id shift between a CT and the host; the zero value is
// the identity (a privileged CT, or no shifting on this host).
type idMap struct{ base, count int }

func (m idMap) shifted() bool { return m.count > 0 }

// toHost maps a container id to the host id on disk; ok is false for an
// id the map does not cover.
func (m idMap) toHost(id int) (int, bool) {
	if !m.shifted() {
		return id, true
	}
	if id < 0 || id >= m.count {
		return 0, false
	}
	return m.base + id, true
}

// toCT maps a host id on disk to what a process in the CT sees: the
// overflow id for one outside the map.
func (m idMap) toCT(id int) int {
	if !m.shifted() {
		return id
	}
	if id < m.base || id >= m.base+m.count {
		return overflowID
	}
	return id - m.base
}

// SetIDShift turns the on-disk id shift of unprivileged CTs on or off
// (see above); the guest layer turns it on when its containers get the
// user namespace.
func (c *Cluster) SetIDShift(on bool) { c.idShift.Store(on) }

// IDShift reports whether unprivileged CTs' files are shifted on disk.
func (c *Cluster) IDShift() bool { return c.idShift.Load() }

// ctIDMap is the id map of a CT with config conf on this emulator.
func (c *Cluster) ctIDMap(conf map[string]string) idMap {
	if !c.idShift.Load() || !isTrue(conf["unprivileged"]) {
		return idMap{}
	}
	return idMap{base: ctIDBase, count: ctIDCount}
}

// ctFormatVolumes gives the top directory of each new volume (volids)
// to the CT's root, as mkfs.ext4 -E root_owner does.
func (c *Cluster) ctFormatVolumesLocked(node string, conf map[string]string, volids []string) error {
	m := c.ctIDMap(conf)
	if !m.shifted() {
		return nil
	}
	for _, volid := range volids {
		sid, name, ok := ParseVolID(volid)
		if !ok {
			continue
		}
		dir := c.storage.volumePath(node, sid, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Lchown(dir, m.base, m.base); err != nil {
			return fmt.Errorf("format %s: %w", volid, err)
		}
	}
	return nil
}

// shiftACL rewrites the named user and group entries of a binary POSIX
// ACL xattr through f; ok is false when f refuses an id.
func shiftACL(b []byte, f func(int) (int, bool)) ([]byte, bool) {
	if len(b) < 4 || (len(b)-4)%8 != 0 {
		return b, true
	}
	out := append([]byte(nil), b...)
	for i := 4; i < len(out); i += 8 {
		tag := binary.LittleEndian.Uint16(out[i:])
		if tag != 0x02 && tag != 0x08 { // ACL_USER, ACL_GROUP
			continue
		}
		id, ok := f(int(binary.LittleEndian.Uint32(out[i+4:])))
		if !ok {
			return nil, false
		}
		binary.LittleEndian.PutUint32(out[i+4:], uint32(id))
	}
	return out, true
}

// File capabilities (linux/capability.h): a v2 security.capability is
// the host's; a v3 one names the uid that is root where it applies. A
// v2 set from inside a user namespace is stored as v3 with the
// namespace's root (cap_convert_nscap), and reading a v3 whose root is
// the reader's namespace root gives v2 back (cap_inode_getsecurity).
const (
	vfsCapRevision2 = 0x02000000
	vfsCapRevision3 = 0x03000000
	vfsCapRevMask   = 0xff000000
	vfsCapV2Size    = 20
	vfsCapV3Size    = 24
)

// capToHost is security.capability v as an unprivileged CT's tar sets
// it (cap_convert_nscap): a v2 becomes v3 owned by the CT's root; a v3
// keeps v3 with its rootid shifted into the map (a container uid x is
// host uid base+x), and one whose rootid the map does not cover cannot
// be set (nil: the kernel refuses it with EINVAL, which tar's
// --warning=no-xattr-write keeps quiet). A v3 archived from another
// namespace's file thus never lands with a host rootid the CT did not
// name.
func capToHost(v []byte, m idMap) []byte {
	if !m.shifted() {
		return v
	}
	switch {
	case len(v) == vfsCapV2Size && binary.LittleEndian.Uint32(v)&vfsCapRevMask == vfsCapRevision2:
		out := make([]byte, vfsCapV3Size)
		copy(out, v)
		magic := binary.LittleEndian.Uint32(v)&^vfsCapRevMask | vfsCapRevision3
		binary.LittleEndian.PutUint32(out, magic)
		binary.LittleEndian.PutUint32(out[20:], uint32(m.base))
		return out
	case len(v) == vfsCapV3Size && binary.LittleEndian.Uint32(v)&vfsCapRevMask == vfsCapRevision3:
		root, ok := m.toHost(int(binary.LittleEndian.Uint32(v[20:])))
		if !ok {
			return nil
		}
		out := append([]byte(nil), v...)
		binary.LittleEndian.PutUint32(out[20:], uint32(root))
		return out
	}
	return v
}

// capToCT is security.capability v as tar inside the CT reads it: a v3
// owned by the CT's root is v2, one owned by another mapped uid keeps
// v3 with that uid, one from outside the map cannot be read (nil).
func capToCT(v []byte, m idMap) []byte {
	if !m.shifted() || len(v) != vfsCapV3Size || binary.LittleEndian.Uint32(v)&vfsCapRevMask != vfsCapRevision3 {
		return v
	}
	root := int(binary.LittleEndian.Uint32(v[20:]))
	if root < m.base || root >= m.base+m.count {
		return nil
	}
	if root == m.base {
		out := make([]byte, vfsCapV2Size)
		copy(out, v[:vfsCapV2Size])
		binary.LittleEndian.PutUint32(out, binary.LittleEndian.Uint32(v)&^vfsCapRevMask|vfsCapRevision2)
		return out
	}
	out := append([]byte(nil), v...)
	binary.LittleEndian.PutUint32(out[20:], uint32(root-m.base))
	return out
}

// tarChownError is GNU tar's message for an owner it cannot set.
func tarChownError(name string, uid, gid int) string {
	return "tar: " + name + ": Cannot change ownership to uid " + strconv.Itoa(uid) + ", gid " + strconv.Itoa(gid) + ": Invalid argument"
}

// shiftEntry is what tar inside an unprivileged CT's user namespace
// makes of an archive entry: owners, named ACL entries and file
// capabilities shifted into the map. refused is tar's message for what
// the namespace cannot do (an owner outside the map: the entry stays
// container root's; a device node: not made).
func shiftEntry(h *tar.Header, m fileMeta, xattrs map[string][]byte, ids idMap) (fileMeta, map[string][]byte, string) {
	refused := ""
	uid, uok := ids.toHost(h.Uid)
	gid, gok := ids.toHost(h.Gid)
	if !uok || !gok {
		refused = tarChownError(h.Name, h.Uid, h.Gid)
		uid, gid = ids.base, ids.base
	}
	m.uid, m.gid = uid, gid
	if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
		return m, xattrs, "tar: " + h.Name + ": Cannot mknod: Operation not permitted"
	}
	for k, v := range xattrs {
		switch k {
		case aclXattrAccess, aclXattrDefault:
			if b, ok := shiftACL(v, ids.toHost); ok {
				xattrs[k] = b
			} else {
				delete(xattrs, k)
				if refused == "" {
					refused = "tar: " + h.Name + ": Warning: Cannot acl_from_text: Invalid argument"
				}
			}
		case "security.capability":
			if c := capToHost(v, ids); c != nil {
				xattrs[k] = c
			} else {
				delete(xattrs, k)
			}
		}
	}
	return m, xattrs, refused
}

// restoreUnpackErrors is restore_tar_archive's end for an unprivileged
// CT: tar exits 2 after what its user namespace refused (skipped), which
// fails the restore unless ignore-unpack-errors is set. (A privileged
// restore's skipped device nodes are the emulator's host refusing them,
// not PVE's: that restore goes on, as before.)
func (c *Cluster) restoreUnpackErrors(w *Worker, spec restoreSpec, conf map[string]string, archive string, skipped []string) error {
	failed := false
	for _, l := range skipped {
		failed = failed || !strings.Contains(l, ": Warning: ") // tar's warnings leave its exit code alone
	}
	if !failed || !c.ctIDMap(conf).shifted() {
		return nil
	}
	w.Log("tar: Exiting with failure status due to previous errors")
	if spec.ignoreUnpack {
		return nil
	}
	return Failf("command '%s' failed: exit code 2\n", ctTarCommand(conf, spec.vmid, archive))
}

// unshiftXattrs is what the xattr calls of a process in the CT's user
// namespace read: named ACL entries as container ids (an id outside the
// map reads as -1, as from_kuid gives it) and file capabilities as
// capToCT makes them.
func unshiftXattrs(x map[string][]byte, ids idMap) map[string][]byte {
	if len(x) == 0 {
		return x
	}
	out := make(map[string][]byte, len(x))
	for k, v := range x {
		switch k {
		case aclXattrAccess, aclXattrDefault:
			v, _ = shiftACL(v, func(id int) (int, bool) {
				if ct := ids.toCT(id); ct != overflowID || id == ids.base+overflowID {
					return ct, true
				}
				return 0xffffffff, true
			})
		case "security.capability":
			if v = capToCT(v, ids); v == nil {
				continue
			}
		}
		out[k] = v
	}
	return out
}
