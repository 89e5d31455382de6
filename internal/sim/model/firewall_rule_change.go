package model

import (
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/pvefw"
)

// rulesLocked returns the scope's rules and a setter that stores a new
// list (load_config and save_rules of each Rules.pm class). A guest's and a
// node's config need only the node to exist (load_vmfw_conf reads a file
// that may not be there); a group must exist.
func (fr *fwRules) rulesLocked(s RuleScope) ([]FirewallRule, func([]FirewallRule), error) {
	st := fr.state()
	switch {
	case s.Env.Guest():
		if err := fr.nodes.checkNodeLocked(s.Node); err != nil {
			return nil, nil, err
		}
		var rules []FirewallRule
		if fw := st.Firewall[s.VMID]; fw != nil {
			rules = fw.Rules
		}
		return rules, func(next []FirewallRule) { st.guestFirewall(s.VMID).Rules = next }, nil
	case s.Env == pvefw.EnvHost:
		if err := fr.nodes.checkNodeLocked(s.Node); err != nil {
			return nil, nil, err
		}
		return st.clusterFirewallView().Hosts[s.Node], func(next []FirewallRule) {
			cf := st.clusterFirewall()
			if cf.Hosts == nil {
				cf.Hosts = map[string][]FirewallRule{}
			}
			cf.Hosts[s.Node] = next
		}, nil
	case s.Env == pvefw.EnvGroup:
		g := st.clusterFirewallView().Groups[s.Group]
		if g == nil {
			return nil, nil, Failf("no such security group '%s'\n", s.Group)
		}
		return g.Rules, func(next []FirewallRule) { g.Rules = next }, nil
	default:
		return st.clusterFirewallView().Rules, func(next []FirewallRule) { st.clusterFirewall().Rules = next }, nil
	}
}

// ruleRefs answers verify_rule's look-ups: the cluster's IP sets and
// aliases, and a guest's own.
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

// fwRuleRefs answers verify_rule's look-ups for a rule list of scope s:
// the cluster's IP sets and aliases, and a guest's own.
func (st *State) fwRuleRefs(s RuleScope) pvefw.Refs {
	refs := ruleRefs{
		clusterSets:    st.fwIPSets(AliasScope{}, false),
		clusterAliases: st.fwAliases(AliasScope{}, false),
	}
	if s.Env.Guest() {
		refs.guestSets = st.fwIPSets(AliasScope{Node: s.Node, VMID: s.VMID}, false)
		refs.guestAliases = st.fwAliases(AliasScope{Node: s.Node, VMID: s.VMID}, false)
	}
	return refs
}

// FirewallRules is GET rules.
func (fr *fwRules) FirewallRules(s RuleScope) ([]map[string]any, error) {
	fr.stateMu.RLock()
	defer fr.stateMu.RUnlock()
	rules, _, err := fr.rulesLocked(s)
	if err != nil {
		return nil, err
	}
	return ruleList(rules), nil
}

// FirewallRule is GET rules/{pos}: 500 "no rule at position <pos>" past
// the end.
func (fr *fwRules) FirewallRule(s RuleScope, pos int) (map[string]any, error) {
	list, err := fr.FirewallRules(s)
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
func (fr *fwRules) changeRules(s RuleScope, change func(rules []FirewallRule) ([]FirewallRule, error)) error {
	fr.stateMu.Lock()
	defer fr.stateMu.Unlock()
	rules, set, err := fr.rulesLocked(s)
	if err != nil {
		return err
	}
	next, err := change(slices.Clone(rules))
	if err != nil {
		return err
	}
	set(next)
	return fr.saveLocked()
}

// CreateFirewallRule is POST rules (create_rule): the rule is verified
// and put first, whatever pos says (Rules.pm unshifts it; neither pos
// nor digest is looked at); without enable it is disabled.
func (fr *fwRules) CreateFirewallRule(s RuleScope, params map[string]string) error {
	return fr.changeRules(s, func(rules []FirewallRule) ([]FirewallRule, error) {
		r := FirewallRule{}
		copyRuleData(&r, params)
		if _, ok := params["enable"]; !ok {
			r.Enable = 0
		}
		if err := fr.verifyRuleLocked(s, &r); err != nil {
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
func (fr *fwRules) UpdateFirewallRule(s RuleScope, pos int, params map[string]string, deletes []string) error {
	return fr.changeRules(s, func(rules []FirewallRule) ([]FirewallRule, error) {
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
		if err := fr.verifyRuleLocked(s, &r); err != nil {
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
func (fr *fwRules) DeleteFirewallRule(s RuleScope, pos int, digest string) error {
	return fr.changeRules(s, func(rules []FirewallRule) ([]FirewallRule, error) {
		if err := ruleDigestPos(rules, digest, pos); err != nil {
			return nil, err
		}
		return slices.Delete(rules, pos, pos+1), nil
	})
}

// lowerName is how the cluster config files a group: by lower-cased name.
func lowerName(s string) string { return strings.ToLower(s) }
