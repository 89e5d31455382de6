package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The data plane keeps what a real CT's file systems keep: owners,
// full modes (setuid, setgid, sticky), mtimes, symlinks, hard links,
// FIFOs, device nodes and extended attributes (ACLs are the xattrs
// system.posix_acl_access and system.posix_acl_default). copyTree
// (snapshot, rollback, move_volume), the vzdump tar writer and the
// restore extractor all go through this file's helpers, so the three
// agree on what a file's metadata is.
//
// Owners on disk: an unprivileged CT's files are shifted by PVE's idmap
// (host uid 100000+) where its container runs in that user namespace,
// and the archive writer and the extractor translate as tar inside the
// namespace does (idmap.go); elsewhere they are the container's own ids.
// When the emulator runs without root, its guests' root is the
// emulator's own uid (the user namespace of guest/view.go), so that uid
// and gid are written to archives as 0 and 0 is restored as the
// emulator's user.

// fileMeta is one file's metadata as lstat(2) and the xattr calls give it.
type fileMeta struct {
	mode         uint32 // st_mode: type and the 07777 bits
	uid, gid     int
	rdev         uint64
	atime, mtime unix.Timespec
	dev, ino     uint64
	nlink        uint64
	size         int64
	xattrs       map[string][]byte // nil when there are none or the file system has none
}

func (m fileMeta) perm() uint32 { return m.mode & 0o7777 }
func (m fileMeta) kind() uint32 { return m.mode & unix.S_IFMT }

func (m fileMeta) mtimeTime() time.Time { return time.Unix(m.mtime.Unix()) }

// lstatMeta reads p's metadata without following a final symlink.
func lstatMeta(p string) (fileMeta, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return fileMeta{}, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	m := fileMeta{
		mode: st.Mode, uid: int(st.Uid), gid: int(st.Gid), rdev: st.Rdev,
		atime: st.Atim, mtime: st.Mtim, dev: st.Dev, ino: st.Ino, nlink: st.Nlink, size: st.Size,
	}
	x, err := listXattrs(p)
	if err != nil {
		return fileMeta{}, err
	}
	m.xattrs = x
	return m, nil
}

// listXattrs reads every extended attribute of p (not following a final
// symlink). A file system without xattrs gives none.
func listXattrs(p string) (map[string][]byte, error) {
	buf := make([]byte, 1024)
	var n int
	for {
		var err error
		n, err = unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, &os.PathError{Op: "llistxattr", Path: p, Err: err}
		}
		break
	}
	if n == 0 {
		return nil, nil
	}
	out := map[string][]byte{}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		val := make([]byte, 256)
		for {
			k, err := unix.Lgetxattr(p, name, val)
			if errors.Is(err, unix.ERANGE) {
				val = make([]byte, len(val)*4)
				continue
			}
			if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
				break // gone meanwhile, or not readable here
			}
			if err != nil {
				return nil, &os.PathError{Op: "lgetxattr " + name, Path: p, Err: err}
			}
			out[name] = append([]byte(nil), val[:k]...)
			break
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// isRoot reports whether the emulator may give files any owner.
func isRoot() bool { return os.Geteuid() == 0 }

// ctOwner maps an on-disk owner to the container's view for an archive:
// without root, the emulator's own uid and gid are the guests' root.
func ctOwner(uid, gid int) (int, int) {
	if !isRoot() {
		if uid == os.Geteuid() {
			uid = 0
		}
		if gid == os.Getegid() {
			gid = 0
		}
	}
	return uid, gid
}

// ignorable are the errors a metadata change may meet where the host
// does not allow it (no root, a file system without xattrs, an xattr
// namespace closed to us): the file stays, with less of its metadata.
func ignorable(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EACCES)
}

// applyMeta gives the entry name in directory dirfd the owner, xattrs,
// mode and times of m, in that order: chown clears setuid and setgid, and
// an access ACL rewrites the group bits, so the mode comes after both.
// Without root, owners stay the emulator's (as GNU tar does for a user).
// The entry is never followed if it is a symlink.
func applyMeta(dirfd int, name string, m fileMeta, xattrs map[string][]byte) error {
	link := m.kind() == unix.S_IFLNK
	if err := unix.Fchownat(dirfd, name, m.uid, m.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil && !ignorable(err) {
		return fmt.Errorf("chown %s: %w", name, err)
	}
	if len(xattrs) > 0 {
		p := fdPath(dirfd, name)
		for _, k := range slices.Sorted(maps.Keys(xattrs)) {
			if err := unix.Lsetxattr(p, k, xattrs[k], 0); err != nil && !ignorable(err) {
				return fmt.Errorf("set xattr %s on %s: %w", k, name, err)
			}
		}
	}
	if !link {
		if err := unix.Fchmodat(dirfd, name, m.perm(), 0); err != nil {
			return fmt.Errorf("chmod %s: %w", name, err)
		}
	}
	ts := []unix.Timespec{m.atime, m.mtime}
	if err := unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil && !ignorable(err) {
		return fmt.Errorf("set times of %s: %w", name, err)
	}
	return nil
}

// fdPath names entry name of the open directory dirfd for the calls
// that take only a path (lsetxattr): /proc/self/fd/N is that very
// directory, so no symlink on the way can redirect the call.
func fdPath(dirfd int, name string) string {
	if name == "" || name == "." {
		return "/proc/self/fd/" + strconv.Itoa(dirfd)
	}
	return "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
}

// openBeneath opens the directory that holds rel (slash-separated,
// relative, clean) beneath the directory root, creating missing
// directories (0755, as tar does for members it has no entry for yet)
// when create is set. No component may be a symlink: nothing an archive
// or a tree holds can lead outside root. It returns the open parent
// directory and rel's last component ("." for rel "").
func openBeneath(root string, rel string, create bool) (dirfd int, name string, err error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: root, Err: err}
	}
	if rel == "" || rel == "." {
		return fd, ".", nil
	}
	comps := strings.Split(rel, "/")
	for _, c := range comps[:len(comps)-1] {
		if c == "" || c == "." || c == ".." {
			unix.Close(fd)
			return -1, "", fmt.Errorf("%s: bad path component %q", rel, c)
		}
		nfd, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				nfd, err = unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if err != nil {
			unix.Close(fd)
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return -1, "", fmt.Errorf("%s: %q is a symlink or not a directory; refusing to go through it (%w)", rel, c, err)
			}
			return -1, "", fmt.Errorf("%s: open %q: %w", rel, c, err)
		}
		unix.Close(fd)
		fd = nfd
	}
	last := comps[len(comps)-1]
	if last == "" || last == "." || last == ".." {
		unix.Close(fd)
		return -1, "", fmt.Errorf("%s: bad path component %q", rel, last)
	}
	return fd, last, nil
}

// statAt is lstat of name in dirfd.
func statAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// clearAt removes what is at name in dirfd unless it is a directory, so
// that a new entry of another kind can take its place. A directory
// there is kept when keepDir is set (a directory entry merges into it),
// else it is an error.
func clearAt(dirfd int, name string, keepDir bool) error {
	st, err := statAt(dirfd, name)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if keepDir {
			return nil
		}
		return fmt.Errorf("%s: a directory is in the way", name)
	}
	return unix.Unlinkat(dirfd, name, 0)
}

// mknodAt makes a FIFO or a device node. A device node the host refuses
// (no CAP_MKNOD, a nodev mount) is skipped: skipped reports it.
func mknodAt(dirfd int, name string, m fileMeta) (skipped bool, err error) {
	mode := m.kind() | (m.perm() & 0o777)
	dev := 0
	if m.kind() == unix.S_IFCHR || m.kind() == unix.S_IFBLK {
		dev = int(m.rdev)
	}
	if err := unix.Mknodat(dirfd, name, mode, dev); err != nil {
		if m.kind() != unix.S_IFIFO && ignorable(err) {
			return true, nil
		}
		return false, fmt.Errorf("mknod %s: %w", name, err)
	}
	return false, nil
}

// POSIX ACLs: the binary form of the system.posix_acl_* xattrs
// (linux/posix_acl_xattr.h) and the text form tar's --acls stores in PAX
// records SCHILY.acl.access and SCHILY.acl.default, with numeric ids as
// --numeric-owner asks: "user::rw-,user:1000:r--,group::r--,mask::r--,other::r--".

const (
	aclXattrAccess  = "system.posix_acl_access"
	aclXattrDefault = "system.posix_acl_default"
	aclVersion      = 2
)

var aclTags = []struct {
	tag  uint16
	name string
	id   bool
}{{0x01, "user", false}, {0x02, "user", true}, {0x04, "group", false}, {0x08, "group", true}, {0x10, "mask", false}, {0x20, "other", false}}

// aclToText renders a binary ACL xattr as tar's text form.
func aclToText(b []byte) (string, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != aclVersion {
		return "", errors.New("not a POSIX ACL xattr")
	}
	var parts []string
	for i := 4; i < len(b); i += 8 {
		tag, perm, id := binary.LittleEndian.Uint16(b[i:]), binary.LittleEndian.Uint16(b[i+2:]), binary.LittleEndian.Uint32(b[i+4:])
		name, qual := "", ""
		for _, t := range aclTags {
			if t.tag == tag {
				name = t.name
				if t.id {
					qual = strconv.FormatUint(uint64(id), 10)
				}
			}
		}
		if name == "" {
			return "", fmt.Errorf("unknown ACL tag %#x", tag)
		}
		rwx := []byte("---")
		for j, c := range "rwx" {
			if perm&(4>>j) != 0 {
				rwx[j] = byte(c)
			}
		}
		parts = append(parts, name+":"+qual+":"+string(rwx))
	}
	return strings.Join(parts, ","), nil
}

// aclFromText parses tar's text form (commas or newlines between
// entries, numeric ids) into a binary ACL xattr, its entries in the
// order the kernel requires.
func aclFromText(s string) ([]byte, error) {
	type entry struct {
		tag  uint16
		perm uint16
		id   uint32
	}
	var es []entry
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		f, _, _ = strings.Cut(f, "#")
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p := strings.Split(f, ":")
		if len(p) < 3 {
			return nil, fmt.Errorf("ACL entry %q: want type:qualifier:perms", f)
		}
		var e entry
		switch p[0] {
		case "user", "u":
			e.tag = 0x01
		case "group", "g":
			e.tag = 0x04
		case "mask", "m":
			e.tag = 0x10
		case "other", "o":
			e.tag = 0x20
		default:
			return nil, fmt.Errorf("ACL entry %q: unknown type", f)
		}
		e.id = 0xffffffff // ACL_UNDEFINED_ID
		if p[1] != "" {
			if e.tag != 0x01 && e.tag != 0x04 {
				return nil, fmt.Errorf("ACL entry %q: %s takes no qualifier", f, p[0])
			}
			id, err := strconv.ParseUint(p[1], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("ACL entry %q: want a numeric id", f)
			}
			e.tag <<= 1 // named user / group
			e.id = uint32(id)
		}
		for _, c := range p[2] {
			switch c {
			case 'r':
				e.perm |= 4
			case 'w':
				e.perm |= 2
			case 'x':
				e.perm |= 1
			case '-':
			default:
				return nil, fmt.Errorf("ACL entry %q: bad permission %q", f, c)
			}
		}
		es = append(es, e)
	}
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].tag != es[j].tag {
			return es[i].tag < es[j].tag
		}
		return es[i].id < es[j].id
	})
	b := make([]byte, 4, 4+8*len(es))
	binary.LittleEndian.PutUint32(b, aclVersion)
	for _, e := range es {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b, nil
}

// tarXattr reports whether vzdump's tar keeps xattr name: its
// --xattrs-include=user.* and security.capability (ACLs travel as
// SCHILY.acl.* records instead).
func tarXattr(name string) bool {
	return strings.HasPrefix(name, "user.") || name == "security.capability"
}

// beneath opens directories beneath a root (see openBeneath), keeping
// the last one open: walks and archives visit a directory's entries one
// after another.
type beneath struct {
	root    string
	lastDir string
	lastFD  int
}

func newBeneath(root string) *beneath { return &beneath{root: root, lastFD: -1} }

// parent returns the open directory holding rel and rel's last
// component. The directory belongs to b: do not close it.
func (b *beneath) parent(rel string, create bool) (int, string, error) {
	dir, name := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	if rel == "" || rel == "." {
		dir, name = "\x00root", "."
	}
	if b.lastFD >= 0 && b.lastDir == dir {
		return b.lastFD, name, nil
	}
	fd, n, err := openBeneath(b.root, rel, create)
	if err != nil {
		return -1, "", err
	}
	b.close()
	b.lastDir, b.lastFD = dir, fd
	return fd, n, nil
}

func (b *beneath) close() {
	if b.lastFD >= 0 {
		unix.Close(b.lastFD)
		b.lastFD = -1
	}
}

// inode names a file for hard link detection.
type inode struct{ dev, ino uint64 }

// scratchDir is the emulator's own directory at the top of a rootfs
// that has no system of its own: the overlay work directories of the
// guest runtime (internal/sim/guest) live there while the CT runs. It
// is not the CT's data, so copies and archives leave it out.
const scratchDir = ".corral-ovl"

// walkVolume walks the volume tree at root as copyTree and the vzdump
// tar writer read it: the emulator's scratch directory is skipped, and
// an entry that a running guest removes between the directory read and
// its own read is left out, as it would be from a snapshot taken a
// moment later (a real LVM snapshot is atomic; this copy is not). fn's
// errors end the walk unless the path they name is gone from root.
func walkVolume(root string, fn func(p, rel string) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			var rel string
			if rel, err = filepath.Rel(root, p); err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if rel == scratchDir && d.IsDir() {
				return fs.SkipDir
			}
			err = fn(p, rel)
		}
		if err != nil && p != root && vanished(p, err) {
			return nil
		}
		return err
	})
}

// vanished reports whether err is a source path's "no such file" and p
// is indeed gone now (not a destination-side failure that happens to
// be ENOENT).
func vanished(p string, err error) bool {
	if !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, statErr := os.Lstat(p)
	return errors.Is(statErr, fs.ErrNotExist)
}
