package model

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/pvefw"
)

// Firewall rules (pve-firewall API2/Firewall/Rules.pm): an ordered list
// in a guest's config, the cluster's, each security group's and each
// node's host.fw, addressed by position. A rule is kept as the config
// file gives it back (parse_fw_rule): enable as 0/1, the macro in its
// preferred spelling, the comment trimmed, the ipversion verify_rule
// found, and of a group rule only action, iface and comment.

// FirewallRule is one rule line.
type FirewallRule struct {
	Type      string `json:"type"`
	Action    string `json:"action"`
	Macro     string `json:"macro,omitempty"`
	Iface     string `json:"iface,omitempty"`
	Source    string `json:"source,omitempty"`
	Dest      string `json:"dest,omitempty"`
	Proto     string `json:"proto,omitempty"`
	Dport     string `json:"dport,omitempty"`
	Sport     string `json:"sport,omitempty"`
	ICMPType  string `json:"icmp-type,omitempty"`
	Log       string `json:"log,omitempty"`
	Comment   string `json:"comment,omitempty"`
	Enable    int    `json:"enable"`
	IPVersion int    `json:"ipversion,omitempty"`
}

// fwRules answers for the rule lists: a guest's, the cluster's, each
// security group's and each node's.
type fwRules struct{ fwParts }

// RuleScope names a rule list: a CT's (Node, VMID), the cluster's, a
// security group's (Group) or a node's host rules (Node).
type RuleScope struct {
	Env   pvefw.Env
	Node  string
	VMID  int
	Group string
}

// ruleFields are a rule's fields by API name, in the sorted order
// copy_list_with_digest hashes them.
var ruleFields = []string{"action", "comment", "dest", "dport", "enable", "icmp-type", "iface", "ipversion", "log", "macro", "proto", "source", "sport", "type"}

// field returns a pointer to the string field named k, nil for enable,
// ipversion and unknown names.
func (r *FirewallRule) field(k string) *string {
	switch k {
	case "type":
		return &r.Type
	case "action":
		return &r.Action
	case "macro":
		return &r.Macro
	case "iface":
		return &r.Iface
	case "source":
		return &r.Source
	case "dest":
		return &r.Dest
	case "proto":
		return &r.Proto
	case "dport":
		return &r.Dport
	case "sport":
		return &r.Sport
	case "icmp-type":
		return &r.ICMPType
	case "log":
		return &r.Log
	case "comment":
		return &r.Comment
	}
	return nil
}

// asMap is the rule as the API lists it: the fields set, enable always.
func (r *FirewallRule) asMap() map[string]any {
	out := map[string]any{"enable": r.Enable}
	if r.IPVersion != 0 {
		out["ipversion"] = r.IPVersion
	}
	for _, k := range ruleFields {
		if p := r.field(k); p != nil && *p != "" {
			out[k] = *p
		}
	}
	return out
}

// rulesDigest is copy_list_with_digest's SHA-1 over each rule's
// "key:value\n" in key order, the rules in order.
func rulesDigest(rules []FirewallRule) string {
	h := sha1.New()
	for i := range rules {
		m := rules[i].asMap()
		for _, k := range ruleFields {
			if v, ok := m[k]; ok {
				fmt.Fprintf(h, "%s:%v\n", k, v)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ruleList is GET rules: each rule with its position and the list's
// digest.
func ruleList(rules []FirewallRule) []map[string]any {
	digest := rulesDigest(rules)
	out := []map[string]any{}
	for i := range rules {
		m := rules[i].asMap()
		m["pos"], m["digest"] = i, digest
		out = append(out, m)
	}
	return out
}

// copyRuleData is copy_rule_data: each rule property given is set, ""
// or "-" clears it. enable is an integer (schema-checked).
func copyRuleData(r *FirewallRule, params map[string]string) {
	for _, k := range ruleFields {
		v, ok := params[k]
		if !ok || k == "ipversion" {
			continue
		}
		if k == "enable" {
			if v == "" || v == "-" {
				r.Enable = 1 // not written: the line reads back enabled
			} else if n, _ := strconv.Atoi(v); n != 0 {
				r.Enable = 1
			} else {
				r.Enable = 0
			}
			continue
		}
		if v == "-" {
			v = ""
		}
		*r.field(k) = v
	}
}

// ruleDeletable are the rule_properties delete may name.
var ruleDeletable = []string{"pos", "digest", "type", "action", "macro", "iface", "source", "dest", "proto", "enable", "log", "sport", "dport", "comment", "icmp-type"}

// deleteRuleProperties is delete_rule_properties.
func deleteRuleProperties(r *FirewallRule, deletes []string) error {
	for _, opt := range deletes {
		if !slices.Contains(ruleDeletable, opt) {
			return ParamError(map[string]string{"delete": "no such property ('" + opt + "')"})
		}
		if opt == "type" || opt == "action" {
			return ParamError(map[string]string{"delete": "unable to delete required property '" + opt + "'"})
		}
		if opt == "enable" {
			r.Enable = 1
		} else if p := r.field(opt); p != nil {
			*p = ""
		}
	}
	return nil
}

// verifyRuleLocked is verify_rule against the scope's sets and aliases;
// on success r is as the file gives it back.
func (fr *fwRules) verifyRuleLocked(s RuleScope, r *FirewallRule) error {
	pr := pvefw.Rule{Type: r.Type, Action: r.Action, Macro: r.Macro, Iface: r.Iface, Source: r.Source, Dest: r.Dest,
		Proto: r.Proto, Dport: r.Dport, Sport: r.Sport, ICMPType: r.ICMPType}
	if err := pvefw.VerifyRule(&pr, s.Env, fr.state().fwRuleRefs(s)); err != nil {
		if err.Field == "" {
			return Failf("%s", err.Msg)
		}
		return ParamError(map[string]string{err.Field: err.Msg})
	}
	r.Macro, r.IPVersion = pr.Macro, pr.IPVersion
	r.Comment = strings.TrimSpace(r.Comment)
	if r.Type == "group" {
		// format_rule writes a group rule's action, iface and comment.
		*r = FirewallRule{Type: r.Type, Action: r.Action, Iface: r.Iface, Comment: r.Comment, Enable: r.Enable}
	}
	return nil
}
