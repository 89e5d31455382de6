package sim

import "strings"

// getNetwork is GET /nodes/{node}/network (pve-manager API2/Network.pm
// index), the rows /etc/network/interfaces gives for the emulated node.
func (a *clusterAPI) getNetwork(r *request) (any, error) {
	ifaces, err := a.cluster.NetworkList(r.auth, r.params["node"], r.params["type"])
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for i, f := range ifaces {
		row := map[string]any{
			"iface": f.Name, "type": f.Type, "active": 1, "exists": 1,
			"families": []string{"inet"}, "method": "manual", "method6": "manual", "priority": i + 1,
		}
		if f.Autostart {
			row["autostart"] = 1
		}
		if f.Type == "bridge" {
			delete(row, "exists") // only physical devices have it
			row["bridge_ports"] = f.Ports
			row["options"] = []string{"bridge-stp off", "bridge-fd 0"}
		}
		if f.CIDR != "" {
			addr, bits, _ := strings.Cut(f.CIDR, "/")
			row["method"], row["cidr"], row["address"] = "static", f.CIDR, addr
			row["netmask"] = bits
			row["gateway"] = f.Gateway
		}
		out = append(out, row)
	}
	return out, nil
}
