package sim

import "github.com/corralhq/corral/internal/sim/model"

// Guest firewall routes (pve-firewall PVE/API2/Firewall/VM.pm, mounted
// under a CT at /nodes/{node}/lxc/{vmid}/firewall). The config is
// stored and served; no packet is filtered.

// firewallAPI serves a CT's firewall routes.
type firewallAPI struct {
	cluster *model.Cluster
}

func (a *firewallAPI) register(route routeFunc) {
	route("GET", "/nodes/{node}/lxc/{vmid}/firewall", a.getIndex)
	route("GET", "/nodes/{node}/lxc/{vmid}/firewall/options", a.getOptions)
	route("PUT", "/nodes/{node}/lxc/{vmid}/firewall/options", a.putOptions)
}

// getIndex is VM.pm index: the directory's children, whatever the CT.
func (a *firewallAPI) getIndex(r *request) (any, error) {
	out := []map[string]string{}
	for _, n := range []string{"rules", "aliases", "ipset", "refs", "options"} {
		out = append(out, map[string]string{"name": n})
	}
	return out, nil
}

func (a *firewallAPI) getOptions(r *request) (any, error) {
	return a.cluster.FirewallOptions(r.params["node"], intParam(r, "vmid"))
}

func (a *firewallAPI) putOptions(r *request) (any, error) {
	return nil, a.cluster.SetFirewallOptions(r.params["node"], intParam(r, "vmid"), r.params, splitList(r.params["delete"]))
}
