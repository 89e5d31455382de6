package guest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/corralhq/corral/internal/sim/model"
)

// maxExecOutput is qemu-ga's GUEST_EXEC_MAX_OUTPUT: what guest-exec
// captures of each of stdout and stderr; the rest is dropped and the
// stream reported truncated.
const maxExecOutput = 16 << 20

// vmExecEnv is the environment qemu-ga's commands inherit from the
// agent, a systemd service: systemd's default PATH and nothing else.
var vmExecEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"}

// runExec is the view guest's guest-exec (model.GuestRunner): the
// program, found in the guest's PATH as g_spawn finds it (else qemu-ga's
// refusal), runs with the view's root rights in the guest's filesystem,
// its stdin input-data, its output captured. Its PID is the helper's
// on the host (a view guest has no PID namespace of its own).
func (r *ViewVMs) runExec(vmid int, req model.GuestExec) (int, func() model.GuestExecStatus, error) {
	r.mu.Lock()
	v := r.vms[vmid]
	r.mu.Unlock()
	if v == nil || v.srv == nil {
		return 0, nil, model.ExecNotFound(req.Path)
	}
	s := v.srv
	if err := s.m.ExecUnavailable(); err != nil {
		return 0, nil, model.Failf("Agent error: Guest agent command failed, error was '%s'\n", err)
	}
	probe := "p=" + shellQuote(req.Path) + `; case $p in */*) [ -f "$p" ] && [ -x "$p" ];; *)
IFS=:; for d in $PATH; do [ -f "$d/$p" ] && [ -x "$d/$p" ] && exit 0; done; exit 1;; esac` // a program, never a shell builtin
	_, wait, err := s.agentCommand(probe, nil)
	if err != nil {
		return 0, nil, err
	}
	if st := wait(); st.ExitCode == nil || *st.ExitCode != 0 {
		return 0, nil, model.ExecNotFound(req.Path)
	}
	argv := make([]string, 0, 1+len(req.Args))
	for _, a := range append([]string{req.Path}, req.Args...) {
		argv = append(argv, shellQuote(a))
	}
	return s.agentCommand("exec "+strings.Join(argv, " "), req.Input)
}

// agentCommand starts script (sh -c) in the VM's guest as its agent
// would, stdin input, and returns its PID and wait, which collects the
// command's status and captured output once it ended.
func (s *ctServer) agentCommand(script string, input []byte) (int, func() model.GuestExecStatus, error) {
	root, _, err := s.mounts()
	if err != nil {
		return 0, nil, fmt.Errorf("guest exec: %w", err)
	}
	spec := viewSpec{Root: root, Work: filepath.Join(root, ".corral-ovl", randomID()), Command: script, Env: vmExecEnv}
	sio, err := s.openStdio(nil)
	if err != nil {
		return 0, nil, fmt.Errorf("guest exec: %w", err)
	}
	cmd, ns, err := s.startCommand(spec, sio, false)
	if errors.Is(err, errServerStopped) {
		return 0, nil, model.Failf("QEMU guest agent is not running\n")
	}
	if err != nil {
		return 0, nil, fmt.Errorf("guest exec: %w", err)
	}
	inW, outR, errR := sio.ours[0], sio.ours[1], sio.ours[2]
	go func() {
		inW.Write(input) // a command that does not read its stdin gets EPIPE here, not the agent
		inW.Close()
	}()
	var out, errOut capture
	var copies sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		c *capture
	}{{outR, &out}, {errR, &errOut}} {
		copies.Add(1)
		go func() {
			defer copies.Done()
			io.Copy(p.c, p.r)
			p.r.Close()
		}()
	}
	wait := func() model.GuestExecStatus {
		cmd.Wait()
		copies.Wait()
		s.ended(cmd, ns, spec)
		st := model.GuestExecStatus{Exited: true, Out: out.b, Err: errOut.b, OutTrunc: out.truncated, ErrTrunc: errOut.truncated}
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			sig := int(ws.Signal())
			st.Signal = &sig
		} else {
			code := ws.ExitStatus()
			st.ExitCode = &code
		}
		return st
	}
	return cmd.Process.Pid, wait, nil
}

// capture keeps the first maxExecOutput bytes written to it.
type capture struct {
	b         []byte
	truncated bool
}

func (c *capture) Write(p []byte) (int, error) {
	room := maxExecOutput - len(c.b)
	if len(p) > room {
		c.truncated = true
		c.b = append(c.b, p[:max(room, 0)]...)
		return len(p), nil
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// shellQuote quotes v for sh.
func shellQuote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }
