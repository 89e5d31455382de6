// Package tarcp is the file format of `corral cp`: a tar stream, written
// from a local file or directory tree for the guest's tar to unpack, and
// read from the guest's tar into a local directory without ever writing
// outside it.
//
// Tar over an SSH exec needs nothing in the container but tar (every
// template has it; an sftp server is a separate package, and PVE's
// containers have no agent), keeps modes, directories and symlinks in
// one stream, and works the same against the emulator.
//
// What comes back from a guest is untrusted (the container may be
// compromised): Unpack refuses absolute names, names with "..", names
// outside the one top-level entry asked for, symlinks that are absolute
// or point outside the destination, hard links, and device files; it
// writes through an os.Root, so no symlink on disk can lead it out.
package tarcp

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Pack writes src (a file, a directory tree, or a symlink, which is not
// followed) to w as a tar stream whose entries sit under name (the name
// the guest gives the copy; for a directory "name/…"). Modes and mtimes
// are kept; owners are not (the guest decides, see corral cp --owner).
// Sockets, FIFOs and devices are skipped and reported through skipped.
func Pack(w io.Writer, src, name string, skipped func(path string)) error {
	tw := tar.NewWriter(w)
	root := filepath.Clean(src)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		entry := path.Join(name, filepath.ToSlash(rel))
		link := ""
		switch {
		case fi.Mode().IsRegular(), fi.IsDir():
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			if skipped != nil {
				skipped(p)
			}
			return nil
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = entry
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// UnsafeError is an entry from the guest that Unpack refused.
type UnsafeError struct {
	Name   string
	Reason string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("refused %q from the container: %s; nothing is written outside the destination, and the copy stopped here", e.Name, e.Reason)
}

// Unpack reads a tar stream whose entries are all under top (top itself,
// or top/…) and writes them under dir as name (top's entries renamed:
// the copy's name locally). dir must exist; name is one path element.
// Modes (permission bits) and mtimes are kept. It stops at the first
// unsafe entry with an *UnsafeError.
func Unpack(r io.Reader, top, dir, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("tarcp: bad local name %q", name)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	type dirTime struct {
		name string
		h    *tar.Header
	}
	var dirs []dirTime // directory modes and times are set last: files inside change them
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the archive from the container: %w", err)
		}
		rel, err := localName(h.Name, top, name)
		if err != nil {
			return err
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(rel, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{rel, h})
		case tar.TypeReg:
			if err := unpackFile(root, rel, tr, mode, h); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := unpackLink(root, rel, h); err != nil {
				return err
			}
		case tar.TypeXGlobalHeader:
		default:
			return &UnsafeError{Name: h.Name, Reason: fmt.Sprintf("entry type %q (only files, directories and relative symlinks are copied)", string(h.Typeflag))}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := root.Chmod(d.name, fs.FileMode(d.h.Mode).Perm()); err != nil {
			return err
		}
		_ = root.Chtimes(d.name, d.h.ModTime, d.h.ModTime)
	}
	return nil
}

// unpackFile writes the regular file rel from r with mode and h's
// mtime; a symlink or directory already at rel is replaced, never
// followed.
func unpackFile(root *os.Root, rel string, r io.Reader, mode fs.FileMode, h *tar.Header) error {
	if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return err
	}
	if fi, err := root.Lstat(rel); err == nil && !fi.Mode().IsRegular() {
		if err := root.RemoveAll(rel); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if err := root.Chmod(rel, mode); err != nil {
		return err
	}
	_ = root.Chtimes(rel, h.ModTime, h.ModTime)
	return nil
}

// unpackLink makes the symlink rel, after checkLink found its target
// inside the copy; whatever is at rel is replaced.
func unpackLink(root *os.Root, rel string, h *tar.Header) error {
	if err := checkLink(h.Name, rel, h.Linkname); err != nil {
		return err
	}
	if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return err
	}
	if _, err := root.Lstat(rel); err == nil {
		if err := root.RemoveAll(rel); err != nil {
			return err
		}
	}
	return root.Symlink(h.Linkname, rel)
}

// localName maps an archive name under top to its name under the
// destination, refusing every name that could land elsewhere.
func localName(entry, top, name string) (string, error) {
	n := strings.TrimSuffix(entry, "/")
	if n == "" || strings.HasPrefix(n, "/") {
		return "", &UnsafeError{Name: entry, Reason: "an absolute name"}
	}
	for _, el := range strings.Split(n, "/") {
		if el == ".." {
			return "", &UnsafeError{Name: entry, Reason: `a name with ".."`}
		}
	}
	n = path.Clean(n)
	if n != top && !strings.HasPrefix(n, top+"/") {
		return "", &UnsafeError{Name: entry, Reason: fmt.Sprintf("outside %q, the one entry asked for", top)}
	}
	return name + strings.TrimPrefix(n, top), nil
}

// checkLink refuses a symlink whose target is absolute or leaves the
// copy (its resolution from the link's own directory climbs above the
// top of the copy).
func checkLink(entry, rel, target string) error {
	if target == "" || path.IsAbs(target) {
		return &UnsafeError{Name: entry, Reason: fmt.Sprintf("a symlink to the absolute path %q", target)}
	}
	resolved := path.Join(path.Dir(rel), target)
	top := strings.SplitN(rel, "/", 2)[0]
	if resolved != top && !strings.HasPrefix(resolved, top+"/") {
		return &UnsafeError{Name: entry, Reason: fmt.Sprintf("a symlink to %q, outside the copy", target)}
	}
	return nil
}
