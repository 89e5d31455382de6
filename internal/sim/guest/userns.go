package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/sim/model"
)

// An unprivileged CT's lxc-start runs in a mount namespace of its own,
// made by the guest helper (view.go's process, in launch mode), in which
//
//   - the data directory is bound at /run/corral-sim/<emulator>/data:
//     container root (host uid 100000) must reach its rootfs from /, and
//     the state directory's parents may be closed to it (a 0700 home or
//     test directory); LXC checks it;
//   - for a CT of the tiny template, each host directory it sees through
//     an overlay (/usr, /etc, …) is mounted idmapped at
//     /run/corral-sim/<emulator>/lower/<dir>, host root shown as host
//     100000: the CT's root owns the host's directories as a real
//     template's root owns its own, so it can write into them (overlayfs
//     copies up into the CT's rootfs) where a plain host /usr would be
//     nobody's and closed to it. Where the kernel or file system cannot
//     idmap a directory it is bound as it is (nobody's, read-only in
//     effect).
//
// The host's mounts never change: the bindings live and die with that
// lxc-start. The directories under /run/corral-sim/<emulator> go when
// the emulator stops or, after a kill, at its next start.

// launchSpec is what the helper needs to start lxc-start.
type launchSpec struct {
	Data   string            `json:"data"`   // the emulator's data directory
	View   string            `json:"view"`   // where it is bound
	Lowers map[string]string `json:"lowers"` // host directory → where it is mounted idmapped
	Userns string            `json:"userns"` // a user namespace with PVE's map (/proc/PID/ns/user)
	Args   []string          `json:"args"`   // lxc-start's
}

// launchMain is the helper's launch mode; it returns only on failure.
func launchMain(l launchSpec) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "lxc-start launcher: "+format+"\n", args...)
		return 1
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("make mounts private: %v", err)
	}
	if err := unix.Mount(l.Data, l.View, "", unix.MS_BIND, ""); err != nil {
		return fail("bind %s: %v", l.Data, err)
	}
	for src, dst := range l.Lowers {
		if err := idmapBind(src, dst, l.Userns); err != nil {
			if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fail("bind %s: %v", src, err)
			}
		}
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	os.Setenv("PATH", env[0][len("PATH="):])
	bin, err := exec.LookPath("lxc-start")
	if err != nil {
		return fail("%v", err)
	}
	return fail("exec: %v", syscall.Exec(bin, append([]string{"lxc-start"}, l.Args...), env))
}

// idmapBind mounts a clone of src at dst with the id map of the user
// namespace at userns (host 0 shows as 100000).
func idmapBind(src, dst, userns string) error {
	nsfd, err := unix.Open(userns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(nsfd)
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(nsfd)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return err
	}
	return unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// idmapHolder keeps a user namespace with PVE's map alive for the
// helper's idmapped mounts: a sleeping child (killed with the emulator).
type idmapHolder struct{ cmd *exec.Cmd }

func newIdmapHolder() (*idmapHolder, error) {
	cmd := exec.Command("sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: model.CTRootID, Size: 65536}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: model.CTRootID, Size: 65536}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("a user namespace for idmapped mounts: %w", err)
	}
	return &idmapHolder{cmd: cmd}, nil
}

func (h *idmapHolder) path() string { return "/proc/" + strconv.Itoa(h.cmd.Process.Pid) + "/ns/user" }

func (h *idmapHolder) close() {
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// startInView is lxc-start with args, started by the helper in its own
// mount namespace (see above); lowers are the overlay directories of a
// tiny-template CT.
func (r *lxcRuntime) startInView(args []string, lowers map[string]string) (*exec.Cmd, error) {
	userns := ""
	if r.idmap != nil {
		userns = r.idmap.path()
	}
	data, err := json.Marshal(viewSpec{Launch: &launchSpec{Data: r.data, View: r.view, Lowers: lowers, Userns: userns, Args: args}})
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"corral-sim-lxc-start"}
	cmd.Env = []string{helperEnv + "=1"}
	cmd.ExtraFiles = []*os.File{pr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The spec fits in the pipe's buffer; startOnce closes pr once the
	// helper runs.
	_, err = pw.Write(data)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	return cmd, nil
}

// lowerDir is where host directory d is mounted for the CT's overlays.
func (r *lxcRuntime) lowerDir(d string) string {
	return filepath.Join(filepath.Dir(r.view), "lower", d)
}
