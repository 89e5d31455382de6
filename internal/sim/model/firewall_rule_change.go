package model

import (
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/pvefw"
)

// rulesLocked returns the scope's rules and a setter that stores a new
// list (load_config and save_rules of each Rules.pm class). A CT's and a
// node's config need only the node to exist (load_vmfw_conf reads a file
// that may not be there); a group must exist.
func (fx *firewall) rulesLocked(s RuleScope) ([]FirewallRule, func([]FirewallRule), error) {
	st := fx.state()
	switch s.Env {
	case pvefw.EnvCT:
		if err := fx.nodes.checkNodeLocked(s.Node); err != nil {
			return nil, nil, err
		}
		var rules []FirewallRule
		if fw := st.Firewall[s.VMID]; fw != nil {
			rules = fw.Rules
		}
		return rules, func(next []FirewallRule) {
			if st.Firewall == nil {
				st.Firewall = map[int]*GuestFirewall{}
			}
			if st.Firewall[s.VMID] == nil {
				st.Firewall[s.VMID] = &GuestFirewall{}
			}
			st.Firewall[s.VMID].Rules = next
		}, nil
	case pvefw.EnvHost:
		if err := fx.nodes.checkNodeLocked(s.Node); err != nil {
			return nil, nil, err
		}
		return fx.clusterFirewallView().Hosts[s.Node], func(next []FirewallRule) {
			cf := fx.clusterFirewallLocked()
			if cf.Hosts == nil {
				cf.Hosts = map[string][]FirewallRule{}
			}
			cf.Hosts[s.Node] = next
		}, nil
	case pvefw.EnvGroup:
		g := fx.clusterFirewallView().Groups[s.Group]
		if g == nil {
			return nil, nil, Failf("no such security group '%s'\n", s.Group)
		}
		return g.Rules, func(next []FirewallRule) { g.Rules = next }, nil
	default:
		return fx.clusterFirewallView().Rules, func(next []FirewallRule) { fx.clusterFirewallLocked().Rules = next }, nil
	}
}

// clusterFirewallLocked is the cluster's firewall config, made empty if
// there is none.
func (fx *firewall) clusterFirewallLocked() *ClusterFirewall {
	st := fx.state()
	if st.ClusterFirewall == nil {
		st.ClusterFirewall = &ClusterFirewall{}
	}
	return st.ClusterFirewall
}

// clusterFirewallView is the cluster's firewall config to read: an
// empty one when there is none, which is not stored.
func (fx *firewall) clusterFirewallView() *ClusterFirewall {
	if cf := fx.state().ClusterFirewall; cf != nil {
		return cf
	}
	return &ClusterFirewall{}
}

// ruleRefs answers verify_rule's look-ups: the cluster's IP sets and
// aliases, and a CT's own.
type ruleRefs struct {
	clusterSets, guestSets       map[string]*FirewallIPSet
	clusterAliases, guestAliases map[string]*FirewallAlias
}

func (r ruleRefs) HasIPSet(name string) bool {
	return r.clusterSets[name] != nil || r.guestSets[name] != nil
}

func (r ruleRefs) Alias(scope, name string) (int, bool) {
	if r.clusterAliases[name] == nil && r.guestAliases[name] == nil {
		return 0, false
	}
	var e *FirewallAlias
	if scope != "dc/" {
		e = r.guestAliases[name]
	}
	if e == nil && scope != "guest/" {
		e = r.clusterAliases[name]
	}
	if e == nil {
		return 0, true
	}
	return e.IPv, true
}

func (fx *firewall) ruleRefsLocked(s RuleScope) pvefw.Refs {
	refs := ruleRefs{
		clusterSets:    fx.fwIPSetsLocked(AliasScope{}, false),
		clusterAliases: fx.fwAliasesLocked(AliasScope{}, false),
	}
	if s.Env == pvefw.EnvCT {
		refs.guestSets = fx.fwIPSetsLocked(AliasScope{Node: s.Node, VMID: s.VMID}, false)
		refs.guestAliases = fx.fwAliasesLocked(AliasScope{Node: s.Node, VMID: s.VMID}, false)
	}
	return refs
}

// FirewallRules is GET rules.
func (fx *firewall) FirewallRules(s RuleScope) ([]map[string]any, error) {
	fx.stateMu.RLock()
	defer fx.stateMu.RUnlock()
	rules, _, err := fx.rulesLocked(s)
	if err != nil {
		return nil, err
	}
	return ruleList(rules), nil
}

// FirewallRule is GET rules/{pos}: 500 "no rule at position <pos>" past
// the end.
func (fx *firewall) FirewallRule(s RuleScope, pos int) (map[string]any, error) {
	list, err := fx.FirewallRules(s)
	if err != nil {
		return nil, err
	}
	if pos >= len(list) {
		return nil, Failf("no rule at position %d\n", pos)
	}
	return list[pos], nil
}

// changeRules runs change on a copy of the scope's rules and stores the
// result when it succeeds.
func (fx *firewall) changeRules(s RuleScope, change func(rules []FirewallRule) ([]FirewallRule, error)) error {
	fx.stateMu.Lock()
	defer fx.stateMu.Unlock()
	rules, set, err := fx.rulesLocked(s)
	if err != nil {
		return err
	}
	next, err := change(slices.Clone(rules))
	if err != nil {
		return err
	}
	set(next)
	fx.journal.markCore()
	return fx.journal.saveLocked()
}

// CreateFirewallRule is POST rules (create_rule): the rule is verified
// and put first, whatever pos says (Rules.pm unshifts it; neither pos
// nor digest is looked at); without enable it is disabled.
func (fx *firewall) CreateFirewallRule(s RuleScope, params map[string]string) error {
	return fx.changeRules(s, func(rules []FirewallRule) ([]FirewallRule, error) {
		r := FirewallRule{}
		copyRuleData(&r, params)
		if _, ok := params["enable"]; !ok {
			r.Enable = 0
		}
		if err := fx.verifyRuleLocked(s, &r); err != nil {
			return nil, err
		}
		return append([]FirewallRule{r}, rules...), nil
	})
}

// ruleDigestPos checks update_rule's and delete_rule's digest and pos.
func ruleDigestPos(rules []FirewallRule, digest string, pos int) error {
	if digest != "" && digest != rulesDigest(rules) {
		return Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	if pos >= len(rules) {
		return Failf("no rule at position %d\n", pos)
	}
	return nil
}

// UpdateFirewallRule is PUT rules/{pos} (update_rule): with moveto the
// rule moves before the rule now at moveto (to the end past it) and the
// other parameters are ignored; otherwise the given fields are set, the
// deleted ones dropped and the rule verified again.
func (fx *firewall) UpdateFirewallRule(s RuleScope, pos int, params map[string]string, deletes []string) error {
	return fx.changeRules(s, func(rules []FirewallRule) ([]FirewallRule, error) {
		if err := ruleDigestPos(rules, params["digest"], pos); err != nil {
			return nil, err
		}
		if mv, ok := params["moveto"]; ok {
			moveto, _ := strconv.Atoi(mv)
			if moveto != pos {
				return moveRule(rules, pos, moveto), nil
			}
			return rules, nil
		}
		r := rules[pos]
		copyRuleData(&r, params)
		if err := deleteRuleProperties(&r, deletes); err != nil {
			return nil, err
		}
		r.IPVersion = 0
		if err := fx.verifyRuleLocked(s, &r); err != nil {
			return nil, err
		}
		rules[pos] = r
		return rules, nil
	})
}

// moveRule is update_rule's move: the rule at pos goes before the rule
// at moveto of the old list, or last when moveto is past its end.
func moveRule(rules []FirewallRule, pos, moveto int) []FirewallRule {
	var out []FirewallRule
	for i := range rules {
		if i == pos {
			continue
		}
		if i == moveto {
			out = append(out, rules[pos])
		}
		out = append(out, rules[i])
	}
	if moveto >= len(rules) {
		out = append(out, rules[pos])
	}
	return out
}

// DeleteFirewallRule is DELETE rules/{pos}.
func (fx *firewall) DeleteFirewallRule(s RuleScope, pos int, digest string) error {
	return fx.changeRules(s, func(rules []FirewallRule) ([]FirewallRule, error) {
		if err := ruleDigestPos(rules, digest, pos); err != nil {
			return nil, err
		}
		return slices.Delete(rules, pos, pos+1), nil
	})
}

// renameGroupRefs is the rename of a security group in every rule list
// that refers to it (Groups.pm $rename_fw_rules).
func (fx *firewall) renameGroupRefsLocked(old, name string) {
	st := fx.state()
	rename := func(rules []FirewallRule) {
		for i := range rules {
			if rules[i].Type == "group" && rules[i].Action == old {
				rules[i].Action = name
			}
		}
	}
	for _, fw := range st.Firewall {
		rename(fw.Rules)
	}
	cf := fx.clusterFirewallView()
	for _, rules := range cf.Hosts {
		rename(rules)
	}
	rename(cf.Rules)
}

// lowerName is how the cluster config files a group: by lower-cased name.
func lowerName(s string) string { return strings.ToLower(s) }

// FirewallLog is what /var/log/pve-firewall.log holds for a guest: the
// emulator filters no packets, so nothing. Only the node is checked, as
// the log is read whatever the guest.
func (fx *firewall) FirewallLog(node string, vmid int) ([]string, error) {
	fx.stateMu.RLock()
	defer fx.stateMu.RUnlock()
	return nil, fx.nodes.checkNodeLocked(node)
}
