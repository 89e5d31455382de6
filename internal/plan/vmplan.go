package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/ui/human"
)

// vmKind plans a kind: vm app (planVM) and refuses a container app whose
// name a VM of corral's holds; it reports whether a was handled here.
// The two kinds never turn into each other: that would destroy one guest
// for another, and the user says so by destroying first.
func (m *planner) vmKind(a *App) bool {
	if a.Kind == KindVM {
		m.planVM(a)
		return true
	}
	if vms := m.obs.VMs[a.Name]; len(vms) > 0 {
		m.refuse(fmt.Sprintf("app %s: VM %d on %s is this app's, but the manifest says kind: ct; corral does not turn a VM into a container: write kind: vm, or destroy the VM first (corral destroy %s, with kind: vm)",
			a.Name, vms[0].VMID, vms[0].Node, a.Name))
		return true
	}
	return false
}

// planVM plans a VM app: refused (vmRefusals), created, or compared with
// its VM (vmChange).
func (m *planner) planVM(a *App) {
	obs := m.obs
	if probs := append(vmRefusals(a, obs), haRefusals(a, obs)...); len(probs) > 0 {
		m.refuse(probs...)
		return
	}
	if obs.VMRestores[a.Name] != nil {
		// Planned once the restore is finished or rolled back.
		c := Change{App: a.Name, Kind: KindVM, Action: NoOp, Desired: a}
		if vms := obs.VMs[a.Name]; len(vms) > 0 {
			c.VMID, c.Node = vms[0].VMID, vms[0].Node
		}
		m.p.Changes = append(m.p.Changes, c)
		return
	}
	vms := obs.VMs[a.Name]
	if len(vms) == 0 {
		m.createVM(a)
		return
	}
	vm := vms[0]
	if slices.Contains(obs.Offline, vm.Node) {
		m.p.Changes = append(m.p.Changes, Change{App: a.Name, Kind: KindVM, Node: vm.Node, VMID: vm.VMID, Desired: a})
		m.warn(fmt.Sprintf("app %s: node %s is offline, so corral cannot read its VM %d; the app is left alone until the node is back", a.Name, vm.Node, vm.VMID))
		return
	}
	if vmHAOwned(vm) {
		m.warn(haWarning(a.Name, "VM", vm.VMID, vm.Node, vm.HAState, SIDOf(KindVM, vm.VMID)))
	}
	if a.Node != "" && a.Node != vm.Node && !vmHAOwned(vm) { // HA placed an HA VM
		m.moveVM(a, vm, a.Node) // vmmove.go
		return
	}
	c, probs := vmChange(a, vm)
	vmHA(&c, a, vm)
	if c.Action == Replace {
		probs = append(probs, m.vmNodeProblems(a, vm.Node)...)
	}
	probs = append(probs, vmVolumes(&c, a, vm, c.Action == Replace, obs)...)
	vmVolumeReasons(&c, vm, obs)
	vmFirewall(&c, a, vm)
	m.refuse(probs...)
	if len(probs) == 0 {
		m.p.Changes = append(m.p.Changes, c)
	}
}

// createVM plans a new VM on the node placement gives.
func (m *planner) createVM(a *App) {
	node, placed, err := m.pl.place(a)
	if err != nil {
		m.refuse(err.Error())
		return
	}
	if slices.Contains(m.obs.Offline, node) {
		m.p.Changes = append(m.p.Changes, Change{App: a.Name, Kind: KindVM, Node: node, Desired: a})
		m.warn(fmt.Sprintf("app %s: node %s is offline; its VM is created once the node is back", a.Name, node))
		return
	}
	if probs := m.vmNodeProblems(a, node); len(probs) > 0 {
		m.refuse(probs...)
		return
	}
	c := Change{App: a.Name, Kind: KindVM, Node: node, VMID: a.VMID, Action: Create, Start: true, Desired: a,
		Reasons: []string{fmt.Sprintf("new VM: %d cores, %d MiB, %s disk on %s imported from %s", a.Cores, a.MemoryMiB, human.Size(a.VM.DiskSize), a.VM.DiskStorage, a.VM.Image), VMCost(a)}}
	if placed != "" {
		c.Reasons = append(c.Reasons, placed)
	}
	if probs := vmVolumes(&c, a, nil, false, m.obs); len(probs) > 0 {
		m.refuse(probs...)
		return
	}
	vmVolumeReasons(&c, nil, m.obs)
	vmFirewall(&c, a, nil)
	vmHA(&c, a, nil)
	vmGuest(&c, a, nil)
	if why := vmGuestReason(a); why != "" {
		c.Reasons = append(c.Reasons, why)
	}
	m.p.Changes = append(m.p.Changes, c)
}

// vmHAOwned reports whether vm is an HA resource: its running state
// (and, after a node failure, its node) are HA's.
func vmHAOwned(vm *VM) bool { return vm != nil && vm.HA != nil && vm.HA.State != "ignored" }

// vmHA plans the VM's HA resource as a container's (planHAOf).
func vmHA(c *Change, a *App, vm *VM) {
	var have *HAResource
	status := ""
	if vm != nil && c.Action != Replace {
		have, status = vm.HA, vm.Status
	}
	planHAOf(c, a, have, status, "VM")
}

// vmFirewall plans the VM's firewall as a container's (planFirewall): a
// new VM (or the one a replace makes) gets the app's whole firewall, an
// existing one what differs from it, which makes an otherwise unchanged
// VM's change an update.
func vmFirewall(c *Change, a *App, vm *VM) {
	if vm == nil || c.Action == Replace {
		c.Firewall = planFirewall(a.Firewall, nil)
		return
	}
	if vm.Firewall == nil { // not read: the plan cannot tell, and says nothing
		return
	}
	c.Firewall = planFirewall(a.Firewall, vm.Firewall)
	if c.Firewall == nil {
		return
	}
	if c.Action == NoOp {
		c.Action = Update
	}
	c.Reasons = append(c.Reasons, firewallReasons(c.Firewall)...)
}

// vmNodeProblems are what a new VM cannot have on node: its bridge or
// disk storage missing there, or its pinned VMID held by another guest.
func (m *planner) vmNodeProblems(a *App, node string) []string {
	var probs []string
	prob, warn := bridgeProblem(a, node, m.obs, m.warnedBridges)
	if prob != "" {
		probs = append(probs, prob)
	}
	m.warn(warn)
	if sts := m.obs.Storages[node]; sts != nil {
		if _, ok := sts[a.VM.DiskStorage]; !ok {
			probs = append(probs, fmt.Sprintf("app %s: storage %s is not on node %s for the token (storages there: %s); set vm.disk.storage to one of them",
				a.Name, a.VM.DiskStorage, node, strings.Join(slices.Sorted(maps.Keys(sts)), ", ")))
		}
	}
	if g, ok := m.obs.Others[a.VMID]; ok && a.VMID != 0 {
		probs = append(probs, fmt.Sprintf("app %s: vmid %d is taken by %s %d (%s) on %s; pick another vmid or leave it out", a.Name, a.VMID, g.Type, g.VMID, g.Name, g.Node))
	}
	return probs
}

// vmRefusals are the reasons a VM app cannot be planned: a container of
// corral's holds its name, a VM carries its marker without corral's tags
// (never adopted, never duplicated), it has several VMs, its VM is
// another project's.
func vmRefusals(a *App, obs *Observed) []string {
	var probs []string
	if cts := obs.Apps[a.Name]; len(cts) > 0 {
		probs = append(probs, fmt.Sprintf("app %s: container %d on %s is this app's, but the manifest says kind: vm; corral does not turn a container into a VM: keep kind: ct, or destroy the container first (corral destroy %s, with kind: ct; its retained volumes stay in the keeper)",
			a.Name, cts[0].VMID, cts[0].Node, a.Name))
	}
	for _, vm := range obs.MarkedVMs {
		if ParseMarker(vm.Config["description"]).App == a.Name {
			probs = append(probs, MarkedVMProblem(a.Name, a.Project, vm))
		}
	}
	vms := obs.VMs[a.Name]
	if len(vms) > 1 {
		var ids []string
		for _, vm := range vms {
			ids = append(ids, fmt.Sprintf("%d on %s", vm.VMID, vm.Node))
		}
		probs = append(probs, fmt.Sprintf("app %s has %d VMs tagged as its own (%s): corral does not guess which is the app's; destroy the extra ones, or take corral's tags off them", a.Name, len(vms), strings.Join(ids, ", ")))
	}
	for _, vm := range vms {
		if a.Project != "" && vm.Project != "" && vm.Project != a.Project {
			probs = append(probs, fmt.Sprintf("app %s: VM %d on %s carries the tag %s%s: it is project %s's app, and corral never touches another project's guests; rename this app, or set project: %s",
				a.Name, vm.VMID, vm.Node, TagProjectPrefix, vm.Project, vm.Project, vm.Project))
		}
	}
	return probs
}

// MarkedVMProblem says why a VM whose Notes name app but which lacks
// corral's tags stops the app's plan: the tags were edited away (or the
// VM copied), and adopting it or creating a second VM could both be wrong.
func MarkedVMProblem(app, project string, vm *VM) string {
	tags := TagManaged + ";" + TagAppPrefix + app
	if project != "" {
		tags += ";" + TagProjectPrefix + project
	}
	return fmt.Sprintf("app %s: VM %d on %s carries corral's marker for app %s in its Notes but not corral's tags (edited outside corral?); corral neither adopts it nor creates a second VM: "+
		"if it is the app's VM, put the tags back (qm set %d --tags '%s'), else remove corral's lines from its Notes or destroy it", app, vm.VMID, vm.Node, app, vm.VMID, tags)
}
