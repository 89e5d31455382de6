package model

import (
	"net"
	"sort"
)

// RunningGuest is what the guest layer (package sim/guest) needs to know
// of a running CT to serve its SSH endpoint.
type RunningGuest struct {
	VMID int
	Node string
	// PID is the CT's init PID; it changes with every start, so a reboot
	// shows as a new PID.
	PID int
	// Address is the CT's loopback address for its endpoints: the
	// address of the first netN that has one on 127/8 (ip=dhcp, or a
	// static ip inside 127.0.0.0/8), as GET .../interfaces reports it.
	// "" when the CT has no such interface (no netN, ip=manual, or only
	// static addresses outside loopback, which the emulator never binds).
	Address string
}

// GuestGeneration moves whenever a guest's config or state changes: a
// poller lists RunningGuests again only when it moved (at thousands of
// running CTs the list is not free).
func (c *Cluster) GuestGeneration() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.guestGen
}

// RunningGuests lists the running CTs of every node, by VMID. The guest
// layer polls it to follow starts, stops, reboots and destroys whatever
// code path caused them.
func (c *Cluster) RunningGuests() []RunningGuest {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []RunningGuest
	for vmid, g := range c.st.Guests {
		if !g.Running {
			continue
		}
		rg := RunningGuest{VMID: vmid, Node: g.Node, PID: g.PID}
		rg.Address = guestLoopbackLocked(g, c.guestBlockLocked())
		out = append(out, rg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VMID < out[j].VMID })
	return out
}

// guestLoopbackLocked is the first netN address of g on 127/8, computed
// as CTInterfaces does.
func guestLoopbackLocked(g *Guest, block int) string {
	for _, key := range netKeys(g.Config) {
		n, err := ParseNet(g.Config[key])
		if err != nil {
			continue
		}
		var addr string
		switch ip := n["ip"]; ip {
		case "", "manual":
			continue
		case "dhcp":
			addr = dhcpAddress(block, g.VMID)
		default:
			a, ok := parseCIDR(ip)
			if !ok {
				continue
			}
			addr = a.Address
		}
		if ip := net.ParseIP(addr); ip != nil && ip.To4() != nil && ip.IsLoopback() {
			return addr
		}
	}
	return ""
}

// GuestPID is the init PID of CT vmid while it runs, 0 otherwise: a
// cheap check that an endpoint still serves the same boot.
func (c *Cluster) GuestPID(vmid int) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if g := c.st.Guests[vmid]; g != nil && g.Running {
		return g.PID
	}
	return 0
}

// WithRunningGuest runs fn while CT vmid runs with init PID pid, holding
// the cluster lock so that no stop, and so no destroy, can remove the
// CT's rootfs while fn writes into it. fn must be quick and must not call
// the Cluster. It reports false, without calling fn, when the CT no
// longer runs that boot.
func (c *Cluster) WithRunningGuest(vmid, pid int, fn func() error) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.st.Guests[vmid]
	if g == nil || !g.Running || g.PID != pid {
		return false, nil
	}
	return true, fn()
}
