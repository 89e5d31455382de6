package model

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// AgentVMRuntime is a state-only VM runtime whose guests have a guest
// agent that answers: the runtime for tests and demonstrations of what
// the agent changes (a snapshot-mode backup's fs-freeze and fs-thaw)
// without booting QEMU. A VM started with agent enabled answers ping,
// fsfreeze-status, fsfreeze-freeze and fsfreeze-thaw (keeping the
// frozen state as qemu-ga does), get-fsinfo and network-get-interfaces
// (nothing mounted, no interfaces: there is no guest); Mute makes a VM's
// agent stop answering, as one whose service is down. Every call is
// recorded (Calls). guest-exec runs in the guest of its GuestRunner
// (RunExecWith: the view's VMs); without one there is no program to run
// and the agent says so as qemu-ga does of a program not found. The
// default state-only runtime has no agent at all.
type AgentVMRuntime struct {
	stateOnlyVMRuntime
	mu     sync.Mutex
	agent  map[int]bool // started with the agent
	muted  map[int]bool
	frozen map[int]bool
	calls  map[int][]string
	execs  map[int]map[int]*execProc // per VM, by guest PID
	runner GuestRunner
}

// NewAgentVMRuntime returns a state-only runtime with answering agents.
func NewAgentVMRuntime() *AgentVMRuntime {
	return &AgentVMRuntime{agent: map[int]bool{}, muted: map[int]bool{}, frozen: map[int]bool{}, calls: map[int][]string{}, execs: map[int]map[int]*execProc{}}
}

// Start records the VM running, with its agent when the config has one.
func (r *AgentVMRuntime) Start(spec VMStartSpec) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.agent[spec.VMID] = spec.Agent
	r.frozen[spec.VMID] = false
	r.execs[spec.VMID] = map[int]*execProc{}
	r.calls[spec.VMID] = append(r.calls[spec.VMID], "start")
	return r.stateOnlyVMRuntime.Start(spec) // its PID counter under r.mu
}

// Stop ends the VM: its agent goes with it.
func (r *AgentVMRuntime) Stop(vmid int) error {
	r.end(vmid, "stop")
	return nil
}

// Shutdown powers the VM off at once (a state-only guest never refuses).
func (r *AgentVMRuntime) Shutdown(vmid int, _ time.Duration) error {
	r.end(vmid, "shutdown")
	return nil
}

func (r *AgentVMRuntime) end(vmid int, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.agent, vmid)
	delete(r.execs, vmid) // its processes went with the guest
	r.calls[vmid] = append(r.calls[vmid], what)
}

// Mute makes VM vmid's agent stop answering (true) or answer again.
func (r *AgentVMRuntime) Mute(vmid int, muted bool) {
	r.mu.Lock()
	r.muted[vmid] = muted
	r.mu.Unlock()
}

// Calls are the calls VM vmid got so far: "start", "stop", "shutdown"
// and each agent command, in order.
func (r *AgentVMRuntime) Calls(vmid int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls[vmid])
}

// Agent answers command as qemu-ga does, or fails as PVE says of a
// guest whose agent does not answer.
func (r *AgentVMRuntime) Agent(vmid int, command string) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[vmid] = append(r.calls[vmid], command)
	if err := r.upLocked(vmid); err != nil {
		return nil, err
	}
	switch command {
	case "ping":
		return map[string]any{}, nil
	case "fsfreeze-status":
		if r.frozen[vmid] {
			return "frozen", nil
		}
		return "thawed", nil
	case "fsfreeze-freeze":
		if r.frozen[vmid] {
			return nil, Failf("Agent error: The command guest-fsfreeze-freeze has been disabled for this instance\n")
		}
		r.frozen[vmid] = true
		return 1, nil // the number of filesystems frozen: the root
	case "fsfreeze-thaw":
		n := 0
		if r.frozen[vmid] {
			n = 1
		}
		r.frozen[vmid] = false
		return n, nil
	case "get-fsinfo", "network-get-interfaces":
		return []any{}, nil
	}
	return nil, Failf("Agent error: %s\n", fmt.Sprintf("The command guest-%s has not been found", command))
}

// upLocked is nil when VM vmid's agent answers.
func (r *AgentVMRuntime) upLocked(vmid int) error {
	if !r.agent[vmid] || r.muted[vmid] {
		return Failf("QEMU guest agent is not running\n")
	}
	return nil
}
