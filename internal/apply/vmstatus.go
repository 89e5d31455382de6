package apply

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// vmStatuses are app a's kind ("ct" or "vm") and, for a VM app, the
// status lines of its VMs, each with its HA state and its address: the static one of its
// config, else what a running VM's guest agent reports ("" when the
// agent does not answer, as with the emulator's state-only runtime).
func vmStatuses(ctx context.Context, c *pve.Client, a *plan.App, vms []*plan.VM) (string, []CTStatus, error) {
	if a.Kind != plan.KindVM {
		return "ct", nil, nil
	}
	out := []CTStatus{}
	for _, vm := range vms {
		ip := configAddress(vm.Config["ipconfig0"])
		if ip == "" && vm.Status == "running" && vm.Config["agent"] != "" && vm.Config["agent"] != "0" {
			ifs, err := c.AgentInterfaces(ctx, vm.Node, vm.VMID)
			if err == nil {
				ip = GuestIPv4(ifs)
			}
		}
		cs := CTStatus{VMID: vm.VMID, Node: vm.Node, Status: vm.Status, Lock: vm.Config["lock"], IP: ip}
		if vm.HA != nil { // an HA resource: the state HA has it in, as for a container
			cs.HAState = vm.HAState
		}
		out = append(out, cs)
	}
	return "vm", out, nil
}

// configAddress is the static IPv4 address of an ipconfigN value
// ("ip=10.0.0.5/24,gw=10.0.0.1"), "" for DHCP or none.
func configAddress(v string) string {
	for _, item := range strings.Split(v, ",") {
		if ip, ok := strings.CutPrefix(item, "ip="); ok && ip != "dhcp" {
			addr, _, _ := strings.Cut(ip, "/")
			return addr
		}
	}
	return ""
}

// MovePhaseVMMigrating is a VM app's move while PVE's qmigrate task
// runs: the VM and its disks go together, there is no carrier.
const MovePhaseVMMigrating = "vm-migrating"

// migrateTarget is qemu-server's first line of a migration's log.
var migrateTarget = lazyre.New(`starting migration of VM \d+ to node '([^']+)'`)

// vmMoveStatus is the move of a VM app while PVE migrates its VM (the
// config's lock is migrate): the target is read from the running
// qmigrate task's log; nil when no migration runs. A move killed before
// or after its migration leaves nothing to show here: the VM is stopped
// on one node with its disks, and the plan says what is left.
func vmMoveStatus(ctx context.Context, c *pve.Client, app string, vm *plan.VM) *MoveStatus {
	if vm.Config["lock"] != "migrate" {
		return nil
	}
	m := &MoveStatus{From: vm.Node, To: "?", Phase: MovePhaseVMMigrating,
		Fix: fmt.Sprintf("PVE's migration task of VM %d runs: the VM and its retained disks go together; wait for it (corral apply, move and drain wait too), then run corral apply to start %s where the manifest wants it", vm.VMID, app)}
	tasks, err := c.TaskList(ctx, vm.Node, pve.TaskFilter{Source: "active"})
	if err != nil {
		return m
	}
	for _, t := range tasks {
		if t.Type != "qmigrate" || t.ID != strconv.Itoa(vm.VMID) || t.EndTime != 0 {
			continue
		}
		lines, _, err := c.TaskLog(ctx, t.UPID, 0, 5)
		if err != nil {
			return m
		}
		for _, l := range lines {
			if to := migrateTarget.FindStringSubmatch(l.T); to != nil {
				m.To = to[1]
				return m
			}
		}
	}
	return m
}
