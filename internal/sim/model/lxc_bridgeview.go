package model

import (
	"fmt"
	"strings"
)

// The bridge's view of CT addresses. In the LXC runtime every CT's netN
// is on the emulator's bridge (package sim/guest): a static ip= as set,
// ip=dhcp at BridgeAddress. A client inside a CT reaches other CTs
// there, and not at the host's loopback addresses CTInterfaces reports
// (127/8 is the CT's own loopback), so a request that comes in through
// the bridge gets these.

// BridgeAddress is the address ("a.b.c.d/16") eth0 of CT vmid gets on
// the bridge for ip=dhcp: 10.0.<n/256>.<n%256> with n = vmid%65000+2, so
// never the gateway 10.0.0.1 nor the network's own address.
func BridgeAddress(vmid int) string {
	k := vmid%65000 + 2
	return fmt.Sprintf("10.0.%d.%d/16", k>>8, k&0xff)
}

// CTBridgeInterfaces is CTInterfaces as seen from the bridge: ip=dhcp
// reports BridgeAddress instead of the loopback address.
func (c *Cluster) CTBridgeInterfaces(node string, vmid int) ([]Interface, error) {
	ifs, err := c.CTInterfaces(node, vmid)
	if err != nil || ifs == nil {
		return ifs, err
	}
	c.mu.RLock()
	g := c.st.Guests[vmid]
	dhcp := map[string]bool{}
	if g != nil {
		for _, key := range netKeys(g.Config) {
			if n, err := ParseNet(g.Config[key]); err == nil && n["ip"] == "dhcp" {
				dhcp[n["name"]] = true
			}
		}
	}
	c.mu.RUnlock()
	for i := range ifs {
		if !dhcp[ifs[i].Name] {
			continue
		}
		ifs[i].Inet = BridgeAddress(vmid)
		var addrs []IPAddress
		for _, a := range ifs[i].Addresses {
			if a.Type != "inet" {
				addrs = append(addrs, a)
			}
		}
		if a, ok := parseCIDR(ifs[i].Inet); ok {
			addrs = append([]IPAddress{a}, addrs...)
		}
		ifs[i].Addresses = addrs
	}
	return ifs, nil
}

// GuestBridgeAddresses are the addresses (without prefix) of CT vmid's
// interfaces on the bridge: where other CTs reach it.
func (c *Cluster) GuestBridgeAddresses(vmid int) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.st.Guests[vmid]
	if g == nil {
		return nil
	}
	var out []string
	for _, key := range netKeys(g.Config) {
		n, err := ParseNet(g.Config[key])
		if err != nil || n["name"] == "" {
			continue
		}
		cidr := n["ip"]
		switch {
		case cidr == "dhcp":
			cidr = BridgeAddress(vmid)
		case !strings.Contains(cidr, "/"):
			continue
		}
		if a, ok := parseCIDR(cidr); ok && a.Type == "inet" {
			out = append(out, a.Address)
		}
	}
	return out
}
