package pve_test

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

// TestVMCreateEncode: the create body carries the keys as given, the SSH
// keys percent-encoded one a line (%20 for a space, as qemu-server's
// uri_unescape reads them, never '+'), start and pool only when set.
func TestVMCreateEncode(t *testing.T) {
	vc := pve.VMCreate{VMID: 120,
		Disks:   map[string]string{"scsi0": "local-lvm:0,import-from=local:import/debian-12-corral-vm.qcow2", "ide2": "local-lvm:cloudinit"},
		SSHKeys: []string{"ssh-ed25519 AAAAC3Nza me@laptop", " ssh-rsa AAAAB3+x/y= other "},
		Config:  map[string]string{"name": "web", "agent": "1", "net0": "virtio,bridge=vmbr0", "ciuser": "debian"},
	}
	got := vc.Encode()
	want := url.Values{"vmid": {"120"}, "name": {"web"}, "agent": {"1"}, "net0": {"virtio,bridge=vmbr0"}, "ciuser": {"debian"},
		"scsi0": {"local-lvm:0,import-from=local:import/debian-12-corral-vm.qcow2"}, "ide2": {"local-lvm:cloudinit"},
		"sshkeys": {"ssh-ed25519%20AAAAC3Nza%20me%40laptop%0Assh-rsa%20AAAAB3%2Bx%2Fy%3D%20other%0A"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("encode (-want +got):\n%s", d)
	}
	vc.Start, vc.Pool = true, "apps"
	if got := vc.Encode(); got.Get("start") != "1" || got.Get("pool") != "apps" {
		t.Fatalf("start/pool = %q/%q", got.Get("start"), got.Get("pool"))
	}
	keys, err := pve.DecodeSSHKeys(want.Get("sshkeys"))
	if err != nil || !cmp.Equal(keys, []string{"ssh-ed25519 AAAAC3Nza me@laptop", "ssh-rsa AAAAB3+x/y= other"}) {
		t.Fatalf("decode = %q, %v", keys, err)
	}
	if _, err := pve.DecodeSSHKeys("ssh-rsa%zz"); err == nil {
		t.Fatal("a malformed escape decoded")
	}
}

// TestVMConfigUpdateEncode: delete and revert are comma lists, the
// digest is sent only when set.
func TestVMConfigUpdateEncode(t *testing.T) {
	u := pve.VMConfigUpdate{Set: map[string]string{"memory": "2048"}, Delete: []string{"balloon", "ipconfig1"}, Revert: []string{"cores"}, Digest: "abc"}
	want := url.Values{"memory": {"2048"}, "delete": {"balloon,ipconfig1"}, "revert": {"cores"}, "digest": {"abc"}}
	if d := cmp.Diff(want, u.Encode()); d != "" {
		t.Fatalf("encode (-want +got):\n%s", d)
	}
	if got := (&pve.VMConfigUpdate{}).Encode(); len(got) != 0 {
		t.Fatalf("an empty update encodes %v", got)
	}
}
