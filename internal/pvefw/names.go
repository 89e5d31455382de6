package pvefw

import (
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
)

// Name patterns of Firewall.pm: a security group's, an IP set's and an
// alias's names share one.
var (
	reName      = lazyre.New(`^[A-Za-z][A-Za-z0-9\-_]+$`)
	reIPSetRef  = lazyre.New(`^\+(guest/|dc/|sdn/)?([A-Za-z][A-Za-z0-9\-_]+)$`)
	reAliasRef  = lazyre.New(`^(dc/|guest/)?([A-Za-z][A-Za-z0-9\-_]+)$`)
	reIfaceNetN = lazyre.New(`^net(\d+)$`)
)

// MaxGroupNameLength is pve-security-group-name's maxLength.
const MaxGroupNameLength = 18

// ValidName reports whether s is a security group, IP set or alias name.
func ValidName(s string) bool { return reName.MatchString(s) }

// ValidGuestIface reports whether s names a guest's network interface as
// a guest rule must (verify_rule: 'net\d+').
func ValidGuestIface(s string) bool { return reIfaceNetN.MatchString(s) }

// IPSetRef splits "+name" (optionally "+dc/name", "+guest/name") into the
// set's name; ok is false when s is no IP set reference.
func IPSetRef(s string) (name string, isRef, ok bool) {
	if !strings.HasPrefix(s, "+") {
		return "", false, false
	}
	m := reIPSetRef.FindStringSubmatch(s)
	if m == nil {
		return "", true, false
	}
	return m[2], true, true
}

// AliasRef splits an alias reference ("name", "dc/name", "guest/name")
// into its scope prefix and lower-cased name; ok is false when s is no
// alias name (an address, say).
func AliasRef(s string) (scope, name string, ok bool) {
	m := reAliasRef.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	return m[1], strings.ToLower(m[2]), true
}

// macros are the keys of $pve_fw_macros and $pve_ipv6fw_macros, in their
// preferred spelling; a rule may name one in any case.
var macros = func() map[string]string {
	out := map[string]string{}
	for _, m := range strings.Fields(`Amanda Auth BGP BitTorrent BitTorrent32 Ceph CVS Citrix DAAP DCC DHCPfwd
		DHCPv6 DNS Distcc FTP Finger GNUnet GRE Git HKP HTTP HTTPS ICPV2 ICQ IMAP IMAPS IPIP IPsec IPsecah
		IPsecnat IRC Jetdirect L2TP LDAP LDAPS MSNP MSSQL Mail MDNS Munin MySQL NNTP NNTPS NTP NeighborDiscovery
		OSPF OpenVPN PCA PMG POP3 POP3S PPtP Ping PostgreSQL Printer RDP RIP RNDC Razor Rdate Rsync SANE SMB
		SMBswat SMTP SMTPS SNMP SPAMD SSH SVN SixXS SPICEproxy Squid Submission Syslog TFTP Telnet Telnets
		Time Trcrt VNC VNCL Web Webcache Webmin Whois`) {
		out[strings.ToLower(m)] = m
	}
	return out
}()

// Macro returns the preferred spelling of the macro name, any case; ok
// is false for an unknown macro.
func Macro(name string) (string, bool) {
	m, ok := macros[strings.ToLower(name)]
	return m, ok
}

// icmpTypes are iptables' ICMP type names; icmpv6Types ip6tables'.
var icmpTypes = setOf(`any echo-reply destination-unreachable network-unreachable host-unreachable
	protocol-unreachable port-unreachable fragmentation-needed source-route-failed network-unknown
	host-unknown network-prohibited host-prohibited TOS-network-unreachable TOS-host-unreachable
	communication-prohibited host-precedence-violation precedence-cutoff source-quench redirect
	network-redirect host-redirect TOS-network-redirect TOS-host-redirect echo-request
	router-advertisement router-solicitation time-exceeded ttl-zero-during-transit
	ttl-zero-during-reassembly parameter-problem ip-header-bad required-option-missing
	timestamp-request timestamp-reply address-mask-request address-mask-reply`)

var icmpv6Types = setOf(`destination-unreachable no-route communication-prohibited beyond-scope
	address-unreachable port-unreachable failed-policy reject-route packet-too-big time-exceeded
	ttl-zero-during-transit ttl-zero-during-reassembly parameter-problem bad-header
	unknown-header-type unknown-option echo-request echo-reply router-solicitation
	router-advertisement neighbor-solicitation neighbour-solicitation neighbor-advertisement
	neighbour-advertisement redirect`)

func setOf(s string) map[string]bool {
	out := map[string]bool{}
	for _, f := range strings.Fields(s) {
		out[f] = true
	}
	return out
}

// ICMPTypeFor reports whether t is an ICMP type name of proto ("icmp",
// or "icmpv6"/"ipv6-icmp").
func ICMPTypeFor(proto, t string) bool {
	if proto == "icmp" {
		return icmpTypes[t]
	}
	return icmpv6Types[t]
}

// IsICMP is $proto_is_icmp.
func IsICMP(proto string) bool { return proto == "icmp" || proto == "icmpv6" || proto == "ipv6-icmp" }

// portProtocols are $PROTOCOLS_WITH_PORTS, by name and number.
var portProtocols = setOf(`udp 17 udplite 136 tcp 6 dccp 33 sctp 132`)

// HasPorts reports whether proto takes sport/dport.
func HasPorts(proto string) bool { return portProtocols[proto] }
