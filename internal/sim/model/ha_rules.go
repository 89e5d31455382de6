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
func (hm *haManager) HARules(typ, resource string) []HARuleEntry {
	hm.stateMu.RLock()
	defer hm.stateMu.RUnlock()
	st := hm.state()
	out := []HARuleEntry{}
	if st.HA == nil {
		return out
	}
	for _, id := range slices.Sorted(maps.Keys(st.HA.Rules)) {
		r := st.HA.Rules[id]
		if (typ != "" && r.Type != typ) || (resource != "" && !slices.Contains(splitList(r.Resources), resource)) {
			continue
		}
		out = append(out, hm.ruleEntryLocked(id, r))
	}
	return out
}

func (hm *haManager) ruleEntryLocked(id string, r *HARule) HARuleEntry {
	st := hm.state()
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
func (hm *haManager) HARule(id string) (HARuleEntry, error) {
	hm.stateMu.RLock()
	defer hm.stateMu.RUnlock()
	st := hm.state()
	if st.HA == nil || st.HA.Rules[id] == nil {
		return HARuleEntry{}, Failf("no such ha rule '%s'\n", id)
	}
	return hm.ruleEntryLocked(id, st.HA.Rules[id]), nil
}

// SetHARule is POST (create) and PUT /cluster/ha/rules[/{rule}].
// params as the schema has them; del lists keys to clear.
func (hm *haManager) SetHARule(create bool, params map[string]string, del []string, digest string) error {
	hm.stateMu.Lock()
	defer hm.stateMu.Unlock()
	h := hm.haLocked()
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
	if err := hm.checkHARuleLocked(&next); err != nil {
		return err
	}
	h.Rules[id] = &next
	hm.journal.markCore()
	hm.kickCRM()
	return hm.journal.saveLocked()
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
func (hm *haManager) checkHARuleLocked(r *HARule) error {
	st := hm.state()
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
func (hm *haManager) DeleteHARule(id string) error {
	hm.stateMu.Lock()
	defer hm.stateMu.Unlock()
	st := hm.state()
	if st.HA == nil || st.HA.Rules[id] == nil {
		return Failf("HA rule '%s' does not exist\n", id)
	}
	delete(st.HA.Rules, id)
	hm.journal.markCore()
	hm.kickCRM()
	return hm.journal.saveLocked()
}

// purgeHARulesLocked drops sid from every rule, and a rule it leaves
// empty (delete_service_from_config with purge).
func (hm *haManager) purgeHARulesLocked(sid string) {
	st := hm.state()
	for id, r := range st.HA.Rules {
		left := slices.DeleteFunc(splitList(r.Resources), func(s string) bool { return s == sid })
		if len(left) == 0 {
			delete(st.HA.Rules, id)
			continue
		}
		r.Resources = strings.Join(left, ",")
	}
}

// HAGroupEntry is one group as GET /cluster/ha/groups returns it (8.4).
type HAGroupEntry struct {
	Comment    string `json:"comment,omitempty"`
	Digest     string `json:"digest"`
	Group      string `json:"group"`
	NoFailback int    `json:"nofailback,omitempty"`
	Nodes      string `json:"nodes"`
	Restricted int    `json:"restricted,omitempty"`
	Type       string `json:"type"`
}

// errGroupsMigrated is 9.x's answer to every group call but DELETE's
// (have_groups_been_migrated: the groups are gone into rules).
func (hm *haManager) errGroupsMigrated(what string) error {
	if hm.version == "8.4" {
		return nil
	}
	return Failf("cannot %s: ha groups have been migrated to rules\n", what)
}

// HAGroups is GET /cluster/ha/groups.
func (hm *haManager) HAGroups() ([]HAGroupEntry, error) {
	st := hm.state()
	if err := hm.errGroupsMigrated("index groups"); err != nil {
		return nil, err
	}
	hm.stateMu.RLock()
	defer hm.stateMu.RUnlock()
	out := []HAGroupEntry{}
	if st.HA == nil {
		return out, nil
	}
	for _, id := range slices.Sorted(maps.Keys(st.HA.Groups)) {
		out = append(out, hm.groupEntryLocked(id))
	}
	return out, nil
}

func (hm *haManager) groupEntryLocked(id string) HAGroupEntry {
	st := hm.state()
	g := st.HA.Groups[id]
	return HAGroupEntry{Group: id, Type: "group", Nodes: g.Nodes, Restricted: b01(g.Restricted), NoFailback: b01(g.NoFailback),
		Comment: g.Comment, Digest: haDigest(st.HA.Groups)}
}

// HAGroup is GET /cluster/ha/groups/{group}.
func (hm *haManager) HAGroup(id string) (HAGroupEntry, error) {
	st := hm.state()
	if err := hm.errGroupsMigrated("read group"); err != nil {
		return HAGroupEntry{}, err
	}
	hm.stateMu.RLock()
	defer hm.stateMu.RUnlock()
	if st.HA == nil || st.HA.Groups[id] == nil {
		return HAGroupEntry{}, Failf("no such ha group '%s'\n", id)
	}
	return hm.groupEntryLocked(id), nil
}

// SetHAGroup is POST (create) and PUT /cluster/ha/groups[/{group}].
func (hm *haManager) SetHAGroup(create bool, params map[string]string, del []string) error {
	what := "update group"
	if create {
		what = "create group"
	}
	if err := hm.errGroupsMigrated(what); err != nil {
		return err
	}
	hm.stateMu.Lock()
	defer hm.stateMu.Unlock()
	h := hm.haLocked()
	if h.Groups == nil {
		h.Groups = map[string]*HAGroup{}
	}
	id := params["group"]
	g := h.Groups[id]
	switch {
	case create && g != nil:
		return Failf("create ha group failed: ha group ID '%s' already defined\n", id)
	case create:
		g = &HAGroup{}
	case g == nil:
		return Failf("update ha group failed: no such ha group '%s'\n", id)
	}
	next := *g
	if v, ok := params["nodes"]; ok {
		next.Nodes = v
	}
	if v, ok := params["restricted"]; ok {
		next.Restricted = isTrue(v)
	}
	if v, ok := params["nofailback"]; ok {
		next.NoFailback = isTrue(v)
	}
	if v, ok := params["comment"]; ok {
		next.Comment = v
	}
	for _, k := range del {
		switch k {
		case "restricted":
			next.Restricted = false
		case "nofailback":
			next.NoFailback = false
		case "comment":
			next.Comment = ""
		}
	}
	h.Groups[id] = &next
	hm.journal.markCore()
	hm.kickCRM()
	return hm.journal.saveLocked()
}

// DeleteHAGroup is DELETE /cluster/ha/groups/{group}.
func (hm *haManager) DeleteHAGroup(id string) error {
	hm.stateMu.Lock()
	defer hm.stateMu.Unlock()
	st := hm.state()
	if st.HA == nil || st.HA.Groups[id] == nil {
		return Failf("delete ha group failed: no such ha group '%s'\n", id)
	}
	for sid, r := range st.HA.Resources {
		if r.Group == id {
			return Failf("delete ha group failed: ha group '%s' is used by %s\n", id, sid)
		}
	}
	delete(st.HA.Groups, id)
	hm.journal.markCore()
	return hm.journal.saveLocked()
}

// haAllowedNodesLocked is where the CRM may put sid: the online nodes,
// narrowed by its group (restricted groups only; an unrestricted group
// only orders) or its enabled strict node-affinity rules. The preferred
// nodes (group members, non-strict rule nodes) come first.
func (hm *haManager) haAllowedNodesLocked(sid string) []string {
	st := hm.state()
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
