package model

import (
	"errors"
	"fmt"
)

// Memory admission: the emulator refuses to start a CT whose memory does
// not fit its node, so that an apply of a thousand apps on a served
// emulator with real containers fails app by app instead of starting a
// thousand lxc-starts and exhausting the host.
//
// PVE itself has no such check. pve-container's vm_start (src/PVE/LXC.pm)
// writes the CT's memory as the cgroup limits lxc.cgroup2.memory.max and
// memory.high (update_lxc_config, Config.pm calculate_memory_constraints)
// and runs `systemctl start pve-container@<vmid>`: limits are not
// reservations, so a PVE node starts CTs whose memory adds up to more than
// its RAM (overcommit), and the kernel's OOM killer deals with what does
// not fit later. qemu-server checks no RAM at start either (only
// hugepages: QemuServer/Memory.pm hugepages_allocate, "hugepage
// allocation failed"). What the emulator shows is how a CT start fails on
// PVE when the container does not come up: lxc-start's stderr in the task
// log, then the task's exit status "startup for container '<vmid>'
// failed" (LXC.pm monitor_start after print_ct_stderr_log). Here the
// stderr line is the emulator's own reason and its fix.
//
// The rule: the configured memory (config "memory", MiB, default 512) of
// the CTs running on the node plus that of the CT to start must not
// exceed the node's memory (GET /nodes/{node}/status memory.total, and
// maxmem in /cluster/resources and /nodes). It applies to start, to
// create, restore and rollback with start=1, and to the start on the
// target of a restart migration; a reboot keeps the memory the CT
// already holds, and the restart after a stop-mode backup is not
// checked (the CT held that memory when the backup began). It is off until
// SetMemoryAdmission turns it on (the sim server does, see sim.Options
// NodeMemory).

// ErrNoMemory is the cause of a start refused for the node's memory.
var ErrNoMemory = errors.New("not enough memory on the node")

// SetMemoryAdmission sets every node's memory to perNode bytes and turns
// memory admission on; perNode <= 0 turns it off and leaves the nodes'
// memory as it is. The memory is part of the state, so status reports it.
func (c *Cluster) SetMemoryAdmission(perNode int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admitMemory = perNode > 0
	if perNode <= 0 {
		return
	}
	for _, n := range c.st.Nodes {
		if n.MemBytes != perNode {
			n.MemBytes = perNode
			c.markCore()
		}
	}
	c.saveLocked()
}

// MemoryAdmission reports whether memory admission is on.
func (c *Cluster) MemoryAdmission() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.admitMemory
}

// admitLocked is nil when CT g may start on node: admission is off, or
// its memory fits beside the CTs already running there. Else it logs
// the reason, as lxc-start's stderr would be, and returns PVE's start
// failure.
func (c *Cluster) admitLocked(w *Worker, node string, g *Guest) error {
	return c.admitBytesLocked(w, node, "CT", g.VMID, guestMaxMem(g))
}

// admitBytesLocked is admitLocked for a guest of either kind ("CT",
// "VM") that needs need bytes: the running CTs and VMs of the node count.
func (c *Cluster) admitBytesLocked(w *Worker, node, kind string, vmid int, need int64) error {
	if !c.admitMemory {
		return nil
	}
	n := c.st.node(node)
	if n == nil {
		return nil
	}
	var used int64
	running := 0
	for _, o := range c.st.Guests {
		if o.Node == node && o.Running && o.VMID != vmid {
			used += guestMaxMem(o)
			running++
		}
	}
	for _, o := range c.st.VMs {
		if o.Node == node && o.Running && o.VMID != vmid {
			used += vmMaxMem(o.Config)
			running++
		}
	}
	if used+need <= n.MemBytes {
		return nil
	}
	w.logLocked("%s", memoryRefusal(node, kind, vmid, need, used, n.MemBytes, running))
	return &noMemoryError{vmid: vmid, kind: kind}
}

// memoryRefusal is the task log line of a start admission refused.
func memoryRefusal(node, kind string, vmid int, need, used, total int64, running int) string {
	noun := "guest" // a VM's refusal counts the CTs and VMs alike
	if kind == "CT" {
		noun = "CT"
	}
	return fmt.Sprintf("not enough memory on node '%s' to start %s %d: it needs %d MiB, and the %d %s(s) running there hold %d of the node's %d MiB; "+
		"stop a %s, lower this %s's memory, or run the emulator with more (corral sim serve --node-memory SIZE)",
		node, kind, vmid, need/mib, running, noun, used/mib, total/mib, noun, kind)
}

// noMemoryError is the start task's failure: PVE's exit status for a CT
// that did not come up, which errors.Is matches with ErrNoMemory.
type noMemoryError struct {
	vmid int
	kind string
}

func (e *noMemoryError) Error() string {
	if e.kind == "VM" {
		return "start failed: QEMU exited with code 1\n"
	}
	return fmt.Sprintf("startup for container '%d' failed\n", e.vmid)
}

func (e *noMemoryError) Is(target error) bool { return target == ErrNoMemory }
