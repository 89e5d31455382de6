package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/wait"
)

// A VM app's guest work (issue 34) runs through the containers' code
// (guestwork.go, health.go) with a VM's own ways in: its config and
// Notes are the qemu API's, its address is the static ipconfig0 one or
// what its guest agent reports, corral logs in as the cloud-init user
// (vm.user, ciuser) and runs every script through sudo (cloud-init gives
// that user sudo without a password; root may not log in to a cloud
// image), and its host key, which no create task logs for a VM, is
// trusted on first use right after corral created the VM or changed its
// cloud-init data (cloud-init then makes new host keys), and pinned in
// its Notes (corral-hostkey) from then on.

// vmGuestWork runs VM app c's guest work in VM vmid, when the plan says
// it is due. created: corral just created the VM (its host key is
// trusted on first use, every step runs); rekeyed: this run changed its
// cloud-init data and restarted it.
func (e *Executor) vmGuestWork(ctx context.Context, c plan.Change, vmid int, created, rekeyed bool) error {
	if rekeyed && c.Desired != nil && c.Desired.GuestDigest != "" && len(c.Desired.GuestUnknown) == 0 {
		// cloud-init made new host keys: log in now, while corral may
		// trust them, to pin the new one (the steps run as planned, the
		// health checks again), or the next apply would find the pin
		// stale and refuse the VM.
		c.Guest = true
	}
	if !c.Guest {
		return nil
	}
	g := e.guests() // as a VM's guest side
	g.vm, g.rekeyed = true, rekeyed
	return g.runGuest(ctx, c, vmid, created)
}

// vmCloudInitKeys are the config keys qemu-server writes into the
// cloud-init drive's user and network data: a change of any gives the
// guest a new instance-id at its next start, and cloud-init new SSH
// host keys.
var vmCloudInitKeys = []string{"name", "ciuser", "sshkeys", "ipconfig0", "nameserver", "searchdomain", "cipassword"}

// rekeys reports whether update c restarts the VM with new cloud-init
// data.
func rekeys(c plan.Change) bool {
	if !c.Restart && !c.Start {
		return false
	}
	for _, e := range c.Config {
		if slices.Contains(vmCloudInitKeys, e.Key) {
			return true
		}
	}
	return false
}

// withCorralKey is the sshkeys a VM gets: the app's keys and corral's
// own, for its logins (comment "corral", which the plan leaves out of
// its comparison, plan.VMUserKeys).
func withCorralKey(keys []string, corralKey string) []string {
	if corralKey == "" {
		return keys
	}
	return append(slices.Clone(keys), corralKey+" "+plan.CorralKeyComment)
}

func (g *guests) noun() string {
	if g.vm {
		return "vm"
	}
	return "ct"
}

func (g *guests) what() string {
	if g.vm {
		return "VM"
	}
	return "container"
}

// user is who corral logs in as: root in a container, the cloud-init
// user in a VM.
func (g *guests) user(conf map[string]string) string {
	if g.vm && conf["ciuser"] != "" {
		return conf["ciuser"]
	}
	return "root"
}

// guestConfig reads the guest's config as in effect.
func (g *guests) guestConfig(ctx context.Context, node string, vmid int) (map[string]string, error) {
	if !g.vm {
		return containerConfig(ctx, g.client, node, vmid)
	}
	conf, err := g.client.VMConfigOf(ctx, node, vmid, true)
	if err != nil {
		return nil, err
	}
	return conf.Values, nil
}

// putDescription writes the guest's description (its Notes).
func (g *guests) putDescription(ctx context.Context, node string, vmid int, desc string) error {
	if !g.vm {
		return g.putConfig(ctx, node, vmid, &pve.ConfigUpdate{Description: &desc})
	}
	return g.locked().Do(ctx, func() error {
		return g.client.UpdateVMConfig(ctx, node, vmid, &pve.VMConfigUpdate{Set: map[string]string{"description": desc}})
	})
}

// vmAddress is the VM's address: the static one of ipconfig0, else
// what its guest agent reports, waited for up to the connect timeout.
func (g *guests) vmAddress(ctx context.Context, node string, vmid int, conf map[string]string) (string, error) {
	if ip := configAddress(conf["ipconfig0"]); ip != "" {
		return ip, nil
	}
	if conf["agent"] == "" || agentOff(conf["agent"]) {
		return "", fmt.Errorf("vm %d has no static address and no guest agent to report one; give network.ip a static address, or set vm.agent: true", vmid)
	}
	deadline := time.Now().Add(g.connectTimeout())
	var last error
	for {
		ifs, err := g.client.AgentInterfaces(ctx, node, vmid)
		if addr := GuestIPv4(ifs); err == nil && addr != "" {
			return addr, nil
		}
		if pve.IsPermission(err) {
			return "", fmt.Errorf("the token may not ask vm %d's guest agent for its address: %w; grant VM.GuestAgent.Audit (PVE 9) or VM.Monitor (PVE 8) on /vms/%d, or give network.ip a static address", vmid, err, vmid)
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last == nil {
				last = errors.New("it lists no IPv4 address")
			}
			return "", fmt.Errorf("vm %d's guest agent reported no address after %s (%v); give network.ip a static address", vmid, g.connectTimeout(), last)
		}
		if err := wait.Sleep(ctx, VMAddressPoll); err != nil {
			return "", err
		}
	}
}

// agentOff reports whether an agent value ("0", "enabled=0,…") is off.
func agentOff(v string) bool {
	first, _, _ := strings.Cut(v, ",")
	first = strings.TrimPrefix(first, "enabled=")
	return first == "0"
}

// vmHealthTarget is the VM (as the plan.CT that dial takes) whose health
// status can check, or why there is none.
func vmHealthTarget(vms []*plan.VM, checks int) (*plan.CT, string) {
	gs := make([]*plan.CT, len(vms))
	for i, vm := range vms {
		gs[i] = &plan.CT{VMID: vm.VMID, Node: vm.Node, Status: vm.Status, Config: vm.Config}
	}
	return guestHealthTarget(gs, checks, "vm", "VM")
}
