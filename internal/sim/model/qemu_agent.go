package model

import "fmt"

// VMAgent runs guest agent command cmd (API2/Qemu/Agent.pm): the
// caller needs one of the command's privileges on /vms/<vmid>; the VM
// must have an agent configured and run; then the runtime passes the
// command to the guest's agent. Without a real guest (the state-only
// runtime) no agent answers: "QEMU guest agent is not running", as PVE
// says of a guest whose agent is not up.
func (q *vmPower) VMAgent(auth Auth, node string, vmid int, cmd string) (any, error) {
	if err := q.vmAgentCheck(auth, node, vmid, cmd); err != nil {
		return nil, err
	}
	return q.vmRuntime().Agent(vmid, cmd)
}

// vmAgentCheck is qemu-server's checks before any agent command, under
// the state's read lock (the runtime's call is made without it).
func (q *vmPower) vmAgentCheck(auth Auth, node string, vmid int, cmd string) error {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	return q.vmAgentCheckLocked(auth, node, vmid, cmd)
}

func (q *vmPower) vmAgentCheckLocked(auth Auth, node string, vmid int, cmd string) error {
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return err
	}
	a := q.state().Access
	if err := a.Check(auth, fmt.Sprintf("/vms/%d", vmid), vmAgentPrivs(q.version, cmd), true); err != nil {
		return err
	}
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	if _, ok := vm.Config["agent"]; !ok {
		return Failf("No QEMU guest agent configured\n")
	}
	if !vm.Running {
		return Failf("VM %d is not running\n", vmid)
	}
	return nil
}
