package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/vmrun"
)

// RealVMsEnv set to 1 makes the emulator's VMs real QEMU guests
// (Options.RealVMs).
const RealVMsEnv = "CORRAL_SIM_REAL_VMS"

// ImportImageName is the name under local:import/ of the cached VM
// image, the source a VM's import-from names.
const ImportImageName = "debian-12-corral-vm.qcow2"

// vmRuntime is model.VMRuntime over sim/vmrun: each started VM a real
// qemu-system-x86_64 booting the cached Debian 12 image's kernel, its
// disks the volumes' files, its cloud-init drive a NoCloud seed written
// into the cloud-init volume at each start, as qemu-server regenerates
// it.
type vmRuntime struct {
	img vmrun.Image
	dir string // runtime directories: <dir>/<vmid>
	c   *model.Cluster
	// sshPort is the guests' SSH port (guest.Manager.Port): each VM's
	// port 22 is forwarded there on its loopback address in the guest
	// block, the address its agent's network-get-interfaces reports for
	// eth0, so a client reaches the VM where the agent says, as it
	// reaches a CT (docs/emulator.md, Virtual machines).
	sshPort int
	log     *slog.Logger
	ctx     context.Context // ends with the emulator: stops the starts under way

	mu    sync.Mutex
	vms   map[int]*vmrun.VM
	agent map[int]bool // the VMs started with the agent's channel
}

// wireVMRuntime gives the cluster real VMs when they are asked for
// (real, or RealVMsEnv=1), QEMU is installed and the VM image is cached;
// it offers the image as local:import/<ImportImageName>. Otherwise the
// VMs stay state only (model.VMRuntime's doc) and it returns nil.
func wireVMRuntime(ctx context.Context, c *model.Cluster, dir string, real bool, sshPort int, log *slog.Logger) *vmRuntime {
	if !real && os.Getenv(RealVMsEnv) != "1" {
		return nil
	}
	img, ok := vmrun.CachedImage()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil || !ok {
		log.Warn("real VMs asked for, but QEMU or the VM image is missing: VMs are state only (install qemu-system-x86 and qemu-utils, and build the image with vmrun.EnsureImage)")
		return nil
	}
	if err := c.OfferImportVolume("local", ImportImageName, img.Disk); err != nil {
		log.Warn("the VM image is not offered as an import volume", "err", err)
	}
	rt := &vmRuntime{img: img, dir: filepath.Join(dir, "qemu"), c: c, sshPort: sshPort, log: log, ctx: ctx, vms: map[int]*vmrun.VM{}, agent: map[int]bool{}}
	c.SetVMRuntime(rt)
	return rt
}

// Start writes the cloud-init seed and boots the VM.
func (r *vmRuntime) Start(s model.VMStartSpec) (int, error) {
	spec := vmrun.Spec{VMID: s.VMID, Dir: filepath.Join(r.dir, strconv.Itoa(s.VMID)), MemoryMB: s.MemoryMiB, Cores: s.Cores,
		Kernel: r.img.Kernel, Initrd: r.img.Initrd, MAC: s.MAC, Agent: s.Agent}
	for _, d := range s.Disks {
		spec.Disks = append(spec.Disks, vmrun.Disk{Key: d.Key, File: d.Path, Format: diskFormat(d.Path)})
	}
	if s.CloudInit != nil {
		seed := vmrun.Seed{UserData: s.CloudInit.UserData(), NetworkConfig: s.CloudInit.NetworkConfig(), MetaData: s.CloudInit.MetaData()}
		if err := vmrun.WriteSeed(r.ctx, seed, s.CloudInitPath); err != nil {
			return 0, err
		}
		spec.Disks = append(spec.Disks, vmrun.Disk{Key: s.CloudInitKey, File: s.CloudInitPath, Format: "raw", CDROM: true})
	}
	spec.SSHAddr, spec.SSHPort = model.GuestAddress(r.c.GuestBlock(), s.VMID), r.sshPort
	var warn bytes.Buffer
	vm, err := vmrun.Start(r.ctx, spec, &warn)
	if warn.Len() > 0 {
		r.log.Warn(warn.String())
	}
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.vms[s.VMID], r.agent[s.VMID] = vm, s.Agent
	r.mu.Unlock()
	return vm.PID(), nil
}

// take removes VM vmid's process from the table (nil: none runs).
func (r *vmRuntime) take(vmid int) *vmrun.VM {
	r.mu.Lock()
	defer r.mu.Unlock()
	vm := r.vms[vmid]
	delete(r.vms, vmid)
	delete(r.agent, vmid)
	return vm
}

func (r *vmRuntime) Stop(vmid int) error {
	if vm := r.take(vmid); vm != nil {
		vm.Stop(r.ctx, 10*time.Second)
	}
	return nil
}

// Shutdown is qemu-server's vm_shutdown: with the agent configured it
// asks the agent (guest-shutdown, which answers nothing), else it
// presses the ACPI power button; then it waits up to timeout.
func (r *vmRuntime) Shutdown(vmid int, timeout time.Duration) error {
	r.mu.Lock()
	vm, agent := r.vms[vmid], r.agent[vmid]
	r.mu.Unlock()
	if vm == nil {
		return nil
	}
	if agent {
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		vm.Agent(ctx, "guest-shutdown", nil) // no answer: the guest powers off
		cancel()
		select {
		case <-vm.Done():
		case <-time.After(timeout):
			return errors.New("VM quit/powerdown failed - got timeout")
		}
	} else if err := vm.Shutdown(r.ctx, timeout); err != nil {
		return err
	}
	r.take(vmid)
	return nil
}

// Agent runs guest-<command> on the VM's agent; no process or no
// answer is PVE's "QEMU guest agent is not running".
func (r *vmRuntime) Agent(vmid int, command string) (any, error) {
	r.mu.Lock()
	vm := r.vms[vmid]
	r.mu.Unlock()
	if vm == nil {
		return nil, model.Failf("QEMU guest agent is not running\n")
	}
	raw, err := vm.Agent(r.ctx, "guest-"+command, nil)
	if errors.Is(err, vmrun.ErrAgentNotRunning) {
		return nil, model.Failf("QEMU guest agent is not running\n")
	}
	if err != nil {
		return nil, model.Failf("%s\n", err)
	}
	var out any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("agent %s: %w", command, err)
		}
	}
	if out == nil {
		out = map[string]any{}
	}
	if command == "network-get-interfaces" {
		out = forwardedAddress(out, model.GuestAddress(r.c.GuestBlock(), vmid))
	}
	return out, nil
}

// Exec is guest-exec on the VM's agent (model.VMExecRuntime).
func (r *vmRuntime) Exec(vmid int, req model.GuestExec) (int, error) {
	raw, err := r.execCall(vmid, "guest-exec", model.QGAExecArgs(req))
	if err != nil {
		return 0, err
	}
	var res struct {
		PID *int `json:"pid"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.PID == nil {
		return 0, fmt.Errorf("agent guest-exec: unexpected answer %s", raw)
	}
	return *res.PID, nil
}

// ExecStatus is guest-exec-status on the VM's agent.
func (r *vmRuntime) ExecStatus(vmid, pid int) (model.GuestExecStatus, error) {
	raw, err := r.execCall(vmid, "guest-exec-status", map[string]any{"pid": pid})
	if err != nil {
		return model.GuestExecStatus{}, err
	}
	return parseExecStatus(raw)
}

// execCall runs an agent command for exec or exec-status, its errors
// as qemu-server's agent_cmd words them.
func (r *vmRuntime) execCall(vmid int, cmd string, args any) (json.RawMessage, error) {
	r.mu.Lock()
	vm := r.vms[vmid]
	r.mu.Unlock()
	if vm == nil {
		return nil, model.Failf("QEMU guest agent is not running\n")
	}
	raw, err := vm.Agent(r.ctx, cmd, args)
	var ae *vmrun.AgentError
	switch {
	case errors.Is(err, vmrun.ErrAgentNotRunning):
		return nil, model.Failf("QEMU guest agent is not running\n")
	case errors.As(err, &ae):
		return nil, model.Failf("Agent error: %s\n", ae.Desc)
	case err != nil:
		return nil, model.Failf("%s\n", err)
	}
	return raw, nil
}

// parseExecStatus reads qemu-ga's guest-exec-status answer, its
// out-data and err-data decoded from base64 as qemu_exec_status does
// (PVE keeps data that is not base64 as it came).
func parseExecStatus(raw json.RawMessage) (model.GuestExecStatus, error) {
	var res struct {
		Exited       bool   `json:"exited"`
		ExitCode     *int   `json:"exitcode"`
		Signal       *int   `json:"signal"`
		OutData      string `json:"out-data"`
		ErrData      string `json:"err-data"`
		OutTruncated bool   `json:"out-truncated"`
		ErrTruncated bool   `json:"err-truncated"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return model.GuestExecStatus{}, fmt.Errorf("agent guest-exec-status: %w", err)
	}
	return model.GuestExecStatus{Exited: res.Exited, ExitCode: res.ExitCode, Signal: res.Signal,
		Out: decodeAgentData(res.OutData), Err: decodeAgentData(res.ErrData),
		OutTrunc: res.OutTruncated, ErrTrunc: res.ErrTruncated}, nil
}

func decodeAgentData(s string) []byte {
	if s == "" {
		return nil // qemu-ga sends no data for no output
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b
	}
	return []byte(s)
}

// forwardedAddress puts addr, where the VM's SSH is forwarded, in place
// of the IPv4 addresses of its interfaces but lo (user networking's
// 10.0.2.15, which nothing outside the VM reaches).
func forwardedAddress(out any, addr string) any {
	ifs, ok := out.([]any)
	if !ok {
		return out
	}
	for _, i := range ifs {
		ifc, ok := i.(map[string]any)
		if !ok || ifc["name"] == "lo" {
			continue
		}
		ips, _ := ifc["ip-addresses"].([]any)
		for _, ip := range ips {
			if a, ok := ip.(map[string]any); ok && a["ip-address-type"] == "ipv4" {
				a["ip-address"], a["prefix"] = addr, 8
			}
		}
	}
	return out
}

// close kills every VM still running (the emulator stops).
func (r *vmRuntime) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	vms := r.vms
	r.vms = map[int]*vmrun.VM{}
	r.mu.Unlock()
	for _, vm := range vms {
		vm.Kill()
	}
}

// diskFormat reads a disk file's format from its header: qcow2's magic
// "QFI\xfb", else raw (an imported image keeps its bytes whatever the
// storage, docs/emulator.md).
func diskFormat(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "raw"
	}
	defer f.Close()
	b := make([]byte, 4)
	if n, _ := f.Read(b); n == 4 && string(b) == "QFI\xfb" {
		return "qcow2"
	}
	return "raw"
}
