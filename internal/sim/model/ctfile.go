package model

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A CT's rootfs is a directory on the host that the CT's users control:
// any name in it may be a symlink they made (etc -> /etc). The emulator
// runs as root, so the files it writes there itself (network, DNS, apt
// and ifupdown settings, at create and before each start, while the CT
// does not run) go through ReadCTFile and WriteCTFile, which never follow
// a link: not among rel's directories, not at rel itself.

// maxCTFile bounds what ReadCTFile reads (a CT could make a settings
// file huge).
const maxCTFile = 1 << 20

// ctDirs checks rel's directories under root from the top, never
// following a link. With create, a missing one is made (dirMode), owned
// as its parent; without, missing reports false.
func ctDirs(root, rel string, create bool, dirMode os.FileMode) (bool, error) {
	dir := root
	for _, part := range strings.Split(filepath.Dir(filepath.Clean(rel)), "/") {
		if part == "." || part == "" {
			continue
		}
		parent := dir
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		if errors.Is(err, os.ErrNotExist) {
			if !create {
				return false, nil
			}
			if err := os.Mkdir(dir, dirMode); err != nil {
				return false, err
			}
			chownAs(dir, parent)
			continue
		}
		if err != nil {
			return false, err
		}
		if !fi.IsDir() {
			return false, fmt.Errorf("%s in the CT is not a directory (a link?): not touching %s", strings.TrimPrefix(dir, root), rel)
		}
	}
	return true, nil
}

// ReadCTFile reads rel inside the CT's root, "" when it is missing or
// not a regular file (a link counts as missing: it is replaced when
// written, and never followed out of the CT). At most 1 MiB is read.
func ReadCTFile(root, rel string) (string, error) {
	// Directory by directory from root's descriptor, never through a
	// link (fsmeta's openBeneath): a running CT cannot swap a checked
	// directory for a link before the open, as between a check by path
	// and an open by path.
	dirfd, name, err := openBeneath(root, rel, false)
	if err == nil {
		defer unix.Close(dirfd)
		var fd int
		if fd, err = unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			return readRegular(fd)
		}
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return "", nil // missing, or a link on the way
	}
	return "", &os.PathError{Op: "open", Path: filepath.Join(root, rel), Err: err}
}

// readRegular reads, at most 1 MiB, the file that fd (an O_PATH
// descriptor, closed here) names, "" unless it is a regular file. Only a
// regular file is ever opened for reading: a device node a backup
// brought (a watchdog, a tty) is never opened by the emulator, which
// runs as root.
func readRegular(fd int) (string, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", nil
	}
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCTFile))
	return string(data), err
}

// WriteCTFile writes text to rel inside the CT's root as a 0644 file,
// making missing directories, each owned as its parent directory (so an
// unprivileged CT's root, whose ids are shifted on disk, owns them). A
// symlink among rel's directories is an error; anything but a regular
// file at rel itself is replaced. The file is owned as its directory.
func WriteCTFile(root, rel, text string) error {
	return writeCTFile(root, rel, text, 0o644, 0o755)
}

// writeCTFile is WriteCTFile with the modes of a new file and of new
// directories (root's authorized_keys: 0600 in a 0700 .ssh).
func writeCTFile(root, rel, text string, mode, dirMode os.FileMode) error {
	if _, err := ctDirs(root, rel, true, dirMode); err != nil {
		return err
	}
	p := filepath.Join(root, rel)
	if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	chownAs(p, filepath.Dir(p))
	return nil
}

// chownAs gives p the owner of ref.
func chownAs(p, ref string) {
	if fi, err := os.Lstat(ref); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			os.Lchown(p, int(st.Uid), int(st.Gid))
		}
	}
}

// openInCT opens rel as the CT itself would, resolving every link on
// the way inside root as if root were "/" (openat2 RESOLVE_IN_ROOT, what
// a chroot gives): an absolute link (os-release -> /etc/shadow) or ".."
// out of the rootfs stays in the rootfs, so a link a backup brought can
// never reach the host's files. Debian's etc/os-release is such a link
// (-> ../usr/lib/os-release), which ReadCTFile would not follow.
func openInCT(root, rel string, flags int) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	if flags&unix.O_PATH == 0 { // O_PATH takes no other flags but these
		flags |= unix.O_NONBLOCK | unix.O_NOCTTY
	}
	fd, err := unix.Openat2(dir, strings.TrimPrefix(filepath.Clean("/"+rel), "/"), &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: filepath.Join(root, rel), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

// readCTFileInRoot reads the regular file rel as the CT sees it (links
// resolved inside root, see openInCT), "" when it is missing or not a
// regular file. At most 1 MiB is read.
func readCTFileInRoot(root, rel string) (string, error) {
	f, err := openInCT(root, rel, unix.O_PATH)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		// A kernel before 5.6, or a seccomp profile that refuses
		// openat2: follow no link at all.
		return ReadCTFile(root, rel)
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return "", err
	}
	return readRegular(fd)
}

// readCTDirInRoot lists the directory rel as the CT sees it (see
// openInCT); nil when there is none.
func readCTDirInRoot(root, rel string) []os.DirEntry {
	f, err := openInCT(root, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(-1)
	return ents
}

// RemoveCTFile removes rel inside the CT's root (whatever it is, a link
// included), never through a link on the way; a missing rel, or one
// behind a link, is no error.
func RemoveCTFile(root, rel string) error {
	dirfd, name, err := openBeneath(root, rel, false)
	if err == nil {
		defer unix.Close(dirfd)
		err = unix.Unlinkat(dirfd, name, 0)
	}
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	return &os.PathError{Op: "remove", Path: filepath.Join(root, rel), Err: err}
}

// CTDirExists reports whether rel is a directory inside the CT's root
// reached through no link.
func CTDirExists(root, rel string) bool {
	dirfd, _, err := openBeneath(root, strings.TrimSuffix(rel, "/")+"/x", false)
	if err != nil {
		return false
	}
	unix.Close(dirfd)
	return true
}
