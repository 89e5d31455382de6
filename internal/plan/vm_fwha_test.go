package plan_test

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// TestVMPlan_haAndFirewall (issue 34): a VM app's ha: is refused with
// its disk on local storage; on shared storage an HA VM that HA stopped
// or moved off its pinned node plans nothing (its running state and node
// are HA's); dropping ha: removes the resource and starts the VM; a
// declared firewall puts firewall=1 on net0, and a VM whose net0 lacks
// it is an in-place edit.
func TestVMPlan_haAndFirewall(t *testing.T) {
	a := vmApp()
	a.HA = &plan.HA{State: "started", MaxRestart: 1, MaxRelocate: 1}
	obs := vmConverged()
	obs.SharedStorages = map[string]bool{"nfs": true}
	if _, err := plan.Make([]plan.App{a}, obs); err == nil || !strings.Contains(err.Error(), "app web: ha: vm.disk is on storage local-lvm, which is local to its node") {
		t.Fatalf("ha: on local-lvm: %v", err)
	}

	a.VM.DiskStorage, a.Node = "nfs", "pve"
	obs.Nodes = []string{"pve", "pve2"}
	vm := obs.VMs["web"][0]
	vm.Config = plan.VMConfig(a)
	vm.Config["scsi0"] = "nfs:120/vm-120-disk-0.qcow2,size=8G"
	vm.Node, vm.Status, vm.HAState = "pve2", "stopped", "stopped"
	vm.HA = &plan.HAResource{State: "started", MaxRestart: 1, MaxRelocate: 1}
	if p := must(plan.Make([]plan.App{a}, obs)); p.HasChanges() {
		t.Fatalf("an HA VM where HA put it, stopped: %+v", p)
	}

	b := a
	b.HA, b.Node = nil, "pve2"
	c := onlyChange(t, must(plan.Make([]plan.App{b}, obs)))
	if c.HA == nil || c.HA.Want != nil || !c.Start || c.Action != plan.Update {
		t.Fatalf("dropping ha: %+v", c)
	}

	f := a
	f.Firewall = &plan.Firewall{Options: map[string]string{"enable": "1"}}
	if !strings.HasSuffix(plan.VMConfig(f)["net0"], ",firewall=1") {
		t.Fatalf("net0 with a firewall: %q", plan.VMConfig(f)["net0"])
	}
	vm.Firewall = &plan.ObservedFirewall{Options: map[string]string{"enable": "1"}}
	c = onlyChange(t, must(plan.Make([]plan.App{f}, obs)))
	if c.Action != plan.Update || len(c.Config) != 1 || c.Config[0].Key != "net0" || !strings.Contains(c.Config[0].New, "firewall=1") || !c.Firewall.IsZero() {
		t.Fatalf("a VM whose net0 lacks firewall=1: %+v", c)
	}
}
