package model

// GuestRunner starts req in VM vmid's guest and returns the command's
// guest PID and wait, which blocks until the command ended and returns
// its status; err is the agent's refusal (ExecNotFound).
type GuestRunner func(vmid int, req GuestExec) (pid int, wait func() GuestExecStatus, err error)

// execProc is one guest-exec process of AgentVMRuntime.
type execProc struct {
	done   bool
	status GuestExecStatus
}

// RunExecWith makes run the runtime's guest-exec: the guest the
// runtime's VMs have (nil: none, every program is not found).
func (r *AgentVMRuntime) RunExecWith(run GuestRunner) {
	r.mu.Lock()
	r.runner = run
	r.mu.Unlock()
}

// Exec is guest-exec: the command starts in the guest (GuestRunner) and
// is tracked until guest-exec-status reports it exited.
func (r *AgentVMRuntime) Exec(vmid int, req GuestExec) (int, error) {
	r.mu.Lock()
	r.calls[vmid] = append(r.calls[vmid], "exec")
	err := r.upLocked(vmid)
	run := r.runner
	r.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if run == nil {
		return 0, ExecNotFound(req.Path)
	}
	pid, wait, err := run(vmid, req)
	if err != nil {
		return 0, err
	}
	p := &execProc{}
	r.mu.Lock()
	if procs := r.execs[vmid]; procs != nil { // nil: the VM stopped meanwhile
		procs[pid] = p
	}
	r.mu.Unlock()
	go func() {
		st := wait()
		st.Exited = true
		r.mu.Lock()
		p.done, p.status = true, st
		r.mu.Unlock()
	}()
	return pid, nil
}

// ExecStatus is guest-exec-status: "not exited" while the command runs;
// once it exited, its status, and the PID is forgotten (qemu-ga frees
// the process on that report: a second one is an invalid pid).
func (r *AgentVMRuntime) ExecStatus(vmid, pid int) (GuestExecStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[vmid] = append(r.calls[vmid], "exec-status")
	if err := r.upLocked(vmid); err != nil {
		return GuestExecStatus{}, err
	}
	p := r.execs[vmid][pid]
	if p == nil {
		return GuestExecStatus{}, ExecBadPID()
	}
	if !p.done {
		return GuestExecStatus{}, nil
	}
	delete(r.execs[vmid], pid)
	return p.status, nil
}
