package model

import (
	"sync"
	"time"
)

// VMRuntime runs the VMs' guests. internal/sim sets one (SetVMRuntime):
// real QEMU guests through sim/vmrun when the emulator runs real guests
// and QEMU is installed; without one the VMs are state only
// (stateOnlyVMRuntime). The model imports no runtime: it hands over what
// a boot needs as plain data.
type VMRuntime interface {
	// Start boots the VM and returns the PID of its QEMU process.
	Start(spec VMStartSpec) (pid int, err error)
	// Stop ends the VM at once (qm stop).
	Stop(vmid int) error
	// Shutdown asks the guest to power off, waiting up to timeout; it
	// fails when the guest did not stop in time.
	Shutdown(vmid int, timeout time.Duration) error
	// Agent runs a guest agent command (ping, network-get-interfaces,
	// get-fsinfo, fsfreeze-freeze, fsfreeze-thaw, fsfreeze-status) and
	// returns its "return" value. guest-exec, which takes arguments,
	// is VMExecRuntime's, for the runtimes whose guests run programs.
	Agent(vmid int, command string) (any, error)
}

// VMStartSpec is what a VM's boot needs from its config.
type VMStartSpec struct {
	VMID      int
	Name      string
	MemoryMiB int
	Cores     int
	Disks     []VMDiskSpec
	// CloudInit is set when the VM has a cloud-init drive.
	CloudInit *VMCloudInit
	// CloudInitPath is the cloud-init drive's volume file, CloudInitKey
	// its config key (ide2).
	CloudInitPath, CloudInitKey string
	// MAC is net0's address ("" without net0).
	MAC   string
	Agent bool
	// UUID is smbios1's uuid, new for every VM created or cloned: a
	// runtime that keeps a guest's files between boots keys them by it,
	// so a VM recreated under the same VMID is another machine.
	UUID string
}

// VMDiskSpec is one disk of a VM as its config names it.
type VMDiskSpec struct {
	Key    string // scsi0, virtio0, …
	Path   string // the volume's file
	Format string // raw, qcow2
}

// stateOnlyVMRuntime is the runtime without QEMU: a start records the VM
// running and nothing boots, so no guest agent ever answers, and the
// agent calls fail as PVE's do when the agent is not running.
type stateOnlyVMRuntime struct{ pid int }

func (r *stateOnlyVMRuntime) Start(VMStartSpec) (int, error) {
	r.pid++
	return 400000 + r.pid, nil
}
func (r *stateOnlyVMRuntime) Stop(int) error                    { return nil }
func (r *stateOnlyVMRuntime) Shutdown(int, time.Duration) error { return nil }
func (r *stateOnlyVMRuntime) Agent(int, string) (any, error) {
	return nil, Failf("QEMU guest agent is not running\n")
}

// vmRuntimeHook holds the VMs' runtime: Cluster embeds it, so that
// SetVMRuntime is the Cluster's, and every VM part reaches it through
// vmParts.
type vmRuntimeHook struct {
	mu      sync.Mutex
	runtime VMRuntime // SetVMRuntime; nil: stateOnlyVMRuntime
}

// SetVMRuntime installs the VMs' runtime (nil: state only).
func (h *vmRuntimeHook) SetVMRuntime(rt VMRuntime) {
	h.mu.Lock()
	h.runtime = rt
	h.mu.Unlock()
}

// vmRuntime is the installed runtime or the state-only one.
func (h *vmRuntimeHook) vmRuntime() VMRuntime {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runtime == nil {
		h.runtime = &stateOnlyVMRuntime{}
	}
	return h.runtime
}
