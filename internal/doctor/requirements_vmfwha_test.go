package doctor_test

import (
	"slices"
	"testing"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/manifest"
)

// TestRequirements_vmFirewallAndHA (issue 34): a VM app's firewall: is
// read with VM.Audit and written with VM.Config.Network on its /vms
// path, and its ha: needs Sys.Audit and Sys.Console on /, each row
// naming the VM; a VM app without them needs no Sys.Console.
func TestRequirements_vmFirewallAndHA(t *testing.T) {
	vm := func(fw *manifest.Firewall, ha *manifest.HA) *manifest.File {
		return file(app("web", func(a *manifest.App) {
			a.Kind, a.Template = manifest.KindVM, ""
			a.VM = &manifest.VM{Image: manifest.DefaultVMImage, DiskStorage: "local-lvm", DiskSize: 2 * manifest.GiB}
			a.Firewall, a.HA = fw, ha
		}))
	}
	has := func(reqs []doctor.Requirement, path, priv, op string) bool {
		return slices.ContainsFunc(reqs, func(r doctor.Requirement) bool {
			return r.Path == path && r.Priv == priv && r.Operation == op
		})
	}
	reqs := doctor.Requirements(vm(&manifest.Firewall{Enabled: true}, &manifest.HA{State: "started"}), doctor.Targets{DefaultNode: "pve"})
	for _, w := range []struct{ path, priv, op string }{
		{"/vms", "VM.Config.Network", "write the firewall options and rules of the vm of app web"},
		{"/vms", "VM.Audit", "read the firewall options and rules of the vm of app web"},
		{"/", "Sys.Audit", "read the HA resources (ha: of app web)"},
		{"/", "Sys.Console", "make the vm of app web an HA resource"},
	} {
		if !has(reqs, w.path, w.priv, w.op) {
			t.Errorf("no %s on %s to %q in %v", w.priv, w.path, w.op, reqs)
		}
	}
	if reqs := doctor.Requirements(vm(nil, nil), doctor.Targets{DefaultNode: "pve"}); slices.Contains(pathPrivs(reqs)["/"], "Sys.Console") {
		t.Errorf("a VM app without ha: needs Sys.Console: %v", pathPrivs(reqs))
	}
}
