package model

import "sort"

// Iface is one entry of a node's /etc/network/interfaces as GET
// /nodes/{node}/network lists it.
type Iface struct {
	Name      string
	Type      string // eth | bridge
	Ports     string // bridge_ports of a bridge
	CIDR      string
	Gateway   string
	Autostart bool
}

// nodeIfaces is every emulated node's network: one NIC and the default
// bridge on it, as a fresh PVE install has. The emulator has no network
// configuration API, so the list is fixed; a netN on any other bridge
// fails at start ("bridge 'X' does not exist"), as on PVE.
func nodeIfaces() []Iface {
	return []Iface{
		{Name: "eno1", Type: "eth"},
		{Name: DefaultBridge, Type: "bridge", Ports: "eno1", CIDR: "192.0.2.10/24", Gateway: "192.0.2.1", Autostart: true},
	}
}

// bridgeExists is what PVE::Network::read_bridge_mtu reads
// (/sys/class/net/<bridge>/mtu): whether the node has that bridge.
func bridgeExists(bridge string) bool {
	for _, i := range nodeIfaces() {
		if i.Name == bridge && (i.Type == "bridge" || i.Type == "OVSBridge") {
			return true
		}
	}
	return false
}

// NetworkList is GET /nodes/{node}/network (pve-manager API2/Network.pm
// index): any user may call it; typ filters by type, any_bridge and
// any_local_bridge keep bridges and OVS bridges (there are no SDN vnets
// here, so include_sdn and vnet add none). Bridges are listed only to
// root@pam and to callers with SDN.Audit or SDN.Use on
// /sdn/zones/localnetwork/<bridge> (check_sdn_bridge).
func (c *Cluster) NetworkList(auth Auth, node, typ string) ([]Iface, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.st.node(node) == nil {
		return nil, Failf("no such node '%s'\n", node)
	}
	var out []Iface
	for _, i := range nodeIfaces() {
		isBridge := i.Type == "bridge" || i.Type == "OVSBridge"
		if typ != "" && typ != "include_sdn" && typ != i.Type && !(isBridge && (typ == "any_bridge" || typ == "any_local_bridge")) {
			continue
		}
		if isBridge && auth.ID() != accessRootUser &&
			c.st.Access.Check(auth, "/sdn/zones/"+DefaultSDNZone+"/"+i.Name, []string{"SDN.Audit", "SDN.Use"}, true) != nil {
			continue
		}
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// checkBridges is the bridge part of update_lxc_config at start:
// read_bridge_mtu of every netN's bridge dies on a missing one.
func checkBridges(conf map[string]string) error {
	keys := make([]string, 0, len(conf))
	for k := range conf {
		if ctKeyIs(k, "net") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		n, err := ParseNet(conf[k])
		if err != nil {
			continue
		}
		if !bridgeExists(n["bridge"]) {
			return Failf("bridge '%s' does not exist\n", n["bridge"])
		}
	}
	return nil
}
