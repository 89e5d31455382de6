package pvefw

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
)

// Errors carry PVE's wording with its trailing newline, as a die in
// Firewall.pm does; callers that put them into a parameter error chomp
// it (verify_rule's add_error).

var (
	rePortRange = lazyre.New(`^([0-9]+):([0-9]+)$`)
	rePort      = lazyre.New(`^([0-9]+)$`)
)

// ParsePorts is parse_port_name_number_or_range: a comma list of ports
// (0-65535), "lo:hi" ranges and /etc/services names, at most 15 numbers
// (a range counts two). icmp is set for a dport of an ICMP rule, where
// ICMP type names used to be kept and still are accepted (alone).
func ParsePorts(s string, icmp bool) error {
	items := strings.Split(s, ",")
	if s != strings.Join(nonEmpty(items), ",") {
		return errors.New("extraneous commas in list\n")
	}
	count, icmpPort := 0, false
	for _, item := range items {
		if m := rePortRange.FindStringSubmatch(item); m != nil {
			count += 2
			lo, hi := bigPort(m[1]), bigPort(m[2])
			if lo > 65535 {
				return fmt.Errorf("invalid port '%s'\n", m[1])
			}
			if hi > 65535 {
				return fmt.Errorf("invalid port '%s'\n", m[2])
			}
			if lo > hi {
				return fmt.Errorf("backwards range '%s:%s' not allowed, did you mean '%s:%s'?\n", m[1], m[2], m[2], m[1])
			}
		} else if m := rePort.FindStringSubmatch(item); m != nil {
			count++
			if bigPort(m[1]) > 65535 {
				return fmt.Errorf("invalid port '%s'\n", m[1])
			}
		} else if icmp && (icmpTypes[item] || icmpv6Types[item]) {
			icmpPort = true
		} else if !services[item] {
			return fmt.Errorf("invalid port '%s'\n", item)
		}
	}
	if icmpPort && count > 0 {
		return errors.New("ICMP ports not allowed in port range\n")
	}
	if count > 15 {
		return errors.New("too many entries in port list (> 15 numbers)\n")
	}
	return nil
}

// nonEmpty drops the empty fields Perl's split leaves off at the end, so
// that a trailing comma shows as a difference.
func nonEmpty(items []string) []string {
	for len(items) > 0 && items[len(items)-1] == "" {
		items = items[:len(items)-1]
	}
	return items
}

// bigPort is a digit string's value, saturated past the int range (Perl
// compares it as a number).
func bigPort(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 1 << 30
	}
	return n
}

// VerifyProtocol is pve_fw_verify_protocol_spec: a name or number of
// /etc/protocols, or "icmpv6".
func VerifyProtocol(p string) error {
	if p != "" && !protocols[p] {
		return fmt.Errorf("unknown protocol '%s'\n", p)
	}
	return nil
}

// VerifyICMPType is pve_fw_verify_icmp_type_spec: an ICMP or ICMPv6 type
// name.
func VerifyICMPType(t string) error {
	if icmpTypes[t] || icmpv6Types[t] || t == "" {
		return nil
	}
	return fmt.Errorf("invalid icmp-type value '%s'\n", t)
}

// ParseAddressList is parse_address_list: an IP set reference ("+name"),
// an alias name, or a comma list of addresses, CIDR networks or one range
// ("a-b") of one IP version. It returns that version, 0 for a set or an
// alias (whose version the caller looks up).
func ParseAddressList(s string) (int, error) {
	if strings.HasPrefix(s, "+") && len(s) > 1 && !strings.ContainsAny(s, " \t\n") {
		if len(s) > 65 {
			return 0, errors.New("ipset name too long\n")
		}
		return 0, nil
	}
	if _, _, ok := AliasRef(s); ok {
		if len(s) > 64 {
			return 0, errors.New("alias name too long\n")
		}
		return 0, nil
	}
	elems := strings.Split(s, ",")
	if s != strings.Join(nonEmpty(elems), ",") {
		return 0, errors.New("extraneous commas in list\n")
	}
	version, isRange := 0, false
	for _, e := range elems {
		v, err := parseNetIP(e)
		if err != nil {
			return 0, fmt.Errorf("invalid IP address: %s\n", err)
		}
		isRange = isRange || strings.Contains(e, "-")
		if version != 0 && v != version {
			return 0, fmt.Errorf("detected mixed ipv4/ipv6 addresses in address list '%s'\n", s)
		}
		version = v
	}
	if isRange && len(elems) > 1 {
		return 0, errors.New("you can't use a range in a list\n")
	}
	return version, nil
}

// parseNetIP is what Net::IP->new accepts here: an address, a network in
// prefix form whose host bits are zero, or a range "a-b" of one version
// with a <= b. The messages follow Net::IP's errors in spirit; their
// exact words are Net::IP's and not kept.
func parseNetIP(e string) (int, error) {
	if lo, hi, ok := strings.Cut(e, "-"); ok {
		a, err1 := netip.ParseAddr(strings.TrimSpace(lo))
		b, err2 := netip.ParseAddr(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || a.Is4() != b.Is4() {
			return 0, fmt.Errorf("Invalid IP range %s", e)
		}
		if b.Less(a) {
			return 0, fmt.Errorf("Begin address is greater than End address %s", e)
		}
		return version(a), nil
	}
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return 0, fmt.Errorf("Invalid IP %s", e)
		}
		if p.Masked().Addr() != p.Addr() {
			return 0, fmt.Errorf("Invalid prefix %s", e)
		}
		return version(p.Addr()), nil
	}
	a, err := netip.ParseAddr(e)
	if err != nil || a.Zone() != "" {
		return 0, fmt.Errorf("Invalid IP %s", e)
	}
	return version(a), nil
}

func version(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}
