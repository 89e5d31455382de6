package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The filesystem view of a CT is built by a helper process: the running
// binary re-executed (/proc/self/exe) in a new mount namespace (and a
// new user namespace when not root) with helperEnv set. The helper's
// init function below takes over before main or TestMain runs, so this
// works for the corral binary and for every test binary that links the
// package. It reads a viewSpec from fd 3, mounts the view under the CT's
// rootfs directory, chroots into it and execs the user's shell.
//
// The view, for rootfs directory R:
//   - bin, sbin, lib*, usr, etc, var, opt: an overlay with the host's
//     directory as read-only lower layer and R/<dir> as upper layer, so
//     host programs run and every write lands in the CT's rootfs (a host
//     symlink such as bin -> usr/bin is copied as a symlink). When an
//     overlay cannot be mounted (kernel, upper filesystem, or R inside
//     that host directory), var and opt are the CT's own directories and
//     the others a read-only bind of the host's.
//   - root, home, srv, mnt, media, tmp and everything else: R's own.
//   - dev, proc, sys: the host's (sys read-only); run: a fresh tmpfs.
//   - every mount point (mpN): its volume's directory, bind-mounted.
//
// Without root, the user namespace maps only the caller's uid to root:
// the guest's root may write its own files (/root, /home, volumes) but
// not into directories of the host's lower layers, which belong to
// unmapped users (so useradd cannot lock /etc/passwd).

// helperEnv marks the helper process; its value is the protocol version.
const helperEnv = "CORRAL_SIM_GUEST_HELPER"

// viewSpec is what the helper reads from fd 3.
type viewSpec struct {
	Root    string      `json:"root"`            // the CT's rootfs directory
	Work    string      `json:"work"`            // overlay work directory for this session (inside Root)
	Mounts  []viewMount `json:"mounts"`          // mount points, shallow first
	Command string      `json:"command"`         // run with the user's shell -c
	Shell   bool        `json:"shell,omitempty"` // run the user's shell as a login shell instead (an SSH shell request)
	Env     []string    `json:"env"`
	Probe   bool        `json:"probe,omitempty"` // only check that namespaces and mounts work
	// Launch, when set, makes the helper start an unprivileged CT's
	// lxc-start instead (userns.go).
	Launch *launchSpec `json:"launch,omitempty"`
}

type viewMount struct {
	Path     string `json:"path"` // inside the CT
	HostDir  string `json:"host_dir"`
	ReadOnly bool   `json:"ro,omitempty"`
}

// overlayDirs are the host directories a CT sees through an overlay.
var overlayDirs = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "var", "opt"}

// privateOnFailure are the overlay directories that become the CT's own
// when their overlay cannot be mounted (instead of the host's, read-only).
var privateOnFailure = map[string]bool{"var": true, "opt": true}

func init() {
	if os.Getenv(helperEnv) == "" {
		return
	}
	os.Exit(helperMain())
}

// helperMain runs in the helper process. It returns only on failure (or
// after a probe); on success the process becomes the user's shell.
func helperMain() int {
	os.Unsetenv(helperEnv)
	f := os.NewFile(3, "spec")
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "guest exec: read spec: %v\n", err)
		return 255
	}
	var spec viewSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		fmt.Fprintf(os.Stderr, "guest exec: decode spec: %v\n", err)
		return 255
	}
	if spec.Launch != nil {
		return launchMain(*spec.Launch)
	}
	if spec.Probe {
		if err := probeMounts(spec.Root); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
			return 1
		}
		return 0
	}
	if err := buildView(spec); err != nil {
		fmt.Fprintf(os.Stderr, "guest exec: set up the container's filesystem: %v\n", err)
		return 255
	}
	shell := loginShell()
	argv := []string{filepath.Base(shell), "-c", spec.Command}
	if spec.Shell {
		argv = []string{"-" + filepath.Base(shell)} // a login shell, as sshd starts it
	}
	if err := syscall.Exec(shell, argv, spec.Env); err != nil {
		fmt.Fprintf(os.Stderr, "guest exec: %s: %v\n", shell, err)
		return 127
	}
	return 0 // not reached
}

// probeMounts checks, inside the new namespaces, that mounts are allowed:
// a private root propagation and a tmpfs on dir.
func probeMounts(dir string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	return nil
}

// buildView mounts the CT's filesystem view at spec.Root and chroots into it.
func buildView(spec viewSpec) error {
	root := spec.Root
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	for _, d := range overlayDirs {
		if err := viewOverlay(root, spec.Work, d); err != nil {
			return err
		}
	}
	for _, d := range []string{"root", "home", "srv", "mnt", "media"} {
		if err := mkdirIfMissing(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := mkdirIfMissing(filepath.Join(root, "tmp"), 0o777|os.ModeSticky); err != nil {
		return err
	}
	specials := []struct {
		dir   string
		flags uintptr
		ro    bool
	}{
		{"dev", unix.MS_BIND | unix.MS_REC, false},
		{"proc", unix.MS_BIND | unix.MS_REC, false},
		{"sys", unix.MS_BIND | unix.MS_REC, true},
	}
	for _, s := range specials {
		target := filepath.Join(root, s.dir)
		if err := mkdirIfMissing(target, 0o555); err != nil {
			return err
		}
		if err := unix.Mount("/"+s.dir, target, "", s.flags, ""); err != nil {
			return fmt.Errorf("bind /%s: %w", s.dir, err)
		}
		if s.ro {
			// Best effort: a locked mount may refuse the remount.
			_ = unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
		}
	}
	run := filepath.Join(root, "run")
	if err := mkdirIfMissing(run, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", run, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
		return fmt.Errorf("mount /run: %w", err)
	}
	if err := bindMountPoints(root, spec.Mounts); err != nil {
		return err
	}
	// Hide the overlay work directories from the guest.
	if spec.Work != "" {
		_ = unix.Mount("tmpfs", filepath.Dir(spec.Work), "tmpfs", unix.MS_RDONLY, "size=4k,mode=700")
	}
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	home := "/root"
	if err := os.Chdir(home); err != nil {
		home = "/"
		if err := os.Chdir(home); err != nil {
			return fmt.Errorf("chdir: %w", err)
		}
	}
	return nil
}

// bindMountPoints binds the CT's mount points into root, outermost
// first, the read-only ones remounted so.
func bindMountPoints(root string, mps []viewMount) error {
	mounts := append([]viewMount(nil), mps...)
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(mounts[i].Path, "/") < strings.Count(mounts[j].Path, "/")
	})
	for _, m := range mounts {
		target := filepath.Join(root, filepath.Clean("/"+m.Path))
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Path, err)
		}
		if err := unix.Mount(m.HostDir, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Path, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("mount point %s read-only: %w", m.Path, err)
			}
		}
	}
	return nil
}

// viewOverlay sets up host directory /d at root/d (see the package doc).
func viewOverlay(root, work, d string) error {
	host := "/" + d
	fi, err := os.Lstat(host)
	if err != nil {
		return nil // the host has no such directory
	}
	target := filepath.Join(root, d)
	if ti, err := os.Lstat(target); err == nil && ti.Mode()&os.ModeSymlink != 0 {
		return nil // the CT's own symlink wins
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		link, err := os.Readlink(host)
		if err != nil {
			return fmt.Errorf("read /%s: %w", d, err)
		}
		if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(link, target); err != nil {
				return fmt.Errorf("link /%s: %w", d, err)
			}
		}
		return nil
	}
	if !fi.IsDir() {
		return nil
	}
	if err := mkdirIfMissing(target, fi.Mode().Perm()); err != nil {
		return err
	}
	if !strings.HasPrefix(root+"/", host+"/") && work != "" {
		w := filepath.Join(work, d)
		if err := os.MkdirAll(w, 0o700); err == nil {
			opts := "lowerdir=" + host + ",upperdir=" + target + ",workdir=" + w
			if unix.Mount("overlay", target, "overlay", 0, opts) == nil ||
				unix.Mount("overlay", target, "overlay", 0, opts+",userxattr") == nil {
				// The kernel makes work/ with mode 0; let the emulator
				// remove it without root when the session ends.
				_ = os.Chmod(filepath.Join(w, "work"), 0o700)
				return nil
			}
		}
	}
	if privateOnFailure[d] {
		return nil
	}
	if err := unix.Mount(host, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind /%s: %w", d, err)
	}
	_ = unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	return nil
}

func mkdirIfMissing(dir string, perm os.FileMode) error {
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	return os.Chmod(dir, perm)
}

// loginShell is root's shell from the view's /etc/passwd when it exists
// there, else /bin/sh.
func loginShell() string {
	data, err := os.ReadFile("/etc/passwd")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Split(line, ":")
			if len(f) == 7 && f[0] == "root" && f[6] != "" {
				if st, err := os.Stat(f[6]); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
					return f[6]
				}
			}
		}
	}
	return "/bin/sh"
}
