package apply

import (
	"context"
	"strings"

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
