package manifest

// The app's firewall: key (issue 33), PVE's guest firewall
// (/nodes/{node}/lxc/{vmid}/firewall, or a VM's under qemu) as bpg's
// provider exposes it:
// enable, default policies, log levels and an ordered list of rules.
// Each rule is checked as pve-firewall's verify_rule does (rule.go, with
// internal/pvefw), so a rule PVE would refuse is refused here with the
// field named.

var (
	policies  = []string{"ACCEPT", "DROP", "REJECT"}
	logLevels = []string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "nolog"}
)

var firewallSpec = &field{key: "firewall", kind: kindObject,
	doc: "The guest's firewall (the container's, or a kind: vm app's VM's, whose NIC net0 then gets firewall=1). When written, corral owns its options enable, policy_in, policy_out, log_level_in and log_level_out " +
		"and its whole rule list: a rule added or changed outside corral shows as drift and apply puts the list back. " +
		"Default: corral leaves the guest's firewall alone. The cluster's firewall must be enabled (Datacenter → Firewall) for the rules to filter.",
	fields: []*field{
		{key: "enabled", kind: kindBool, def: true,
			doc: "Turn the guest's firewall on (option enable)."},
		{key: "policy_in", kind: kindString, enum: policies,
			doc: "Policy for incoming traffic no rule matches. Default: PVE's (DROP)."},
		{key: "policy_out", kind: kindString, enum: policies,
			doc: "Policy for outgoing traffic no rule matches. Default: PVE's (ACCEPT)."},
		{key: "log_level_in", kind: kindString, enum: logLevels,
			doc: "Log level for incoming traffic. Default: PVE's (nolog)."},
		{key: "log_level_out", kind: kindString, enum: logLevels,
			doc: "Log level for outgoing traffic. Default: PVE's (nolog)."},
		{key: "rules", kind: kindList, maxItems: maxFirewallRules,
			doc:   "The rules, first match wins, in this order.",
			items: firewallRuleSpec},
	},
}

// maxFirewallRules bounds an app's rules: each is a request to apply.
const maxFirewallRules = 200

var firewallRuleSpec = &field{kind: kindObject,
	doc: "One firewall rule: a direction (type) and an action, optionally narrowed by macro, protocol, ports, addresses and interface.",
	fields: []*field{
		{key: "type", kind: kindString, required: true, enum: []string{"in", "out", "group"},
			doc: "in or out: the traffic's direction; group: apply the security group named by action."},
		{key: "action", kind: kindString, required: true, maxLen: 20,
			pattern: `^[A-Za-z][A-Za-z0-9_-]+$`,
			allowed: "ACCEPT, DROP, REJECT or a security group's name",
			doc:     "ACCEPT, DROP or REJECT; for type group, the security group's name (it must exist in the cluster's firewall)."},
		{key: "macro", kind: kindString, maxLen: 128,
			doc: "A PVE firewall macro such as SSH, HTTP or DNS, which sets the protocol and ports."},
		{key: "proto", kind: kindString,
			doc: "IP protocol: a name (tcp, udp, icmp, icmpv6, …) or number from /etc/protocols."},
		{key: "dport", kind: kindString,
			doc: "Destination ports: numbers, ranges like 8000:8080 and service names, comma-separated (needs proto tcp, udp, dccp or sctp)."},
		{key: "sport", kind: kindString,
			doc: "Source ports, written as dport."},
		{key: "source", kind: kindString, maxLen: 512,
			doc: "Source addresses: an IP, a CIDR network, a range a-b, a comma list of one IP version, +ipset or an alias name."},
		{key: "dest", kind: kindString, maxLen: 512,
			doc: "Destination addresses, written as source."},
		{key: "icmp_type", kind: kindString,
			doc: "ICMP type name (with proto icmp or icmpv6), e.g. echo-request."},
		{key: "iface", kind: kindString, pattern: `^net[0-9]+$`, allowed: "a container interface key like net0",
			doc: "The container's interface the rule applies to, like net0. Default: all."},
		{key: "log", kind: kindString, enum: logLevels,
			doc: "Log level for packets the rule matches. Default: none."},
		{key: "comment", kind: kindString, maxLen: 256, check: checkOneLine, pattern: `^[^\x00-\x1f\x7f]*$`,
			allowed: "one line of text",
			doc:     "A note shown in the web interface."},
		{key: "enabled", kind: kindBool, def: true,
			doc: "Whether the rule is active."},
	},
}
