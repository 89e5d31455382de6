package pvefw

import (
	"slices"
	"strings"
)

// Rule is one firewall rule as its fields are named in the API and the
// config file; "" is a field not set. Enable is the file's 0/1.
type Rule struct {
	Type, Action, Macro, Iface    string
	Source, Dest, Proto, Dport    string
	Sport, ICMPType, Log, Comment string
	Enable                        int
	IPVersion                     int // set by VerifyRule from source, dest or proto
}

// Env names where a rule lives, verify_rule's rule_env: a container's
// ("ct") or a VM's ("vm"), the cluster's, a security group's or a node's
// ("host"). The two guest envs check alike; only their name, which an
// error message quotes, differs.
type Env string

// The rule environments the emulator serves.
const (
	EnvCT      Env = "ct"
	EnvVM      Env = "vm"
	EnvCluster Env = "cluster"
	EnvGroup   Env = "group"
	EnvHost    Env = "host"
)

// Guest reports whether env is a guest's rule list (a CT's or a VM's).
func (env Env) Guest() bool { return env == EnvCT || env == EnvVM }

// directions are $rule_env_direction_lookup.
var directions = map[Env][]string{
	EnvCT:      {"in", "out", "group"},
	EnvVM:      {"in", "out", "group"},
	EnvGroup:   {"in", "out", "forward"},
	EnvCluster: {"in", "out", "forward", "group"},
	EnvHost:    {"in", "out", "forward", "group"},
}

// Refs answers what a rule's source or dest may name: the IP sets and
// aliases of the cluster and of the rule's own config. A nil Refs skips
// those checks (the manifest cannot see them).
type Refs interface {
	HasIPSet(name string) bool
	// Alias is the alias's IP version; scope is "", "dc/" or "guest/".
	Alias(scope, name string) (ipversion int, ok bool)
}

// RuleError is verify_rule's first error: a parameter error on Field
// (raise_param_exc), or with Field "" a plain die.
type RuleError struct {
	Field, Msg string
}

func (e *RuleError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// VerifyRule is verify_rule without noerr: it checks r for env, stops at
// the first error as raise_param_exc does, puts the macro in its
// preferred spelling and sets r.IPVersion. Macro expansion is not
// checked (a macro that also fixes proto or dport and a rule that sets
// them differently is accepted here).
func VerifyRule(r *Rule, env Env, refs Refs) *RuleError {
	if err := verifyKind(r, env); err != nil {
		return err
	}
	if r.Iface != "" {
		if env == EnvGroup {
			return &RuleError{"type", "parameter -i not allowed for this rule type"}
		}
		if env.Guest() && !ValidGuestIface(r.Iface) {
			return &RuleError{"iface", `value does not match the regex pattern 'net\d+'`}
		}
	}
	if r.Macro != "" {
		m, ok := Macro(r.Macro)
		if !ok {
			return &RuleError{"macro", "unknown macro '" + r.Macro + "'"}
		}
		r.Macro = m
	}
	if err := verifyProtoPorts(r); err != nil {
		return err
	}
	return verifyAddresses(r, refs)
}

// verifyKind checks type and action.
func verifyKind(r *Rule, env Env) *RuleError {
	if r.Type == "" {
		return &RuleError{"type", "missing property"}
	}
	if r.Action == "" {
		return &RuleError{"action", "missing property"}
	}
	if !slices.Contains(directions[env], r.Type) {
		return &RuleError{"type", "invalid rule type '" + r.Type + "' for rule_env '" + string(env) + "'"}
	}
	switch r.Type {
	case "in", "out", "forward":
		if r.Type == "forward" && r.Action == "REJECT" {
			return &RuleError{"action", "cannot define REJECT rules on forward chain"}
		}
		if r.Action != "ACCEPT" && r.Action != "DROP" && r.Action != "REJECT" {
			return &RuleError{"action", "unknown action '" + r.Action + "'"}
		}
	case "group":
		if !ValidName(r.Action) {
			return &RuleError{"action", "invalid characters in security group name"}
		}
	}
	return nil
}

// verifyProtoPorts checks proto, dport, icmp-type and sport together.
func verifyProtoPorts(r *Rule) *RuleError {
	icmp := false
	if r.Proto != "" {
		if err := VerifyProtocol(r.Proto); err != nil {
			return &RuleError{"proto", chomp(err)}
		}
		switch r.Proto {
		case "icmp":
			r.IPVersion = 4
		case "icmpv6", "ipv6-icmp":
			r.IPVersion = 6
		}
		icmp = IsICMP(r.Proto)
	}
	if r.Dport != "" {
		if err := ParsePorts(r.Dport, icmp); err != nil {
			return &RuleError{"dport", chomp(err)}
		}
		if r.Proto == "" {
			return &RuleError{"proto", "missing property - 'dport' requires this property"}
		}
		if !HasPorts(r.Proto) && !icmp {
			return &RuleError{"dport", "protocol '" + r.Proto + "' does not support ports"}
		}
	}
	if t := r.ICMPType; t != "" {
		if !icmp {
			return &RuleError{"proto", "missing property - 'icmp-type' requires this property"}
		}
		if r.Dport != "" {
			return &RuleError{"icmp-type", "'icmp-type' cannot be specified together with 'dport'"}
		}
		if !ICMPTypeFor(r.Proto, t) {
			return &RuleError{"icmp-type", "invalid icmp-type '" + t + "' for proto '" + r.Proto + "'"}
		}
	}
	if r.Sport != "" {
		if err := ParsePorts(r.Sport, false); err != nil {
			return &RuleError{"sport", chomp(err)}
		}
		if r.Proto == "" {
			return &RuleError{"proto", "missing property - 'sport' requires this property"}
		}
		if !HasPorts(r.Proto) {
			return &RuleError{"sport", "protocol '" + r.Proto + "' does not support ports"}
		}
	}
	return nil
}

// verifyAddresses checks source then dest: their syntax, one IP version
// across the rule, and with refs that a named set or alias exists.
func verifyAddresses(r *Rule, refs Refs) *RuleError {
	for _, f := range []struct {
		name  string
		value string
	}{{"source", r.Source}, {"dest", r.Dest}} {
		if f.value == "" {
			continue
		}
		v, err := ParseAddressList(f.value)
		if err == nil && v != 0 && r.IPVersion != 0 && v != r.IPVersion {
			return &RuleError{f.name, "detected mixed ipv4/ipv6 addresses in rule"}
		}
		if err != nil {
			return &RuleError{f.name, chomp(err)}
		}
		if v != 0 {
			r.IPVersion = v
		}
		if err := checkRef(r, f.name, f.value, refs); err != nil {
			return err
		}
	}
	return nil
}

// checkRef is check_ipset_or_alias_property.
func checkRef(r *Rule, field, value string, refs Refs) *RuleError {
	if refs == nil {
		return nil
	}
	if name, isRef, ok := IPSetRef(value); isRef {
		if !ok {
			return &RuleError{field, "invalid ipset name '" + value + "'"}
		}
		if !refs.HasIPSet(name) {
			return &RuleError{field, "no such ipset '" + name + "'"}
		}
		return nil
	}
	scope, name, ok := AliasRef(value)
	if !ok {
		return nil
	}
	v, found := refs.Alias(scope, name)
	if !found {
		return &RuleError{field, "no such alias '" + value + "'"}
	}
	if v != 0 && r.IPVersion != 0 && v != r.IPVersion {
		return &RuleError{"", "detected mixed ipv4/ipv6 addresses in rule\n"}
	}
	if v != 0 {
		r.IPVersion = v
	}
	return nil
}

func chomp(err error) string { return strings.TrimSuffix(err.Error(), "\n") }
