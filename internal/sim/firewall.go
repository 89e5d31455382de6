package sim

import (
	"github.com/corralhq/corral/internal/pvefw"
	"github.com/corralhq/corral/internal/sim/model"
)

// Firewall routes (pve-firewall PVE/API2/Firewall/VM.pm, mounted under a
// CT at /nodes/{node}/lxc/{vmid}/firewall and under a VM at
// /nodes/{node}/qemu/{vmid}/firewall, and Aliases.pm for the cluster's
// and a guest's aliases). The config is
// stored and served; no packet is filtered. Rules, security groups and
// the cluster's options are in firewall_rules.go.

// firewallAPI serves a guest's firewall and the cluster's aliases.
type firewallAPI struct {
	cluster *model.Cluster
}

// guestFirewalls are the two guest kinds' firewall directories: the
// same VMBase handlers under each (VM.pm registers them for
// PVE::API2::Firewall::VM and ::CT), with the rule list's own rule_env.
var guestFirewalls = []struct {
	base string
	env  pvefw.Env
}{
	{"/nodes/{node}/lxc/{vmid}/firewall", pvefw.EnvCT},
	{"/nodes/{node}/qemu/{vmid}/firewall", pvefw.EnvVM},
}

func (a *firewallAPI) register(route routeFunc) {
	aliasBases, ipsetBases := []string{"/cluster/firewall/aliases"}, []string{"/cluster/firewall/ipset"}
	for _, g := range guestFirewalls {
		route("GET", g.base, a.getIndex)
		route("GET", g.base+"/options", a.getOptions)
		route("PUT", g.base+"/options", a.putOptions)
		route("GET", g.base+"/refs", a.getRefs)
		route("GET", g.base+"/log", a.getLog)
		aliasBases = append(aliasBases, g.base+"/aliases")
		ipsetBases = append(ipsetBases, g.base+"/ipset")
	}
	a.registerRules(route)
	for _, base := range aliasBases {
		route("GET", base, a.getAliases)
		route("POST", base, a.postAlias)
		route("GET", base+"/{name}", a.getAlias)
		route("PUT", base+"/{name}", a.putAlias)
		route("DELETE", base+"/{name}", a.deleteAlias)
	}
	for _, base := range ipsetBases {
		route("GET", base, a.getIPSets)
		route("POST", base, a.postIPSet)
		route("GET", base+"/{name}", a.getIPSet)
		route("POST", base+"/{name}", a.postIPSetEntry)
		route("DELETE", base+"/{name}", a.deleteIPSet)
		route("GET", base+"/{name}/{cidr}", a.getIPSetEntry)
		route("PUT", base+"/{name}/{cidr}", a.putIPSetEntry)
		route("DELETE", base+"/{name}/{cidr}", a.deleteIPSetEntry)
	}
}

func (a *firewallAPI) getIPSets(r *request) (any, error) { return a.cluster.IPSets(aliasScope(r)) }

func (a *firewallAPI) getIPSet(r *request) (any, error) {
	return a.cluster.IPSet(aliasScope(r), r.params["name"])
}

func (a *firewallAPI) postIPSet(r *request) (any, error) {
	ch := model.IPSetChange{Name: r.params["name"], Rename: r.params["rename"], Digest: r.params["digest"]}
	if c, ok := r.params["comment"]; ok {
		ch.Comment = &c
	}
	return nil, a.cluster.CreateIPSet(aliasScope(r), ch)
}

func (a *firewallAPI) deleteIPSet(r *request) (any, error) {
	return nil, a.cluster.DeleteIPSet(aliasScope(r), r.params["name"], boolParam(r, "force"))
}

func ipsetEntry(r *request) model.IPSetEntry {
	return model.IPSetEntry{Name: r.params["name"], CIDR: r.params["cidr"], Comment: r.params["comment"], Digest: r.params["digest"], NoMatch: boolParam(r, "nomatch")}
}

func (a *firewallAPI) postIPSetEntry(r *request) (any, error) {
	return nil, a.cluster.AddIPSetEntry(aliasScope(r), ipsetEntry(r))
}

func (a *firewallAPI) getIPSetEntry(r *request) (any, error) {
	return a.cluster.IPSetEntryInfo(aliasScope(r), r.params["name"], r.params["cidr"])
}

func (a *firewallAPI) putIPSetEntry(r *request) (any, error) {
	return nil, a.cluster.UpdateIPSetEntry(aliasScope(r), ipsetEntry(r))
}

func (a *firewallAPI) deleteIPSetEntry(r *request) (any, error) {
	return nil, a.cluster.DeleteIPSetEntry(aliasScope(r), r.params["name"], r.params["cidr"], r.params["digest"])
}

func (a *firewallAPI) getRefs(r *request) (any, error) {
	return a.cluster.FirewallRefs(r.params["node"], intParam(r, "vmid"), r.params["type"])
}

// aliasScope is the cluster's aliases, or with a vmid in the path a
// CT's.
func aliasScope(r *request) model.AliasScope {
	return model.AliasScope{Node: r.params["node"], VMID: intParam(r, "vmid")}
}

func (a *firewallAPI) getAliases(r *request) (any, error) {
	return a.cluster.Aliases(aliasScope(r))
}

func (a *firewallAPI) getAlias(r *request) (any, error) {
	return a.cluster.Alias(aliasScope(r), r.params["name"])
}

func aliasChange(r *request) model.AliasChange {
	return model.AliasChange{Name: r.params["name"], CIDR: r.params["cidr"], Comment: r.params["comment"], Rename: r.params["rename"], Digest: r.params["digest"]}
}

func (a *firewallAPI) postAlias(r *request) (any, error) {
	return nil, a.cluster.AddAlias(aliasScope(r), aliasChange(r))
}

func (a *firewallAPI) putAlias(r *request) (any, error) {
	return nil, a.cluster.UpdateAlias(aliasScope(r), aliasChange(r))
}

func (a *firewallAPI) deleteAlias(r *request) (any, error) {
	return nil, a.cluster.DeleteAlias(aliasScope(r), r.params["name"], r.params["digest"])
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
