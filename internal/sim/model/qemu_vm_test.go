package model

import "testing"

// TestVMConfigText: the config file as qemu-server's write_vm_config
// writes it (the description as comment lines first, the keys sorted,
// then [PENDING] with its delete line, a forced delete marked '!'), and
// the digest changes with any of it.
func TestVMConfigText(t *testing.T) {
	t.Parallel()
	vm := &VM{VMID: 100, Config: map[string]string{"name": "web", "description": "two\nlines", "cores": "2", "scsi0": "local-lvm:vm-100-disk-0,size=4G"}}
	want := "#two\n#lines\ncores: 2\nname: web\nscsi0: local-lvm:vm-100-disk-0,size=4G\n"
	if got := vmConfigText(vm); got != want {
		t.Fatalf("config text:\n%s\nwant:\n%s", got, want)
	}
	before := vmDigest(vm)
	vm.Pending = map[string]string{"memory": "2048"}
	vm.PendingDelete = map[string]bool{"name": false, "agent": true}
	want += "\n[PENDING]\ndelete: !agent,name\nmemory: 2048\n"
	if got := vmConfigText(vm); got != want {
		t.Fatalf("config text with pending:\n%s\nwant:\n%s", got, want)
	}
	if vmDigest(vm) == before || len(before) != 40 {
		t.Fatalf("digest %q did not change with the pending section (%q)", before, vmDigest(vm))
	}
}

// TestVMNetWithMAC: a NIC without a MAC gets one with Proxmox's prefix
// under its model's key; one with a MAC keeps it.
func TestVMNetWithMAC(t *testing.T) {
	t.Parallel()
	got := vmNetWithMAC("virtio,bridge=vmbr0,firewall=1")
	if len(got) != len("virtio=BC:24:11:00:00:00,bridge=vmbr0,firewall=1") || got[:16] != "virtio=BC:24:11:" || got[24:] != ",bridge=vmbr0,firewall=1" {
		t.Fatalf("vmNetWithMAC = %q", got)
	}
	if got := vmNetWithMAC("e1000=AA:BB:CC:DD:EE:FF,bridge=vmbr0"); got != "e1000=AA:BB:CC:DD:EE:FF,bridge=vmbr0" {
		t.Fatalf("vmNetWithMAC kept MAC = %q", got)
	}
}
