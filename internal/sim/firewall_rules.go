package sim

import (
	"strings"

	"github.com/corralhq/corral/internal/pvefw"
	"github.com/corralhq/corral/internal/sim/model"
)

// Firewall rule routes (pve-firewall API2/Firewall/Rules.pm) for a guest,
// the cluster, each security group (Groups.pm) and each node, the
// cluster's options (Cluster.pm) and a CT's firewall log (VM.pm).

// ruleBases are the rule lists' paths and their environments; a group's
// rules are at /cluster/firewall/groups/{group} itself, the others under
// .../rules.
var ruleBases = []struct {
	list, one string
	env       pvefw.Env
}{
	{"/nodes/{node}/lxc/{vmid}/firewall/rules", "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}", pvefw.EnvCT},
	{"/nodes/{node}/qemu/{vmid}/firewall/rules", "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}", pvefw.EnvVM},
	{"/cluster/firewall/rules", "/cluster/firewall/rules/{pos}", pvefw.EnvCluster},
	{"/cluster/firewall/groups/{group}", "/cluster/firewall/groups/{group}/{pos}", pvefw.EnvGroup},
	{"/nodes/{node}/firewall/rules", "/nodes/{node}/firewall/rules/{pos}", pvefw.EnvHost},
}

func (a *firewallAPI) registerRules(route routeFunc) {
	for _, b := range ruleBases {
		env := b.env
		scope := func(r *request) model.RuleScope {
			return model.RuleScope{Env: env, Node: r.params["node"], VMID: intParam(r, "vmid"), Group: r.params["group"]}
		}
		route("GET", b.list, func(r *request) (any, error) { return a.cluster.FirewallRules(scope(r)) })
		route("POST", b.list, func(r *request) (any, error) {
			return nil, a.cluster.CreateFirewallRule(scope(r), r.params)
		})
		route("GET", b.one, func(r *request) (any, error) {
			return a.cluster.FirewallRule(scope(r), intParam(r, "pos"))
		})
		route("PUT", b.one, func(r *request) (any, error) {
			return nil, a.cluster.UpdateFirewallRule(scope(r), intParam(r, "pos"), r.params, splitList(r.params["delete"]))
		})
		route("DELETE", b.one, func(r *request) (any, error) {
			return nil, a.cluster.DeleteFirewallRule(scope(r), intParam(r, "pos"), r.params["digest"])
		})
	}
	route("GET", "/cluster/firewall/groups", func(r *request) (any, error) { return a.cluster.FirewallGroups(), nil })
	route("POST", "/cluster/firewall/groups", a.postGroup)
	route("DELETE", "/cluster/firewall/groups/{group}", func(r *request) (any, error) {
		return nil, a.cluster.DeleteFirewallGroup(r.params["group"])
	})
	route("GET", "/cluster/firewall/options", func(r *request) (any, error) { return a.cluster.ClusterFirewallOptions(), nil })
	route("PUT", "/cluster/firewall/options", func(r *request) (any, error) {
		return nil, a.cluster.SetClusterFirewallOptions(r.params, splitList(r.params["delete"]))
	})
}

func (a *firewallAPI) postGroup(r *request) (any, error) {
	ch := model.GroupChange{Group: r.params["group"], Rename: r.params["rename"], Digest: r.params["digest"]}
	if c, ok := r.params["comment"]; ok {
		ch.Comment = &c
	}
	return nil, a.cluster.CreateFirewallGroup(ch)
}

// getLog is VM.pm's log through dump_logfile: lines "<vmid> …" of the
// firewall log from start, limit of them (50 by default, 0 for all),
// with the count as total; an empty log reads as one line "no content"
// (dump_logfile's answer for ExtJS). since and until filter by time in
// PVE; the emulator's log has no lines to filter.
func (a *firewallAPI) getLog(r *request) (any, error) {
	lines, err := a.cluster.FirewallLog(r.params["node"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	start, limit := intParam(r, "start"), 50
	if _, ok := r.params["limit"]; ok {
		limit = intParam(r, "limit")
	}
	out := []map[string]any{}
	for i := start; i < len(lines) && (limit == 0 || i < start+limit); i++ {
		out = append(out, map[string]any{"n": i + 1, "t": strings.TrimRight(lines[i], "\n")})
	}
	if len(lines) == 0 {
		return pagedResult{data: []map[string]any{{"n": 1, "t": "no content"}}, total: 1}, nil
	}
	return pagedResult{data: out, total: len(lines)}, nil
}
