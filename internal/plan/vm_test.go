package plan_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

func vmApp() plan.App {
	return plan.App{Name: "web", Kind: plan.KindVM, Project: "p", ProjectSet: true, Cores: 2, MemoryMiB: 2048, Bridge: "vmbr0", IP: "dhcp",
		SSHKeys: []string{"ssh-ed25519 AAAAC3Nza me@laptop"},
		VM:      &plan.VMSpec{Image: "local:import/debian-12-corral-vm.qcow2", DiskStorage: "local-lvm", DiskSize: 8 << 30, User: "debian", Agent: true}}
}

// vmConverged is the cluster right after an apply of vmApp(), as PVE
// spells the config back (a MAC in net0, the disk's size).
func vmConverged() *plan.Observed {
	conf := plan.VMConfig(vmApp())
	conf["net0"] = "virtio=BC:24:11:00:00:01,bridge=vmbr0"
	conf["scsi0"] = "local-lvm:vm-120-disk-0,size=8G"
	conf["ide2"] = "local-lvm:vm-120-cloudinit,media=cdrom"
	return &plan.Observed{Nodes: []string{"pve"},
		VMs: map[string][]*plan.VM{"web": {{VMID: 120, Node: "pve", Project: "p", Status: "running", Config: conf, Digest: "d1"}}}}
}

func onlyChange(t *testing.T, p *plan.Plan) plan.Change {
	t.Helper()
	if len(p.Changes) != 1 {
		t.Fatalf("changes = %+v, want one", p.Changes)
	}
	return p.Changes[0]
}

// TestVMPlan: a new VM app is a create that states the memory the host
// reserves (seed 004); the converged VM plans nothing; memory and keys
// change in place with a restart of the running VM; a larger disk grows,
// a smaller one is refused; a new image recreates the VM.
func TestVMPlan(t *testing.T) {
	p, err := plan.Make([]plan.App{vmApp()}, &plan.Observed{Nodes: []string{"pve"}})
	if err != nil {
		t.Fatal(err)
	}
	c := onlyChange(t, p)
	if c.Action != plan.Create || c.Kind != plan.KindVM || !c.Start || !strings.Contains(strings.Join(c.Reasons, "\n"), "vm: 2048 MiB reserved on the host (no ballooning") {
		t.Fatalf("create = %+v", c)
	}
	if p, err = plan.Make([]plan.App{vmApp()}, vmConverged()); err != nil || p.HasChanges() {
		t.Fatalf("converged: %+v, %v", p.Changes, err)
	}
	a := vmApp()
	a.MemoryMiB, a.SSHKeys = 4096, append(a.SSHKeys, "ssh-rsa AAAAB3 other")
	p, err = plan.Make([]plan.App{a}, vmConverged())
	if err != nil {
		t.Fatal(err)
	}
	c = onlyChange(t, p)
	if c.Action != plan.Update || !c.Restart || c.Digest != "d1" || len(c.Config) != 2 || c.Config[0].Key != "memory" || c.Config[1].Key != "sshkeys" {
		t.Fatalf("update = %+v", c)
	}
	a = vmApp()
	a.VM.DiskSize = 16 << 30
	if c = onlyChange(t, must(plan.Make([]plan.App{a}, vmConverged()))); c.Action != plan.Update || c.RootGrow != 16<<30 || c.Restart {
		t.Fatalf("grow = %+v", c)
	}
	a.VM.DiskSize = 4 << 30
	var refused *plan.RefusedError
	if _, err = plan.Make([]plan.App{a}, vmConverged()); !errors.As(err, &refused) || !strings.Contains(err.Error(), "a disk cannot shrink") {
		t.Fatalf("shrink: %v", err)
	}
	a = vmApp()
	a.VM.Image = "local:import/other.qcow2"
	if c = onlyChange(t, must(plan.Make([]plan.App{a}, vmConverged()))); c.Action != plan.Replace || c.OldVMID != 120 {
		t.Fatalf("new image = %+v", c)
	}
}

func must(p *plan.Plan, err error) *plan.Plan {
	if err != nil {
		panic(err)
	}
	return p
}

// TestVMIdentity: a VM whose Notes carry the app's marker without
// corral's tags is refused (neither adopted nor duplicated), as are a
// container under the name of a kind: vm app and a VM under a kind: ct
// app's; a VM of a removed app of this project is destroyed.
func TestVMIdentity(t *testing.T) {
	obs := vmConverged()
	obs.MarkedVMs, obs.VMs = obs.VMs["web"], nil
	_, err := plan.Make([]plan.App{vmApp()}, obs)
	if err == nil || !strings.Contains(err.Error(), "carries corral's marker for app web in its Notes but not corral's tags") || !strings.Contains(err.Error(), "qm set 120 --tags 'corral;corral-app-web;corral-project-p'") {
		t.Fatalf("marked VM: %v", err)
	}
	obs = vmConverged()
	obs.Apps = map[string][]*plan.CT{"web": {{VMID: 105, Node: "pve", Config: map[string]string{}}}}
	if _, err = plan.Make([]plan.App{vmApp()}, obs); err == nil || !strings.Contains(err.Error(), "corral does not turn a container into a VM") {
		t.Fatalf("ct under a vm app: %v", err)
	}
	ct := app()
	ct.Name = "web"
	if _, err = plan.Make([]plan.App{ct}, vmConverged()); err == nil || !strings.Contains(err.Error(), "corral does not turn a VM into a container") {
		t.Fatalf("vm under a ct app: %v", err)
	}
	other := vmApp()
	other.Name = "api"
	p, err := plan.Make([]plan.App{other}, vmConverged())
	if err != nil {
		t.Fatal(err)
	}
	var del *plan.Change
	for i := range p.Changes {
		if p.Changes[i].App == "web" {
			del = &p.Changes[i]
		}
	}
	if del == nil || del.Action != plan.Delete || del.Kind != plan.KindVM || del.OldVMID != 120 {
		t.Fatalf("removed app: %+v", p.Changes)
	}
	d, err := plan.Destroy([]plan.App{vmApp()}, vmConverged(), false)
	if err != nil || len(d.Changes) != 1 || d.Changes[0].Action != plan.Delete || d.Changes[0].Kind != plan.KindVM {
		t.Fatalf("destroy = %+v, %v", d.Changes, err)
	}
}

// TestVMGuestPlan: a VM app's guest work is planned as a container's:
// all of it for a new VM, again when the digest its Notes record
// differs, nothing when it matches; corral's guest lines in the Notes
// and corral's own key in sshkeys are no drift.
func TestVMGuestPlan(t *testing.T) {
	withWork := func() plan.App {
		a := vmApp()
		a.GuestDigest = "g1"
		return a
	}
	const corralKey = "ssh-ed25519 AAAAC3NzaCorral corral"
	observed := func(provisioned string, keys []string) *plan.Observed {
		obs := vmConverged()
		conf := obs.VMs["web"][0].Config
		conf["description"] = plan.WithGuestRecord(plan.VMDescription(withWork()), "ssh-ed25519 AAAAhostkey", provisioned, "")
		k := vmApp()
		k.SSHKeys = keys
		conf["sshkeys"] = plan.VMConfig(k)["sshkeys"] // encoded as PVE stores them
		return obs
	}
	appKeys := vmApp().SSHKeys
	for _, tt := range []struct {
		name   string
		obs    *plan.Observed
		action plan.Action
		guest  bool
	}{
		{"new VM", &plan.Observed{Nodes: []string{"pve"}}, plan.Create, true},
		{"never provisioned", vmConverged(), plan.Update, true},
		{"provisioned, corral's key beside the app's", observed("g1", append(slices.Clone(appKeys), corralKey)), plan.NoOp, false},
		{"work changed", observed("g0", append(slices.Clone(appKeys), corralKey)), plan.Update, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := must(plan.Make([]plan.App{withWork()}, tt.obs))
			if tt.action == plan.NoOp {
				if p.HasChanges() {
					t.Fatalf("changes: %+v", p.Changes)
				}
				return
			}
			c := onlyChange(t, p)
			if c.Action != tt.action || c.Guest != tt.guest || len(c.Config) != 0 {
				t.Fatalf("change = %+v", c)
			}
		})
	}
	// The app drops its keys: corral's own stays, and is no drift.
	a := withWork()
	a.SSHKeys = nil
	if p := must(plan.Make([]plan.App{a}, observed("g1", []string{corralKey}))); p.HasChanges() {
		t.Fatalf("only corral's key left: %+v", p.Changes)
	}
}

// TestVMPlanBIOS: vm.bios ovmf writes bios and machine q35 and adds the
// EFI vars disk to the create's drives on the VM's disk storage; a VM
// that names no bios is seabios's (nothing to change); a change of
// bios recreates the VM; a version-pinned q35 is q35.
func TestVMPlanBIOS(t *testing.T) {
	a := vmApp()
	a.VM.BIOS = "ovmf"
	conf, disks := plan.VMConfig(a), plan.VMCreateDisks(a)
	if conf["bios"] != "ovmf" || conf["machine"] != "q35" || disks["efidisk0"] != "local-lvm:1,efitype=4m,pre-enrolled-keys=1" {
		t.Fatalf("ovmf: config %v, disks %v", conf, disks)
	}
	seabios := vmApp()
	seabios.VM.BIOS = "seabios"
	if conf, disks := plan.VMConfig(seabios), plan.VMCreateDisks(seabios); conf["bios"] != "" || conf["machine"] != "" || disks["efidisk0"] != "" {
		t.Fatalf("seabios: config %v, disks %v", conf, disks)
	}
	if p := must(plan.Make([]plan.App{seabios}, vmConverged())); p.HasChanges() {
		t.Fatalf("seabios over a VM without bios: %+v", p.Changes)
	}
	c := onlyChange(t, must(plan.Make([]plan.App{a}, vmConverged())))
	if c.Action != plan.Replace || c.OldVMID != 120 || !strings.Contains(strings.Join(c.Reasons, "\n"), "bios seabios → ovmf") {
		t.Fatalf("seabios → ovmf = %+v", c)
	}
	obs := vmConverged()
	vm := obs.VMs["web"][0]
	vm.Config["bios"], vm.Config["machine"], vm.Config["efidisk0"] = "ovmf", "pc-q35-9.2", "local-lvm:vm-120-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M"
	if p := must(plan.Make([]plan.App{a}, obs)); p.HasChanges() {
		t.Fatalf("ovmf over its VM: %+v", p.Changes)
	}
	if c := onlyChange(t, must(plan.Make([]plan.App{seabios}, obs))); c.Action != plan.Replace || !strings.Contains(strings.Join(c.Reasons, "\n"), "bios ovmf → seabios") {
		t.Fatalf("ovmf → seabios = %+v", c)
	}
}
