package guest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// sandbox says how helper processes start on this machine: in a plain
// mount namespace when the emulator runs as root, else in a user
// namespace that maps the caller to root (unshare -Urm).
type sandbox struct {
	userns bool
	err    error // why guest exec is unavailable; nil when it works
}

// attr starts the helper in its own process group, or, on a pty, as the
// leader of a new session whose controlling terminal is its stdin.
func (s sandbox) attr(tty bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setpgid: !tty, Setsid: tty, Setctty: tty, Ctty: 0}
	if s.userns {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
	return a
}

// startHelper starts the helper (view.go) for spec; tty says stdin is a
// terminal to make the helper's controlling terminal. The caller waits.
func (s sandbox) startHelper(spec viewSpec, stdin io.Reader, stdout, stderr io.Writer, tty bool) (*exec.Cmd, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"corral-sim-guest"}
	cmd.Env = []string{helperEnv + "=1"}
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = s.attr(tty)
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	r.Close()
	// A write error means the helper died before reading its spec; the
	// caller's Wait reports why.
	_, _ = w.Write(data)
	w.Close()
	return cmd, nil
}

// probeSandbox finds out whether guest exec works here: it starts a
// helper that makes its mounts private and mounts a tmpfs on a scratch
// directory under dir.
func probeSandbox(dir string) sandbox {
	s := sandbox{userns: os.Geteuid() != 0}
	scratch, err := os.MkdirTemp(dir, ".probe")
	if err != nil {
		s.err = fmt.Errorf("scratch directory: %w", err)
		return s
	}
	defer os.RemoveAll(scratch)
	var out bytes.Buffer
	cmd, err := s.startHelper(viewSpec{Root: scratch, Probe: true}, nil, &out, &out, false)
	if err != nil {
		s.err = fmt.Errorf("cannot create a %s: %w", s.kind(), err)
		return s
	}
	if err := cmd.Wait(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			msg = err.Error()
		}
		s.err = fmt.Errorf("mounts refused in a %s: %s", s.kind(), msg)
	}
	return s
}

func (s sandbox) kind() string {
	if s.userns {
		return "user and mount namespace (unprivileged user namespaces may be disabled: see sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, or run as root)"
	}
	return "mount namespace"
}
