package model

import (
	"maps"
	"slices"
	"strings"
)

// Where an HA resource may run: groups (PVE 8, API2/HA/Groups.pm) or,
// since PVE 9 migrated the groups, node-affinity and resource-affinity
// rules (API2/HA/Rules.pm). The CRM (ha_crm.go) reads them through
// haAllowedNodesLocked.

// haRules answers for rules.cfg, and where the CRM may put a service.
type haRules struct{ haParts }

// HARuleEntry is one rule as GET /cluster/ha/rules returns it.
type HARuleEntry struct {
	Affinity  string `json:"affinity,omitempty"`
	Comment   string `json:"comment,omitempty"`
	Digest    string `json:"digest"`
	Disable   int    `json:"disable,omitempty"`
	Nodes     string `json:"nodes,omitempty"`
	Resources string `json:"resources"`
	Rule      string `json:"rule"`
	Strict    int    `json:"strict,omitempty"`
	Type      string `json:"type"`
}

// HARules is GET /cluster/ha/rules, optionally only rules of type typ or
// naming resource.
func (ru *haRules) HARules(typ, resource string) []HARuleEntry {
	ru.stateMu.RLock()
	defer ru.stateMu.RUnlock()
	st := ru.state()
	out := []HARuleEntry{}
	if st.HA == nil {
		return out
	}
	for _, id := range slices.Sorted(maps.Keys(st.HA.Rules)) {
		r := st.HA.Rules[id]
		if (typ != "" && r.Type != typ) || (resource != "" && !slices.Contains(splitList(r.Resources), resource)) {
			continue
		}
		out = append(out, ru.ruleEntryLocked(id, r))
	}
	return out
}

func (ru *haRules) ruleEntryLocked(id string, r *HARule) HARuleEntry {
	st := ru.state()
	return HARuleEntry{Rule: id, Type: r.Type, Resources: r.Resources, Nodes: r.Nodes, Affinity: r.Affinity,
		Strict: b01(r.Strict), Disable: b01(r.Disable), Comment: r.Comment, Digest: haDigest(st.HA.Rules)}
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// HARule is GET /cluster/ha/rules/{rule}.
func (ru *haRules) HARule(id string) (HARuleEntry, error) {
	ru.stateMu.RLock()
	defer ru.stateMu.RUnlock()
	st := ru.state()
	if st.HA == nil || st.HA.Rules[id] == nil {
		return HARuleEntry{}, Failf("no such ha rule '%s'\n", id)
	}
	return ru.ruleEntryLocked(id, st.HA.Rules[id]), nil
}

// SetHARule is POST (create) and PUT /cluster/ha/rules[/{rule}].
// params as the schema has them; del lists keys to clear.
func (ru *haRules) SetHARule(create bool, params map[string]string, del []string, digest string) error {
	ru.stateMu.Lock()
	defer ru.stateMu.Unlock()
	h := ru.state().haConfig()
	if h.Rules == nil {
		h.Rules = map[string]*HARule{}
	}
	id := params["rule"]
	r := h.Rules[id]
	switch {
	case create && r != nil:
		return Failf("HA rule '%s' already defined\n", id)
	case create:
		r = &HARule{Type: params["type"]}
	case r == nil:
		return Failf("HA rule '%s' does not exist\n", id)
	case digest != "" && digest != haDigest(h.Rules):
		return Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	next := *r
	setHARuleFields(&next, params, del)
	if err := ru.checkHARuleLocked(&next); err != nil {
		return err
	}
	h.Rules[id] = &next
	return ru.changedLocked()
}

func setHARuleFields(r *HARule, params map[string]string, del []string) {
	for k, v := range params {
		switch k {
		case "resources":
			r.Resources = v
		case "nodes":
			r.Nodes = v
		case "strict":
			r.Strict = isTrue(v)
		case "affinity":
			r.Affinity = v
		case "disable":
			r.Disable = isTrue(v)
		case "comment":
			r.Comment = v
		}
	}
	for _, k := range del {
		switch k {
		case "nodes":
			r.Nodes = ""
		case "strict":
			r.Strict = false
		case "disable":
			r.Disable = false
		case "comment":
			r.Comment = ""
		}
	}
}

// checkHARuleLocked is Rules.pm's assert_valid_resources_param and
// assert_valid_nodes_param.
func (ru *haRules) checkHARuleLocked(r *HARule) error {
	st := ru.state()
	res := splitList(r.Resources)
	if len(res) == 0 {
		return Failf("no resources were specified\n")
	}
	var unmanaged []string
	for _, sid := range res {
		if st.HA.Resources[sid] == nil {
			unmanaged = append(unmanaged, sid)
		}
	}
	if len(unmanaged) > 0 {
		return Failf("cannot use unmanaged resource(s) %s.\n", strings.Join(unmanaged, ", "))
	}
	if r.Type != "node-affinity" {
		return nil
	}
	nodes := haNodeNames(r.Nodes)
	if len(nodes) == 0 {
		return Failf("no nodes were specified\n")
	}
	var missing []string
	for _, n := range nodes {
		if st.node(n) == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return Failf("cannot use non-existent node(s) %s.\n", strings.Join(missing, ", "))
	}
	return nil
}

// haNodeNames is the node names of a "node[:prio],…" list.
func haNodeNames(list string) []string {
	var out []string
	for _, e := range splitList(list) {
		n, _, _ := strings.Cut(e, ":")
		out = append(out, n)
	}
	return out
}

// DeleteHARule is DELETE /cluster/ha/rules/{rule}.
func (ru *haRules) DeleteHARule(id string) error {
	ru.stateMu.Lock()
	defer ru.stateMu.Unlock()
	st := ru.state()
	if st.HA == nil || st.HA.Rules[id] == nil {
		return Failf("HA rule '%s' does not exist\n", id)
	}
	delete(st.HA.Rules, id)
	return ru.changedLocked()
}

// purgeHARulesLocked drops sid from every rule, and a rule it leaves
// empty (delete_service_from_config with purge).
func (ru *haRules) purgeHARulesLocked(sid string) {
	st := ru.state()
	for id, r := range st.HA.Rules {
		left := slices.DeleteFunc(splitList(r.Resources), func(s string) bool { return s == sid })
		if len(left) == 0 {
			delete(st.HA.Rules, id)
			continue
		}
		r.Resources = strings.Join(left, ",")
	}
}

// haAllowedNodesLocked is where the CRM may put sid: the online nodes,
// narrowed by its group (restricted groups only; an unrestricted group
// only orders) or its enabled strict node-affinity rules. The preferred
// nodes (group members, non-strict rule nodes) come first.
func (ru *haRules) haAllowedNodesLocked(sid string) []string {
	st := ru.state()
	var online []string
	for _, n := range st.Nodes {
		if n.Online {
			online = append(online, n.Name)
		}
	}
	r := st.HA.Resources[sid]
	var prefer []string
	restrict := false
	if r != nil && r.Group != "" && st.HA.Groups[r.Group] != nil {
		g := st.HA.Groups[r.Group]
		prefer, restrict = haNodeNames(g.Nodes), g.Restricted
	}
	for _, rule := range st.HA.Rules {
		if rule.Disable || rule.Type != "node-affinity" || !slices.Contains(splitList(rule.Resources), sid) {
			continue
		}
		prefer, restrict = haNodeNames(rule.Nodes), rule.Strict
	}
	var first, rest []string
	for _, n := range online {
		switch {
		case slices.Contains(prefer, n):
			first = append(first, n)
		case !restrict:
			rest = append(rest, n)
		}
	}
	return append(first, rest...)
}
