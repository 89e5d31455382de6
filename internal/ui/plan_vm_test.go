package ui

import (
	"bytes"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// TestPlanVMShortensSSHKeys: a VM app's plan, as text and as -o json,
// names its SSH keys by count and never prints an sshkeys value, in a
// create's settings and in an update's edit (the edit was decoded
// before the change's config was filled, so the whole URL-encoded
// value was printed).
func TestPlanVMShortensSSHKeys(t *testing.T) {
	const body = "AAAAC3NzaC1lZDI1NTE5AAAAIBodyOfTheKey"
	one := "ssh-ed25519%20" + body + "%20me%40laptop%0A"
	two := one + "ssh-rsa%20AAAAB3Other%20you%40desk%0A"
	vm := &plan.App{Name: "web", Kind: plan.KindVM, Cores: 1, MemoryMiB: 1024, Bridge: "vmbr0", IP: "dhcp",
		SSHKeys: []string{"ssh-ed25519 " + body + " me@laptop"},
		VM:      &plan.VMSpec{Image: "local:import/debian.qcow2", DiskStorage: "local-lvm", DiskSize: 8 << 30, User: "debian"}}
	p := &plan.Plan{Changes: []plan.Change{
		{App: "web", Node: "pve", Kind: plan.KindVM, Action: plan.Create, Desired: vm},
		{App: "api", Node: "pve", VMID: 120, Kind: plan.KindVM, Action: plan.Update, Desired: vm,
			Config: []plan.ConfigEdit{{Key: "sshkeys", Old: one, New: two, Restart: true}}},
	}}
	pj := NewPlanJSON(p, nil)
	for name, write := range map[string]func(*bytes.Buffer){
		"text": func(b *bytes.Buffer) { WritePlanText(b, pj) },
		"json": func(b *bytes.Buffer) { WritePlanJSON(b, pj) },
	} {
		var b bytes.Buffer
		write(&b)
		out := b.String()
		if strings.Contains(out, body) || strings.Contains(out, "ssh-ed25519") || strings.Contains(out, "AAAAB3Other") {
			t.Errorf("%s plan prints an SSH key:\n%s", name, out)
		}
		for _, want := range []string{"debian with 1 SSH key", "1 SSH key", "2 SSH keys"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s plan lacks %q:\n%s", name, want, out)
			}
		}
	}
}

// TestKeyCount counts the keys of an sshkeys value however it was
// escaped.
func TestKeyCount(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "0 SSH keys",
		"ssh-ed25519%20A%20c%0A":    "1 SSH key",
		"ssh-ed25519%20A%20c":       "1 SSH key",
		"ssh-rsa%20A%0assh-rsa%20B": "2 SSH keys",
		"k1%0A%0Ak2%0A":             "2 SSH keys",
		"bad%zzescape%0Ak2%0A":      "2 SSH keys",
	} {
		if got := keyCount(in); got != want {
			t.Errorf("keyCount(%q) = %q, want %q", in, got, want)
		}
	}
}
