package model

import (
	"testing"
	"time"
)

// specRuntime is a state-only runtime that keeps the last start's spec.
type specRuntime struct{ last VMStartSpec }

func (r *specRuntime) Start(spec VMStartSpec) (int, error) { r.last = spec; return 4242, nil }
func (r *specRuntime) Stop(int) error                      { return nil }
func (r *specRuntime) Shutdown(int, time.Duration) error   { return nil }
func (r *specRuntime) Agent(int, string) (any, error)      { return nil, nil }

// TestVMStartSpec_stateDisks: the runtime is handed only the buses'
// drives: efidisk0 and tpmstate0 are the firmware's, which the real
// runtime's direct kernel boot does without.
func TestVMStartSpec_stateDisks(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	rt := &specRuntime{}
	k.c.SetVMRuntime(rt)
	k.run(k.c.CreateVM(kitRoot, "pve", map[string]string{"vmid": "200", "bios": "ovmf", "scsi0": "local-lvm:1",
		"efidisk0": "local-lvm:1,efitype=4m", "tpmstate0": "local-lvm:1,version=v2.0"}))
	if task := k.run(k.c.StartVM(kitRoot, "pve", 200, nil)); task.ExitStatus != "OK" {
		t.Fatalf("start: %s %v", task.ExitStatus, task.Log)
	}
	if len(rt.last.Disks) != 1 || rt.last.Disks[0].Key != "scsi0" {
		t.Fatalf("the runtime got disks %+v, want scsi0 alone", rt.last.Disks)
	}
}

// TestVMStart_ovmf32Bit: OVMF on a 32-bit CPU model fails the start,
// as config_to_command dies; a 64-bit model starts.
func TestVMStart_ovmf32Bit(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	k.run(k.c.CreateVM(kitRoot, "pve", map[string]string{"vmid": "200", "bios": "ovmf", "cpu": "kvm32", "efidisk0": "local-lvm:1,efitype=4m"}))
	if task := k.run(k.c.StartVM(kitRoot, "pve", 200, nil)); task.ExitStatus != "OVMF (UEFI) BIOS is not supported on 32-bit CPU types" {
		t.Fatalf("start of OVMF on kvm32: %q %v", task.ExitStatus, task.Log)
	}
	k.run(k.c.UpdateVM(kitRoot, "pve", 200, map[string]string{"cpu": "cputype=host"}, true))
	if task := k.run(k.c.StartVM(kitRoot, "pve", 200, nil)); task.ExitStatus != "OK" {
		t.Fatalf("start of OVMF on host: %q %v", task.ExitStatus, task.Log)
	}
}

// TestVMFirmwareWarning: what vm_start warns about the EFI vars.
func TestVMFirmwareWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		conf  map[string]string
		warn  string
		notes int
	}{
		{"seabios", map[string]string{}, "", 0},
		{"ovmf without efidisk0", map[string]string{"bios": "ovmf"}, "no efidisk configured! Using temporary efivars disk.", 0},
		{"a template", map[string]string{"bios": "ovmf", "template": "1"}, "", 0},
		{"keys with the 2023 certificates", map[string]string{"bios": "ovmf", "efidisk0": "local-lvm:vm-1-disk-0,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1"}, "", 0},
		{"keys without them", map[string]string{"bios": "ovmf", "efidisk0": "local-lvm:vm-1-disk-0,efitype=4m,pre-enrolled-keys=1"},
			"EFI disk without 'ms-cert=2023k' option, suggesting that not all UEFI 2023\ncertificates from Microsoft are enrolled yet.", 10},
		{"no keys", map[string]string{"bios": "ovmf", "efidisk0": "local-lvm:vm-1-disk-0,efitype=4m"}, "", 0},
	} {
		warn, notes := vmFirmwareWarning(1, tc.conf)
		if warn != tc.warn || len(notes) != tc.notes {
			t.Errorf("%s: %q with %d lines, want %q with %d", tc.name, warn, len(notes), tc.warn, tc.notes)
		}
	}
}
