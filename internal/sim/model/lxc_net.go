package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Interface is one network interface of a running CT as GET
// /nodes/{node}/lxc/{vmid}/interfaces reports it. PVE builds the list
// from `ip -json a` inside the CT's network namespace
// (pve-container PVE::LXC::get_interfaces).
type Interface struct {
	Name   string // lo, eth0, …
	HWAddr string // lower case, as ip(8) prints it
	Inet   string // IPv4 "address/prefix", "" when the interface has none
	Inet6  string // global-scope IPv6 "address/prefix", "" when none
	// Addresses is every address of the interface, loopback and host
	// scope included: the "ip-addresses" list of PVE 8.1+.
	Addresses []IPAddress
}

// IPAddress is one entry of an interface's "ip-addresses".
type IPAddress struct {
	Address string // without prefix
	Type    string // inet | inet6
	Prefix  int
}

// CTInterfaces lists the interfaces of CT vmid: lo first, then one per
// netN in index order. It returns nil (JSON null) when the CT is not
// running or does not exist on node: get_interfaces finds no lxc pid and
// returns undef, and the handler loads no config, so PVE answers
// {"data":null} rather than an error.
//
// There is no real network: a netN with ip=dhcp gets the loopback
// address dhcpAddress gives (so that guest endpoints stay on 127/8), a
// static ip=/ip6= is reported as configured, ip=manual reports none.
// IPv6 from SLAAC or DHCPv6 is not emulated.
func (c *Cluster) CTInterfaces(node string, vmid int) ([]Interface, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.checkNodeLocked(node); err != nil {
		return nil, err
	}
	g := c.st.Guests[vmid]
	if g == nil || g.Node != node || !g.Running {
		return nil, nil
	}
	out := []Interface{{
		Name:   "lo",
		HWAddr: "00:00:00:00:00:00",
		Inet:   "127.0.0.1/8",
		Addresses: []IPAddress{
			{Address: "127.0.0.1", Type: "inet", Prefix: 8},
			{Address: "::1", Type: "inet6", Prefix: 128},
		},
	}}
	block := c.guestBlockLocked()
	for _, key := range netKeys(g.Config) {
		n, err := ParseNet(g.Config[key])
		if err != nil {
			continue
		}
		ifc := Interface{Name: n["name"], HWAddr: strings.ToLower(n["hwaddr"])}
		switch ip := n["ip"]; ip {
		case "", "manual":
		case "dhcp":
			ifc.Inet = dhcpAddress(block, vmid) + "/8"
		default:
			ifc.Inet = ip
		}
		if ip6 := n["ip6"]; strings.Contains(ip6, "/") {
			ifc.Inet6 = ip6
		}
		for _, cidr := range []string{ifc.Inet, ifc.Inet6} {
			if a, ok := parseCIDR(cidr); ok {
				ifc.Addresses = append(ifc.Addresses, a)
			}
		}
		out = append(out, ifc)
	}
	return out, nil
}

// Guest addresses. Every CT with ip=dhcp gets an address on loopback
// from its emulator's block: 127.<block>.<vmid/256>.<vmid%256>, where a
// vmid that is a multiple of 256 (which would end in .0) moves to the
// block's twin, 127.<128+block>.<vmid/256>.1. VMIDs are unique in the
// cluster, so one block serves every node. The third octet wraps for
// vmids of 65536 and more.
//
// Blocks keep emulators on one host apart: two emulators whose CTs have
// the same VMIDs must not answer on the same address and port, or a
// client logs into the other emulator's container. The guest layer
// claims a block that no other emulator on the host uses (it holds
// 127.<block>.0.0 on the guests' SSH port, an address no CT gets) and
// sets it with SetGuestBlock.

// Guest blocks are 1..MaxGuestBlock; 0 (127.0.0.1, the nodes' 127.0.0.N)
// and 127 (whose twin would be 127.255) are never used.
const (
	DefaultGuestBlock = 1
	MaxGuestBlock     = 126
)

// SetGuestBlock makes block (1..MaxGuestBlock) the second octet of the
// guests' loopback addresses. Running CTs move to the new addresses.
func (c *Cluster) SetGuestBlock(block int) error {
	if block < 1 || block > MaxGuestBlock {
		return fmt.Errorf("guest address block %d: want 1..%d", block, MaxGuestBlock)
	}
	c.mu.Lock()
	c.guestBlock = block
	c.mu.Unlock()
	return nil
}

// GuestBlock is the block of the guests' loopback addresses.
func (c *Cluster) GuestBlock() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.guestBlockLocked()
}

func (c *Cluster) guestBlockLocked() int {
	if c.guestBlock == 0 {
		return DefaultGuestBlock
	}
	return c.guestBlock
}

// GuestAddress is the loopback address a guest with ip=dhcp gets in
// block: a CT's (above), and a VM's in the guest layer's view runtime
// (internal/sim/guest, vmview.go), whose sshd answers there.
func GuestAddress(block, vmid int) string { return dhcpAddress(block, vmid) }

// dhcpAddress is the address a netN with ip=dhcp gets in block.
func dhcpAddress(block, vmid int) string {
	hi, lo := (vmid>>8)&0xff, vmid&0xff
	if lo == 0 {
		return fmt.Sprintf("127.%d.%d.1", 128+block, hi)
	}
	return fmt.Sprintf("127.%d.%d.%d", block, hi, lo)
}

// parseCIDR splits "address/prefix" into an IPAddress.
func parseCIDR(s string) (IPAddress, bool) {
	addr, prefix, ok := strings.Cut(s, "/")
	if !ok {
		return IPAddress{}, false
	}
	p, err := strconv.Atoi(prefix)
	if err != nil {
		return IPAddress{}, false
	}
	typ := "inet"
	if strings.Contains(addr, ":") {
		typ = "inet6"
	}
	return IPAddress{Address: addr, Type: typ, Prefix: p}, true
}

// netKeys returns the netN keys of conf in numeric order (net2 before net10).
func netKeys(conf map[string]string) []string {
	var keys []string
	for k := range conf {
		if rest, ok := strings.CutPrefix(k, "net"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keyIndex(keys[i]) < keyIndex(keys[j]) })
	return keys
}

// keyIndex is N of an indexed key (mp3 → 3), -1 without an index.
func keyIndex(key string) int {
	i := strings.IndexAny(key, "0123456789")
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(key[i:])
	if err != nil {
		return -1
	}
	return n
}
