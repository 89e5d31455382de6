package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// VM power: POST .../qemu/{vmid}/status/{start,stop,shutdown,reboot}
// (API2/Qemu.pm vm_start, vm_stop, vm_shutdown, vm_reboot). Each checks
// VM.PowerMgmt and the lock, then runs its task (qmstart, qmstop,
// qmshutdown, qmreboot) under the config flock; the runtime
// (qemu_runtime.go) boots or ends the guest outside the State's lock,
// as a QEMU process starts outside pmxcfs.

// vmPower starts, stops, shuts down and reboots VMs, and passes guest
// agent commands to a running one (qemu_agent.go). A VM's restore,
// rollback, backup and create start or stop it through startTask and
// stopTask.
type vmPower struct {
	vmParts
	version string // an agent command's privileges: 8's VM.Monitor, 9's VM.GuestAgent.*
	// admit is memory admission (admission.go), the Cluster's own: it
	// counts the running CTs and VMs of the node.
	admit func(w *Worker, node, kind string, vmid int, need int64) error
	// ha turns a start, stop or shutdown of an HA-managed VM into an HA
	// request (haGuest).
	ha interface {
		haPowerRequestLocked(auth Auth, node string, vmid int, want string) (upid string, ok bool)
	}
}

// haWant is the HA state each power task asks for when the VM is an HA
// resource: vm_start, vm_stop and vm_shutdown have an HA branch,
// vm_reboot has none.
var haWant = map[string]string{"qmstart": "started", "qmstop": "stopped", "qmshutdown": "stopped"}

// vmPowerLocked is what the four calls check before their task.
func (q *vmPower) vmPowerLocked(auth Auth, node string, vmid int, params map[string]string) (*VM, error) {
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return nil, err
	}
	if err := q.state().Access.Check(auth, fmt.Sprintf("/vms/%d", vmid), []string{"VM.PowerMgmt"}, false); err != nil {
		return nil, err
	}
	if isTrue(params["skiplock"]) && !auth.IsRoot() {
		return nil, ParamError(map[string]string{"skiplock": "Only root may use this option."})
	}
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return nil, err
	}
	if !isTrue(params["skiplock"]) {
		if err := vmCheckLock(vm); err != nil {
			return nil, err
		}
	}
	return vm, nil
}

// StartVM is vm_start.
func (q *vmPower) StartVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	return q.powerTask(auth, node, vmid, params, "qmstart", false, func(w *Worker) error {
		return q.startTask(w, node, vmid)
	})
}

// startTask boots VM vmid: pending changes apply, memory admission,
// then the runtime's start; the VM is recorded running with its PID.
func (q *vmPower) startTask(w *Worker, node string, vmid int) error {
	release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
	if err != nil {
		return err
	}
	defer release()
	var spec VMStartSpec
	var warn string
	var notes []string
	err = w.Do(func(st *State) error {
		vm, err := q.vmLocked(node, vmid)
		if err != nil {
			return err
		}
		if vm.Running {
			return Failf("VM %d already running\n", vmid)
		}
		if isTrue(vm.Config["template"]) {
			return Failf("you can't start a vm if it's a template\n")
		}
		q.applyPendingLocked(vm)
		q.journal.markCore()
		if err := vmCheckFirmware(vm.Config); err != nil {
			return err
		}
		if err := q.admit(w, node, "VM", vmid, vmMaxMem(vm.Config)); err != nil {
			return err
		}
		spec, err = q.startSpecLocked(vm)
		vmCloudInitRegenerated(vm) // the drive is written from the config now
		warn, notes = vmFirmwareWarning(vmid, vm.Config)
		return err
	})
	if err != nil {
		return err
	}
	if warn != "" {
		w.Warn("%s", warn)
		for _, l := range notes {
			w.Log("%s", l)
		}
	}
	pid, err := q.vmRuntime().Start(spec)
	if err != nil {
		return fmt.Errorf("start failed: %w", err)
	}
	return w.Do(func(st *State) error {
		vm, err := q.vmLocked(node, vmid)
		if err != nil {
			return err
		}
		vm.Running, vm.PID, vm.StartedAt = true, pid, q.clock().Unix()
		q.journal.markCore()
		return nil
	})
}

// startSpecLocked is what the runtime needs of vm's config to boot it.
func (q *vmPower) startSpecLocked(vm *VM) (VMStartSpec, error) {
	conf := vm.Config
	spec := VMStartSpec{VMID: vm.VMID, Name: conf["name"], MemoryMiB: int(vmMaxMem(conf) / mib), Agent: vmAgentEnabled(conf)}
	if p, err := ParseProp(conf["smbios1"], ""); err == nil {
		spec.UUID = p["uuid"]
	}
	spec.Cores, _ = strconv.Atoi(conf["cores"])
	spec.Cores = max(spec.Cores, 1)
	if n, err := ParseProp(conf["net0"], "model"); err == nil {
		for k, v := range n {
			if qemuNICModels[k] {
				spec.MAC = v
			}
		}
	}
	st := q.state()
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		// Only a bus's drives reach the runtime: the real runtime boots
		// the image's kernel directly, which needs neither OVMF's vars
		// (efidisk0) nor a TPM (tpmstate0; docs/emulator.md).
		if !vmBusDriveRE.MatchString(k) {
			continue
		}
		p, err := ParseProp(conf[k], "file")
		if err != nil {
			return spec, fmt.Errorf("%s: %w", k, err)
		}
		sid, name, ok := ParseVolID(p["file"])
		v := st.Volumes[st.volKey(vm.Node, p["file"])]
		if !ok || v == nil {
			continue // none, cdrom, or a volume gone
		}
		path := q.storage.volumePath(vm.Node, sid, name)
		if strings.Contains(name, fmt.Sprintf("vm-%d-cloudinit", vm.VMID)) {
			ci, err := qemuCloudInit(vm.VMID, conf)
			if err != nil {
				return spec, err
			}
			spec.CloudInit, spec.CloudInitPath, spec.CloudInitKey = &ci, path, k
			continue
		}
		if p["media"] == "cdrom" {
			continue
		}
		spec.Disks = append(spec.Disks, VMDiskSpec{Key: k, Path: path, Format: v.Format})
	}
	return spec, nil
}

// StopVM is vm_stop: the guest ends at once.
func (q *vmPower) StopVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	return q.powerTask(auth, node, vmid, params, "qmstop", false, func(w *Worker) error {
		return q.stopTask(w, node, vmid, q.vmRuntime().Stop)
	})
}

// stopTask ends the guest with end (unless it is not running) and
// records the VM stopped, its pending changes applied.
func (q *vmPower) stopTask(w *Worker, node string, vmid int, end func(vmid int) error) error {
	release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
	if err != nil {
		return err
	}
	defer release()
	if err := end(vmid); err != nil {
		return err
	}
	return w.Do(func(st *State) error {
		vm, err := q.vmLocked(node, vmid)
		if err != nil {
			return err
		}
		vm.Running, vm.PID, vm.StartedAt = false, 0, 0
		q.applyPendingLocked(vm)
		q.journal.markCore()
		return nil
	})
}

// ShutdownVM is vm_shutdown: the guest is asked to power off (ACPI, or
// the agent); after timeout (default 180 s) forceStop (default 1) stops it.
func (q *vmPower) ShutdownVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	timeout := 180 * time.Second
	if t, err := strconv.Atoi(params["timeout"]); err == nil {
		timeout = time.Duration(t) * time.Second
	}
	force := params["forceStop"] != "0"
	rt := q.vmRuntime()
	return q.powerTask(auth, node, vmid, params, "qmshutdown", true, func(w *Worker) error {
		return q.stopTask(w, node, vmid, func(vmid int) error {
			err := rt.Shutdown(vmid, timeout)
			if err != nil && force {
				w.Log("VM quit/powerdown failed - terminating now with SIGTERM")
				return rt.Stop(vmid)
			}
			if err != nil {
				return fmt.Errorf("VM quit/powerdown failed - got timeout")
			}
			return nil
		})
	})
}

// RebootVM is vm_reboot: a shutdown, then a start that applies the
// pending changes.
func (q *vmPower) RebootVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	rt := q.vmRuntime()
	return q.powerTask(auth, node, vmid, params, "qmreboot", true, func(w *Worker) error {
		err := q.stopTask(w, node, vmid, func(vmid int) error {
			if rt.Shutdown(vmid, 180*time.Second) != nil {
				return rt.Stop(vmid)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return q.startTask(w, node, vmid)
	})
}

// powerTask is the prologue every power verb shares: under the State's
// lock, the VM's checks (vmPowerLocked: its node, the privilege, its
// lock), the HA request for an HA-managed VM (haWant), and, for
// shutdown and reboot, that it runs; then work as task typ.
func (q *vmPower) powerTask(auth Auth, node string, vmid int, params map[string]string, typ string, mustRun bool, work func(w *Worker) error) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	vm, err := q.vmPowerLocked(auth, node, vmid, params)
	if err != nil {
		return "", err
	}
	if want := haWant[typ]; want != "" {
		if upid, ok := q.ha.haPowerRequestLocked(auth, node, vmid, want); ok {
			return upid, nil
		}
	}
	if mustRun && !vm.Running {
		return "", Failf("VM %d not running\n", vmid)
	}
	return q.tasks.spawn(auth, node, typ, strconv.Itoa(vmid), work), nil
}

// applyPendingLocked is vmconfig_apply_pending: vm's pending changes
// written into its config. A drive deleted or replaced (efidisk0 and
// tpmstate0 wait here on a running VM) leaves its volume as unusedN, as
// a delete of a stopped VM's drive does.
func (q *vmParts) applyPendingLocked(vm *VM) {
	for _, k := range slices.Sorted(maps.Keys(vm.PendingDelete)) {
		old, ok := vm.Config[k]
		delete(vm.Config, k)
		if ok && vmDriveRE.MatchString(k) {
			q.detachDriveLocked(vm, old, vm.PendingDelete[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vm.Pending)) {
		old, ok := vm.Config[k]
		vm.Config[k] = vm.Pending[k]
		if ok && vmDriveRE.MatchString(k) && vmDriveFile(old) != vmDriveFile(vm.Pending[k]) {
			q.detachDriveLocked(vm, old, false)
		}
	}
	vm.Pending, vm.PendingDelete = nil, nil
}

// vmDriveFile is a drive value's volume ("" if it does not parse).
func vmDriveFile(v string) string {
	p, err := ParseProp(v, "file")
	if err != nil {
		return ""
	}
	return p["file"]
}

// vmMaxMem is memory (MiB, default 512) in bytes: a VM's RAM is
// allocated whole at start, whatever the balloon.
func vmMaxMem(conf map[string]string) int64 {
	mem := int64(512)
	if n, err := strconv.ParseInt(conf["memory"], 10, 64); err == nil {
		mem = n
	}
	return mem * mib
}

// vmAgentEnabled reads agent's enabled flag ("1", "enabled=1,…").
func vmAgentEnabled(conf map[string]string) bool {
	p, err := ParseProp(conf["agent"], "enabled")
	return err == nil && isTrue(p["enabled"])
}
