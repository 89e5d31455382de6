package vmrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Disk is one disk of a VM: a file of the emulated storage on the bus
// PVE names it by (virtio0 is a virtio-blk device, scsiN a disk on the
// virtio-scsi controller, ideN a CD-ROM such as the cloud-init drive).
type Disk struct {
	Key    string // the config key: virtio0, scsi0, ide2
	File   string
	Format string // qcow2 or raw
	CDROM  bool
}

// Spec is what a VM is started with.
type Spec struct {
	VMID     int
	Dir      string // the VM's runtime directory: sockets, console log, pid
	MemoryMB int
	Cores    int
	Kernel   string // direct kernel boot: the image has no boot loader
	Initrd   string
	Disks    []Disk
	MAC      string // net0's address
	SSHPort  int    // the loopback port forwarded to the guest's port 22
	// SSHAddr is the loopback address SSHPort is forwarded on; ""
	// means 127.0.0.1.
	SSHAddr string
	Agent   bool // a virtio-serial channel org.qemu.guest_agent.0
}

// VM is a running QEMU process.
type VM struct {
	spec    Spec
	cmd     *exec.Cmd
	KVM     bool // false: TCG, many times slower
	done    chan struct{}
	exitErr error
	agentMu sync.Mutex // the agent's socket takes one client at a time
}

// KVMUsable reports whether /dev/kvm can be opened for reading and
// writing, which QEMU's -enable-kvm needs.
func KVMUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// QMPSocket, AgentSocket and ConsoleLog are the files of a VM's runtime
// directory.
func (s Spec) QMPSocket() string   { return filepath.Join(s.Dir, "qmp.sock") }
func (s Spec) AgentSocket() string { return filepath.Join(s.Dir, "qga.sock") }
func (s Spec) ConsoleLog() string  { return filepath.Join(s.Dir, "console.log") }

// args is QEMU's command line for s.
func (s Spec) args(kvm bool) []string {
	a := []string{"-name", "vm" + strconv.Itoa(s.VMID), "-machine", "pc", "-nodefaults", "-nographic",
		"-smp", strconv.Itoa(max(s.Cores, 1)), "-m", strconv.Itoa(s.MemoryMB),
		"-chardev", "file,id=console,path=" + s.ConsoleLog(), "-serial", "chardev:console",
		"-qmp", "unix:" + s.QMPSocket() + ",server=on,wait=off",
		"-kernel", s.Kernel, "-initrd", s.Initrd,
		"-append", "root=LABEL=" + RootLabel + " rw console=ttyS0 earlyprintk=ttyS0 net.ifnames=0",
	}
	if kvm {
		a = append(a, "-accel", "kvm", "-cpu", "host")
	} else {
		a = append(a, "-accel", "tcg", "-cpu", "max")
	}
	scsi := false
	for _, d := range s.Disks {
		id := "drive-" + d.Key
		switch {
		case d.CDROM:
			a = append(a, "-drive", "file="+d.File+",if=none,id="+id+",media=cdrom,readonly=on,format=raw",
				"-device", "ide-cd,bus=ide."+ideBus(d.Key)+",drive="+id)
		case strings.HasPrefix(d.Key, "scsi"):
			if !scsi {
				a, scsi = append(a, "-device", "virtio-scsi-pci,id=scsihw0"), true
			}
			a = append(a, "-drive", "file="+d.File+",if=none,id="+id+",format="+d.Format+",discard=on",
				"-device", "scsi-hd,bus=scsihw0.0,drive="+id+",id="+d.Key)
		default:
			a = append(a, "-drive", "file="+d.File+",if=none,id="+id+",format="+d.Format+",discard=on",
				"-device", "virtio-blk-pci,drive="+id+",id="+d.Key)
		}
	}
	if s.MAC != "" {
		fwd := ""
		if s.SSHPort != 0 {
			addr := s.SSHAddr
			if addr == "" {
				addr = "127.0.0.1"
			}
			fwd = ",hostfwd=tcp:" + addr + ":" + strconv.Itoa(s.SSHPort) + "-:22"
		}
		// restrict=on: the guest reaches neither the host nor the
		// outside; the forwarded port still reaches the guest.
		a = append(a, "-netdev", "user,id=net0,restrict=on"+fwd, "-device", "virtio-net-pci,netdev=net0,mac="+s.MAC)
	}
	if s.Agent {
		a = append(a, "-chardev", "socket,id=qga0,path="+s.AgentSocket()+",server=on,wait=off",
			"-device", "virtio-serial", "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0")
	}
	return a
}

// ideBus is the IDE bus of ideN as PVE numbers them: ide0 and ide1 on
// bus 0, ide2 and ide3 on bus 1.
func ideBus(key string) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(key, "ide"))
	return strconv.Itoa(n / 2)
}

// Start starts s's QEMU, with KVM when /dev/kvm works and TCG (with a
// warning to warn) otherwise, and waits until its QMP socket answers.
func Start(ctx context.Context, s Spec, warn io.Writer) (*VM, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start VM %d: %w", s.VMID, err)
	}
	kvm := KVMUsable() && !kvmBroken.Load() && os.Getenv(AccelEnv) != "tcg"
	if !kvm {
		fmt.Fprintf(warn, "VM %d: KVM is not usable here: running under TCG emulation, many times slower\n", s.VMID)
	}
	vm, err := launch(ctx, s, kvm)
	if err != nil || !kvm {
		return vm, err
	}
	// A nested KVM without EPT (a VM host such as Firecracker) can fail
	// the guest: QEMU stops it in "internal-error" on the first
	// instruction KVM must emulate, or the kernel crawls and prints
	// nothing. A guest that is fine prints its banner (earlyprintk)
	// within a second. Else fall back to TCG, once for the process.
	if kvmFails(ctx, vm) {
		vm.Kill()
		kvmBroken.Store(true)
		fmt.Fprintf(warn, "VM %d: KVM fails guests here (no kernel banner within %s, or an internal error: see %s): running it and later VMs under TCG emulation, many times slower\n", s.VMID, kvmProbe, s.ConsoleLog())
		return launch(ctx, s, false)
	}
	return vm, nil
}

// kvmFails watches a new KVM guest for kvmProbe: true when it stopped on
// an internal error or its kernel printed no banner meanwhile.
func kvmFails(ctx context.Context, vm *VM) bool {
	for deadline := time.Now().Add(kvmProbe); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st, err := vm.Status(ctx); err == nil && st == "internal-error" {
			return true
		}
		if b, _ := os.ReadFile(vm.spec.ConsoleLog()); strings.Contains(string(b), "Linux version") {
			return false
		}
	}
	return true
}

// AccelEnv set to "tcg" makes the emulator run VMs under TCG even where
// /dev/kvm opens.
const AccelEnv = "CORRAL_SIM_QEMU_ACCEL"

// kvmProbe is how long a KVM guest is watched for an internal error.
var kvmProbe = 10 * time.Second

// kvmBroken is set once KVM failed a guest: later VMs start under TCG.
var kvmBroken atomic.Bool

// launch starts QEMU and waits for its QMP socket.
func launch(ctx context.Context, s Spec, kvm bool) (*VM, error) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, fmt.Errorf("start VM %d: qemu-system-x86_64 not found: install Debian's qemu-system-x86 (apt-get install qemu-system-x86), as root", s.VMID)
	}
	for _, p := range []string{s.QMPSocket(), s.AgentSocket()} {
		os.Remove(p)
	}
	cmd := exec.Command(bin, s.args(kvm)...)
	stderr, err := os.Create(filepath.Join(s.Dir, "qemu.log"))
	if err != nil {
		return nil, fmt.Errorf("start VM %d: %w", s.VMID, err)
	}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // not killed by the terminal's signals
	if err := cmd.Start(); err != nil {
		stderr.Close()
		return nil, fmt.Errorf("start VM %d: %w", s.VMID, err)
	}
	vm := &VM{spec: s, cmd: cmd, KVM: kvm, done: make(chan struct{})}
	go func() {
		vm.exitErr = cmd.Wait()
		stderr.Close()
		close(vm.done)
	}()
	for {
		if _, err := vm.qmp(ctx, "query-status", nil); err == nil {
			return vm, nil
		}
		select {
		case <-vm.done:
			b, _ := os.ReadFile(filepath.Join(s.Dir, "qemu.log"))
			return nil, fmt.Errorf("start VM %d: qemu exited (%v): %s", s.VMID, vm.exitErr, strings.TrimSpace(string(b)))
		case <-ctx.Done():
			vm.Kill()
			return nil, fmt.Errorf("start VM %d: %w", s.VMID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Done is closed when the QEMU process has exited.
func (vm *VM) Done() <-chan struct{} { return vm.done }

// PID is the QEMU process's id.
func (vm *VM) PID() int { return vm.cmd.Process.Pid }

// Kill ends QEMU at once (SIGKILL) and waits for it.
func (vm *VM) Kill() {
	vm.cmd.Process.Kill()
	<-vm.done
}

// Stop is PVE's hard stop: QMP quit, and SIGKILL after timeout.
func (vm *VM) Stop(ctx context.Context, timeout time.Duration) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	vm.qmp(qctx, "quit", nil)
	select {
	case <-vm.done:
	case <-qctx.Done():
		vm.Kill()
	}
}

// Shutdown is an ACPI power button press (QMP system_powerdown); it
// waits up to timeout for the guest to power off.
func (vm *VM) Shutdown(ctx context.Context, timeout time.Duration) error {
	if _, err := vm.qmp(ctx, "system_powerdown", nil); err != nil {
		return err
	}
	select {
	case <-vm.done:
		return nil
	case <-time.After(timeout):
		return errors.New("VM quit/powerdown failed - got timeout")
	case <-ctx.Done():
		return ctx.Err()
	}
}
