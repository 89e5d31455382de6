package model

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// extractBackup unpacks a backup archive over the mounts as
// restore_tar_archive's `tar xpf - --numeric-owner --acls --xattrs
// --xattrs-include=user.* --xattrs-include=security.capability
// --anchored --exclude ./dev/*` does over mount_all's tree: each entry
// goes to the volume mounted at the longest prefix of its path, with its
// numeric owner, full mode, mtime, xattrs and ACLs; hard links, FIFOs and
// device nodes are made as such (a device node the host refuses is
// skipped, and skipped has tar's warning for it, as tar warns and goes
// on); ./dev/* of the rootfs is left out. A mount with an id map (an
// unprivileged CT) gets shifted owners, as tar in the CT's user
// namespace writes them (shiftEntry).
//
// Nothing leaves its volume: names are cleaned of "..", no directory on
// the way to an entry may be a symlink (openBeneath), a hard link must
// point into the same volume, and metadata calls never follow the
// entry itself. It returns the tar stream's length.
func extractBackup(archive string, mounts []restoreMount) (total int64, skipped []string, err error) {
	sorted := append([]restoreMount(nil), mounts...)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i].path) > len(sorted[j].path) })
	tr, closeFn, err := openBackupTar(archive)
	if err != nil {
		return 0, nil, err
	}
	defer closeFn()
	x := &extractor{tr: tr, mounts: sorted, trees: map[string]*beneath{}, dirAt: map[[2]string]int{}}
	defer x.close()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.total, x.skipped, err
		}
		x.total += 512
		if err := x.entry(h); err != nil {
			return x.total, x.skipped, err
		}
	}
	if err := x.dirMeta(); err != nil {
		return x.total, x.skipped, err
	}
	return x.total + 1024, x.skipped, nil
}

// extractor is one extractBackup: the archive, the mounts (longest path
// first), the volumes' trees opened so far, the directories whose
// metadata waits for the end, the stream's length so far and the
// entries skipped with tar's message.
type extractor struct {
	tr      *tar.Reader
	mounts  []restoreMount
	trees   map[string]*beneath
	dirs    []pendingDir
	dirAt   map[[2]string]int // a directory named twice takes its last entry's metadata
	total   int64
	skipped []string
}

// pendingDir is a directory's metadata, set once everything in it is.
type pendingDir struct {
	dir, rel string
	m        fileMeta
	xattrs   map[string][]byte
}

func (x *extractor) close() {
	for _, b := range x.trees {
		b.close()
	}
}

// locate maps an archive name to its volume and the path inside it.
func (x *extractor) locate(name string) (restoreMount, string, bool) {
	abs := path.Clean("/" + name)
	for _, m := range x.mounts {
		if m.path == "/" || abs == m.path || strings.HasPrefix(abs, m.path+"/") {
			return m, strings.TrimPrefix(strings.TrimPrefix(abs, m.path), "/"), true
		}
	}
	return restoreMount{}, "", false
}

// entry extracts one archive entry into its volume.
func (x *extractor) entry(h *tar.Header) error {
	abs := path.Clean("/" + h.Name)
	if strings.HasPrefix(abs, "/dev/") {
		return nil // --exclude ./dev/*
	}
	target, rel, ok := x.locate(h.Name)
	if !ok {
		return nil
	}
	b := x.trees[target.dir]
	if b == nil {
		b = newBeneath(target.dir)
		x.trees[target.dir] = b
	}
	m, xattrs, err := tarMeta(h)
	if err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	if target.ids.shifted() {
		// tar runs in the CT's user namespace (idmap.go).
		var refused string
		m, xattrs, refused = shiftEntry(h, m, xattrs, target.ids)
		if refused != "" {
			x.skipped = append(x.skipped, refused)
			if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
				return nil
			}
		}
	}
	dirfd, name, err := b.parent(rel, true)
	if err != nil {
		return err
	}
	if h.Typeflag == tar.TypeDir {
		return x.dir(dirfd, name, h, target.dir, rel, m, xattrs)
	}
	meta, err := x.create(dirfd, name, h, target.dir, m)
	if err != nil || !meta {
		return err
	}
	return applyMeta(dirfd, name, m, xattrs)
}

// dir makes a directory entry; its metadata waits for dirMeta.
func (x *extractor) dir(dirfd int, name string, h *tar.Header, dir, rel string, m fileMeta, xattrs map[string][]byte) error {
	if name != "." {
		if err := clearAt(dirfd, name, true); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if err := unix.Mkdirat(dirfd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mkdir %s: %w", h.Name, err)
		}
	}
	if i, ok := x.dirAt[[2]string{dir, rel}]; ok {
		x.dirs[i].m, x.dirs[i].xattrs = m, xattrs
		return nil
	}
	x.dirAt[[2]string{dir, rel}] = len(x.dirs)
	x.dirs = append(x.dirs, pendingDir{dir, rel, m, xattrs})
	return nil
}

// create makes a non-directory entry in volume dir; meta says whether
// the entry takes its own metadata (a hard link has its target's, a
// skipped one none).
func (x *extractor) create(dirfd int, name string, h *tar.Header, dir string, m fileMeta) (meta bool, err error) {
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA:
		if err := clearAt(dirfd, name, false); err != nil {
			return false, fmt.Errorf("%s: %w", h.Name, err)
		}
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return false, fmt.Errorf("create %s: %w", h.Name, err)
		}
		f := os.NewFile(uintptr(fd), h.Name)
		n, err := io.Copy(f, x.tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return false, fmt.Errorf("write %s: %w", h.Name, err)
		}
		x.total += (n + 511) / 512 * 512
	case tar.TypeLink:
		lt, lrel, ok := x.locate(h.Linkname)
		if !ok || lt.dir != dir {
			return false, fmt.Errorf("%s: hard link to %s, outside its volume", h.Name, h.Linkname)
		}
		if err := clearAt(dirfd, name, false); err != nil {
			return false, fmt.Errorf("%s: %w", h.Name, err)
		}
		if err := linkBeneath(dir, lrel, dirfd, name); err != nil {
			return false, fmt.Errorf("%s: %w", h.Name, err)
		}
		return false, nil // a link has its target's metadata
	case tar.TypeSymlink:
		if err := clearAt(dirfd, name, false); err != nil {
			return false, fmt.Errorf("%s: %w", h.Name, err)
		}
		if err := unix.Symlinkat(h.Linkname, dirfd, name); err != nil {
			return false, fmt.Errorf("symlink %s: %w", h.Name, err)
		}
	case tar.TypeFifo, tar.TypeChar, tar.TypeBlock:
		if err := clearAt(dirfd, name, false); err != nil {
			return false, fmt.Errorf("%s: %w", h.Name, err)
		}
		skip, err := mknodAt(dirfd, name, m)
		if err != nil {
			return false, fmt.Errorf("%s: %w", h.Name, err)
		}
		if skip {
			x.skipped = append(x.skipped, "tar: "+h.Name+": Cannot mknod: Operation not permitted")
			return false, nil
		}
	default:
		return false, nil // sockets, GNU extensions: tar -x warns and skips them
	}
	return true, nil
}

// dirMeta sets the directories' metadata last, deepest first (see
// copyTree).
func (x *extractor) dirMeta() error {
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		dirfd, name, err := x.trees[d.dir].parent(d.rel, false)
		if err != nil {
			return err
		}
		if err := applyMeta(dirfd, name, d.m, d.xattrs); err != nil {
			return err
		}
	}
	return nil
}

// tarMeta is a tar header's metadata in fileMeta form, and the xattrs to
// set: the kept SCHILY.xattr records and the SCHILY.acl ones as ACL
// xattrs. Owners are the archive's numeric ids; 0 means the emulator's
// own user when it runs without root (see ctOwner).
func tarMeta(h *tar.Header) (fileMeta, map[string][]byte, error) {
	kinds := map[byte]uint32{
		tar.TypeDir: unix.S_IFDIR, tar.TypeReg: unix.S_IFREG, tar.TypeRegA: unix.S_IFREG, tar.TypeLink: unix.S_IFREG,
		tar.TypeSymlink: unix.S_IFLNK, tar.TypeFifo: unix.S_IFIFO, tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK,
	}
	uid, gid := h.Uid, h.Gid
	if !isRoot() {
		if uid == 0 {
			uid = os.Geteuid()
		}
		if gid == 0 {
			gid = os.Getegid()
		}
	}
	mt := unix.NsecToTimespec(h.ModTime.UnixNano())
	at := mt
	if !h.AccessTime.IsZero() {
		at = unix.NsecToTimespec(h.AccessTime.UnixNano())
	}
	m := fileMeta{
		mode: kinds[h.Typeflag] | uint32(h.Mode)&0o7777, uid: uid, gid: gid,
		rdev: unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor)), atime: at, mtime: mt,
	}
	var xattrs map[string][]byte
	set := func(k string, v []byte) {
		if xattrs == nil {
			xattrs = map[string][]byte{}
		}
		xattrs[k] = v
	}
	for k, v := range h.PAXRecords {
		switch {
		case strings.HasPrefix(k, "SCHILY.xattr."):
			if name := strings.TrimPrefix(k, "SCHILY.xattr."); tarXattr(name) {
				set(name, []byte(v))
			}
		case k == "SCHILY.acl.access" || k == "SCHILY.acl.default":
			b, err := aclFromText(v)
			if err != nil {
				return fileMeta{}, nil, err
			}
			if k == "SCHILY.acl.access" {
				set(aclXattrAccess, b)
			} else {
				set(aclXattrDefault, b)
			}
		}
	}
	return m, xattrs, nil
}
