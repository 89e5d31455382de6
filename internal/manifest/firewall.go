package manifest

import (
	"strings"

	"github.com/corralhq/corral/internal/pvefw"
)

// Firewall is an app's firewall: (spec_firewall.go).
type Firewall struct {
	Enabled bool
	// PolicyIn, PolicyOut, LogLevelIn and LogLevelOut are "" for PVE's
	// default.
	PolicyIn, PolicyOut     string
	LogLevelIn, LogLevelOut string
	Rules                   []FirewallRule
}

// FirewallRule is one rule, its fields as PVE names them ("" for unset).
type FirewallRule struct {
	Type, Action, Macro, Proto string
	Dport, Sport, Source, Dest string
	ICMPType, Iface, Log       string
	Comment                    string
	Enabled                    bool
	Pos                        Pos
}

// ruleKeys maps verify_rule's parameter names to the manifest's keys.
var ruleKeys = map[string]string{"icmp-type": "icmp_type"}

// buildFirewall reads an app's firewall:, nil when it is not written,
// and checks each rule as PVE's verify_rule would for a container
// (which IP sets and aliases exist is PVE's to say, at apply).
func (d *decoder) buildFirewall(app *value) *Firewall {
	fv := app.member("firewall")
	if fv == nil {
		return nil
	}
	fw := &Firewall{Enabled: fv.boolOr("enabled"), PolicyIn: fv.strOr("policy_in"), PolicyOut: fv.strOr("policy_out"),
		LogLevelIn: fv.strOr("log_level_in"), LogLevelOut: fv.strOr("log_level_out")}
	for _, rv := range fv.members("rules") {
		if !rv.ok || !membersOK(rv) {
			continue // reported where it is wrong
		}
		r := FirewallRule{Type: rv.strOr("type"), Action: rv.strOr("action"), Macro: rv.strOr("macro"), Proto: rv.strOr("proto"),
			Dport: rv.strOr("dport"), Sport: rv.strOr("sport"), Source: rv.strOr("source"), Dest: rv.strOr("dest"),
			ICMPType: rv.strOr("icmp_type"), Iface: rv.strOr("iface"), Log: rv.strOr("log"), Comment: rv.strOr("comment"),
			Enabled: rv.boolOr("enabled"), Pos: d.pos(rv.node)}
		pr := pvefw.Rule{Type: r.Type, Action: r.Action, Macro: r.Macro, Iface: r.Iface, Source: r.Source, Dest: r.Dest,
			Proto: r.Proto, Dport: r.Dport, Sport: r.Sport, ICMPType: r.ICMPType}
		if err := pvefw.VerifyRule(&pr, pvefw.EnvCT, nil); err != nil {
			at, what := ruleErrorAt(rv, err)
			d.report(at.node, at.path, what, "")
			continue
		}
		fw.Rules = append(fw.Rules, r)
	}
	return fw
}

// ruleErrorAt is where verify_rule's error is reported (the key it
// names, where the rule writes it, else the rule) and what is said.
func ruleErrorAt(rv *value, err *pvefw.RuleError) (*value, string) {
	key := err.Field
	if k, ok := ruleKeys[key]; ok {
		key = k
	}
	if m := rv.obj[key]; m != nil && key != "" {
		return m, "PVE refuses this rule: " + trimNL(err.Msg)
	}
	if key != "" {
		return rv, "PVE refuses this rule: " + key + ": " + trimNL(err.Msg)
	}
	return rv, "PVE refuses this rule: " + trimNL(err.Msg)
}

func trimNL(s string) string { return strings.TrimRight(s, "\n") }

// membersOK reports whether each key written in v passed its own checks.
func membersOK(v *value) bool {
	for _, m := range v.obj {
		if !m.ok {
			return false
		}
	}
	return true
}
