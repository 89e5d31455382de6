package model

import "encoding/base64"

// GuestExec is one guest-exec request, as qemu-server's qemu_exec sends
// it: the program (Path, searched in the guest's PATH as qemu-ga's
// g_spawn does) and its arguments, and the bytes for its stdin (Input,
// meaningful when HasInput); the output is always captured.
type GuestExec struct {
	Path     string
	Args     []string
	Input    []byte
	HasInput bool
}

// GuestExecStatus is qemu-ga's guest-exec-status answer: ExitCode or
// Signal (nil when not set, as qemu-ga leaves them out) once Exited; Out
// and Err the captured output, decoded, with their truncation flags.
type GuestExecStatus struct {
	Exited           bool
	ExitCode, Signal *int
	Out, Err         []byte
	OutTrunc         bool
	ErrTrunc         bool
}

// VMExecRuntime is a VMRuntime whose guests' agents run guest-exec; a
// runtime without it (the state-only one) has no agent to run it.
type VMExecRuntime interface {
	// Exec starts req in VM vmid's guest and returns the guest PID;
	// errors are PVE's ("Agent error: ...", "QEMU guest agent is not
	// running").
	Exec(vmid int, req GuestExec) (int, error)
	// ExecStatus is guest-exec-status for pid: an exited process is
	// forgotten once reported, as qemu-ga does.
	ExecStatus(vmid, pid int) (GuestExecStatus, error)
}

// VMExec is API2/Qemu/Agent.pm's exec: command (program and arguments;
// the schema requires it, so qemu_exec's "command or input-data"
// refusal cannot happen) and input-data (nil: not given) become a
// guest-exec with captured output; the answer is the agent's
// {"pid": N}.
func (q *vmPower) VMExec(auth Auth, node string, vmid int, command []string, input *string) (any, error) {
	if err := q.vmAgentCheck(auth, node, vmid, "exec"); err != nil {
		return nil, err
	}
	req := GuestExec{}
	if len(command) > 0 {
		req.Path, req.Args = command[0], command[1:]
	}
	if input != nil {
		req.Input, req.HasInput = []byte(*input), true
	}
	rt, err := q.execRuntime()
	if err != nil {
		return nil, err
	}
	pid, err := rt.Exec(vmid, req)
	if err != nil {
		return nil, err
	}
	return map[string]any{"pid": pid}, nil
}

// VMExecStatus is Agent.pm's exec-status: the agent's answer with
// out-data and err-data decoded from qemu-ga's base64 and its booleans
// as 1/0, as qemu_exec_status returns them.
func (q *vmPower) VMExecStatus(auth Auth, node string, vmid, pid int) (any, error) {
	if err := q.vmAgentCheck(auth, node, vmid, "exec-status"); err != nil {
		return nil, err
	}
	rt, err := q.execRuntime()
	if err != nil {
		return nil, err
	}
	st, err := rt.ExecStatus(vmid, pid)
	if err != nil {
		return nil, err
	}
	return st.answer(), nil
}

// answer is the status as PVE returns it: keys qemu-ga leaves out stay
// out (exitcode before the exit, out-data without output, a truncation
// flag that is false).
func (s GuestExecStatus) answer() map[string]any {
	out := map[string]any{"exited": boolInt(s.Exited)}
	if s.ExitCode != nil {
		out["exitcode"] = *s.ExitCode
	}
	if s.Signal != nil {
		out["signal"] = *s.Signal
	}
	if len(s.Out) > 0 {
		out["out-data"] = string(s.Out)
	}
	if len(s.Err) > 0 {
		out["err-data"] = string(s.Err)
	}
	if s.OutTrunc {
		out["out-truncated"] = 1
	}
	if s.ErrTrunc {
		out["err-truncated"] = 1
	}
	return out
}

// QGAExecArgs are guest-exec's QMP arguments for req, as qemu_exec
// builds them: input-data base64-encoded, capture-output true.
func QGAExecArgs(req GuestExec) map[string]any {
	args := map[string]any{"path": req.Path, "arg": append([]string{}, req.Args...), "capture-output": true}
	if req.HasInput {
		args["input-data"] = base64.StdEncoding.EncodeToString(req.Input)
	}
	return args
}

// ExecNotFound is qemu-ga's guest-exec error for a program it cannot
// spawn (glib's g_spawn message, with its typographic quotes), as PVE
// reports it.
func ExecNotFound(path string) error {
	return Failf("Agent error: Guest agent command failed, error was 'Failed to execute child process “%s” (No such file or directory)'\n", path)
}

// ExecBadPID is qemu-ga's guest-exec-status error for a PID it does not
// know (never started, or already reported as exited).
func ExecBadPID() error {
	return Failf("Agent error: Invalid parameter 'pid'\n")
}

// execRuntime is the VM runtime's guest agent exec, or PVE's error when
// the runtime has no agent to run commands.
func (q *vmPower) execRuntime() (VMExecRuntime, error) {
	rt, ok := q.vmRuntime().(VMExecRuntime)
	if !ok {
		return nil, Failf("QEMU guest agent is not running\n")
	}
	return rt, nil
}
