// Package fstree builds file trees holding every kind of metadata a
// container's file system keeps (owners, setuid/setgid/sticky modes,
// mtimes, symlinks, hard links, FIFOs, device nodes, xattrs, ACLs) and
// lists a tree's metadata as text, so that tests of the emulator's data
// plane (copies, snapshots, backups, restores) can compare a tree before
// and after with one diff.
package fstree

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/testenv"
)

// Entry is one row of a sample tree: the files it makes below a
// directory.
type Entry struct {
	Name  string // what the row shows, e.g. "setuid file"
	Build func(dir string) error
}

// MTime is the mtime Sample gives everything (with nanoseconds, which a
// copy must keep).
var MTime = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

// acl is a POSIX ACL xattr value: version 2, then (tag, perm, id)
// entries in the kernel's order.
func acl(entries ...[3]uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

const undef = 0xffffffff

// file writes a regular file with owner and mode (chmod after chown, so
// setuid survives; explicit, so the umask does not apply).
func file(p, body string, uid, gid int, mode uint32) error {
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		return err
	}
	return own(p, uid, gid, mode)
}

func own(p string, uid, gid int, mode uint32) error {
	if err := os.Lchown(p, uid, gid); err != nil {
		return err
	}
	return unix.Chmod(p, mode)
}

func dir(p string, uid, gid int, mode uint32) error {
	if err := os.Mkdir(p, 0o700); err != nil {
		return err
	}
	return own(p, uid, gid, mode)
}

// Sample is the table of entries the data plane must keep. Every entry
// lives in its own top-level name, so rows can be built and compared
// alone.
func Sample() []Entry {
	return []Entry{
		{"setgid directory owned by a user, with a file", func(d string) error {
			if err := dir(filepath.Join(d, "shared"), 1000, 1000, 0o2775); err != nil {
				return err
			}
			return file(filepath.Join(d, "shared", "notes.txt"), "hi\n", 1000, 1000, 0o664)
		}},
		{"sticky world-writable directory", func(d string) error { return dir(filepath.Join(d, "tmp"), 0, 0, 0o1777) }},
		{"setuid root program", func(d string) error { return file(filepath.Join(d, "suid"), "#!/bin/sh\n", 0, 0, 0o4755) }},
		{"setgid program of group 50", func(d string) error { return file(filepath.Join(d, "sgid"), "x", 0, 50, 0o2755) }},
		{"private file of uid 1000", func(d string) error { return file(filepath.Join(d, "private"), "secret", 1000, 1000, 0o600) }},
		{"file with mode 0", func(d string) error { return file(filepath.Join(d, "noperm"), "", 33, 33, 0) }},
		{"file of a high uid", func(d string) error { return file(filepath.Join(d, "high"), "h", 100000, 100033, 0o640) }},
		{"relative symlink owned by a user", func(d string) error {
			p := filepath.Join(d, "link")
			if err := os.Symlink("private", p); err != nil {
				return err
			}
			return os.Lchown(p, 1000, 1000)
		}},
		{"dangling absolute symlink", func(d string) error { return os.Symlink("/nonexistent/target", filepath.Join(d, "dangling")) }},
		{"hard links", func(d string) error {
			if err := file(filepath.Join(d, "hard-a"), "linked", 1000, 100, 0o644); err != nil {
				return err
			}
			return os.Link(filepath.Join(d, "hard-a"), filepath.Join(d, "hard-b"))
		}},
		{"FIFO", func(d string) error {
			p := filepath.Join(d, "fifo")
			if err := unix.Mkfifo(p, 0o600); err != nil {
				return err
			}
			return own(p, 1000, 5, 0o620)
		}},
		{"character device", func(d string) error {
			p := filepath.Join(d, "null")
			if err := unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
				return err
			}
			return own(p, 0, 0, 0o666)
		}},
		{"block device", func(d string) error {
			p := filepath.Join(d, "loop9")
			if err := unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 9))); err != nil {
				return err
			}
			return own(p, 0, 6, 0o660)
		}},
		{"user xattrs", func(d string) error {
			p := filepath.Join(d, "xattr")
			if err := file(p, "x", 0, 0, 0o644); err != nil {
				return err
			}
			if err := unix.Lsetxattr(p, "user.note", []byte("hello"), 0); err != nil {
				return err
			}
			return unix.Lsetxattr(p, "user.bin", []byte{0, 1, 2, 0xff}, 0)
		}},
		{"access ACL", func(d string) error {
			p := filepath.Join(d, "acl")
			if err := file(p, "a", 0, 0, 0o640); err != nil {
				return err
			}
			// user::rw- user:1000:rw- group::r-- mask::rw- other::---
			return unix.Lsetxattr(p, "system.posix_acl_access",
				acl([3]uint32{1, 6, undef}, [3]uint32{2, 6, 1000}, [3]uint32{4, 4, undef}, [3]uint32{0x10, 6, undef}, [3]uint32{0x20, 0, undef}), 0)
		}},
		{"default ACL on a directory", func(d string) error {
			p := filepath.Join(d, "acldir")
			if err := dir(p, 0, 0, 0o755); err != nil {
				return err
			}
			// user::rwx group::r-x group:100:rwx mask::rwx other::r-x
			return unix.Lsetxattr(p, "system.posix_acl_default",
				acl([3]uint32{1, 7, undef}, [3]uint32{4, 5, undef}, [3]uint32{8, 7, 100}, [3]uint32{0x10, 7, undef}, [3]uint32{0x20, 5, undef}), 0)
		}},
	}
}

// Build makes entries in dir, then gives everything in dir (dir
// included) MTime. It skips the test where the machine cannot make
// what the rows need: owners and device nodes need root, xattrs a file
// system that has them.
func Build(t testing.TB, d string, entries []Entry) {
	t.Helper()
	testenv.NeedRoot(t, "fstree: giving files other owners and making device nodes")
	probe := filepath.Join(d, ".xattr-probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(probe, "user.probe", []byte("1"), 0); err != nil {
		t.Skipf("fstree: %s has no user xattrs: %v", d, err)
	}
	os.Remove(probe)
	for _, e := range entries {
		if err := e.Build(d); err != nil {
			t.Fatalf("fstree: build %q: %v", e.Name, err)
		}
	}
	if err := Touch(d, MTime); err != nil {
		t.Fatal(err)
	}
}

// Touch sets the atime and mtime of everything in d, d included,
// children before their directory and symlinks themselves.
func Touch(d string, mt time.Time) error {
	var paths []string
	err := filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	})
	if err != nil {
		return err
	}
	ts := unix.NsecToTimespec(mt.UnixNano())
	for i := len(paths) - 1; i >= 0; i-- {
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

// List is the metadata of every file below d (not d itself), one line
// each, sorted by path: type, mode, owner, mtime, size of regular files,
// symlink target, device numbers, hard-link group and xattrs. Names in
// skip (top-level) are left out. Access times are not listed.
func List(d string, skip ...string) ([]string, error) {
	var out []string
	first := map[[2]uint64]string{}
	err := filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d, p)
		if rel == "." {
			return nil
		}
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if de.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		line, err := describe(p, rel, first)
		if err != nil {
			return err
		}
		out = append(out, line)
		return nil
	})
	return out, err
}

// Describe is one List line for path p (named rel), or for the
// directory itself with rel ".".
func Describe(p, rel string) (string, error) { return describe(p, rel, map[[2]uint64]string{}) }

func describe(p, rel string, first map[[2]uint64]string) (string, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return "", err
	}
	kind := map[uint32]string{unix.S_IFDIR: "dir", unix.S_IFREG: "file", unix.S_IFLNK: "symlink", unix.S_IFIFO: "fifo",
		unix.S_IFCHR: "char", unix.S_IFBLK: "block", unix.S_IFSOCK: "socket"}[st.Mode&unix.S_IFMT]
	line := fmt.Sprintf("%s %s %04o %d:%d mtime=%s", rel, kind, st.Mode&0o7777, st.Uid, st.Gid,
		time.Unix(st.Mtim.Unix()).UTC().Format(time.RFC3339Nano))
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		line += fmt.Sprintf(" size=%d", st.Size)
		if st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if f, ok := first[key]; ok {
				line += fmt.Sprintf(" nlink=%d same-as=%s", st.Nlink, f)
			} else {
				first[key] = rel
				line += fmt.Sprintf(" nlink=%d", st.Nlink)
			}
		}
	case unix.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		line += " -> " + target
	case unix.S_IFCHR, unix.S_IFBLK:
		line += fmt.Sprintf(" dev=%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	x, err := xattrs(p)
	if err != nil {
		return "", err
	}
	for _, k := range slices.Sorted(maps.Keys(x)) {
		line += " " + k + "=" + hex.EncodeToString(x[k])
	}
	return line, nil
}

func xattrs(p string) (map[string][]byte, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err == unix.ENOTSUP {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("llistxattr %s: %w", p, err)
	}
	out := map[string][]byte{}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		v := make([]byte, 64<<10)
		k, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			return nil, fmt.Errorf("lgetxattr %s %s: %w", p, name, err)
		}
		out[name] = v[:k]
	}
	return out, nil
}
