package vmrun

import (
	"strings"
	"testing"
)

// TestSpecArgs checks QEMU's command line against PVE's device layout:
// ide2 is the CD-ROM on IDE bus 1, scsiN disks sit on one virtio-scsi
// controller, virtio0 is virtio-blk, the network is restricted user
// networking with only the loopback SSH forward, and the agent's port
// has the name qemu-guest-agent looks for.
func TestSpecArgs(t *testing.T) {
	s := Spec{VMID: 100, Dir: "/run/vm", MemoryMB: 512, Cores: 1, Kernel: "/k", Initrd: "/i", MAC: "BC:24:11:00:00:01", SSHPort: 2222, Agent: true,
		Disks: []Disk{{Key: "scsi0", File: "/d0", Format: "qcow2"}, {Key: "scsi1", File: "/d1", Format: "raw"}, {Key: "virtio0", File: "/d2", Format: "qcow2"}, {Key: "ide2", File: "/ci.iso", CDROM: true}}}
	for _, kvm := range []bool{true, false} {
		line := strings.Join(s.args(kvm), " ")
		want := []string{
			"-m 512", "-smp 1", "-kernel /k -initrd /i", "root=LABEL=" + RootLabel,
			"-device ide-cd,bus=ide.1,drive=drive-ide2", "media=cdrom,readonly=on",
			"-device scsi-hd,bus=scsihw0.0,drive=drive-scsi0,id=scsi0", "-device scsi-hd,bus=scsihw0.0,drive=drive-scsi1,id=scsi1",
			"file=/d1,if=none,id=drive-scsi1,format=raw", "-device virtio-blk-pci,drive=drive-virtio0,id=virtio0",
			"-netdev user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:2222-:22", "mac=BC:24:11:00:00:01",
			"socket,id=qga0,path=/run/vm/qga.sock,server=on,wait=off", "name=org.qemu.guest_agent.0",
			"-qmp unix:/run/vm/qmp.sock,server=on,wait=off", "path=/run/vm/console.log",
		}
		if kvm {
			want = append(want, "-accel kvm -cpu host")
		} else {
			want = append(want, "-accel tcg")
		}
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("kvm=%v: the command line lacks %q:\n%s", kvm, w, line)
			}
		}
		if n := strings.Count(line, "virtio-scsi-pci"); n != 1 {
			t.Errorf("kvm=%v: %d virtio-scsi controllers, want 1", kvm, n)
		}
	}
	s.SSHAddr = "127.3.0.100"
	if line := strings.Join(s.args(true), " "); !strings.Contains(line, "hostfwd=tcp:127.3.0.100:2222-:22") {
		t.Errorf("SSHAddr not forwarded:\n%s", line)
	}
	s.Agent, s.SSHPort = false, 0
	line := strings.Join(s.args(true), " ")
	if strings.Contains(line, "guest_agent") || strings.Contains(line, "hostfwd") {
		t.Errorf("without agent and port the line has them:\n%s", line)
	}
}
