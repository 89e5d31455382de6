package pvefw

import "testing"

// PVE's messages for a bad port list, as parse_port_name_number_or_range
// dies.
func TestParsePorts(t *testing.T) {
	for _, tt := range []struct {
		in   string
		icmp bool
		want string
	}{
		{"22", false, ""},
		{"80:85,443,ssh", false, ""},
		{"0", false, ""},
		{"65536", false, "invalid port '65536'\n"},
		{"90:80", false, "backwards range '90:80' not allowed, did you mean '80:90'?\n"},
		{"nosuchservice", false, "invalid port 'nosuchservice'\n"},
		{"22,", false, "extraneous commas in list\n"},
		{"22,,23", false, "invalid port ''\n"}, // Perl's split keeps the inner empty field
		{"echo-request", true, ""},
		{"echo-request", false, "invalid port 'echo-request'\n"},
		{"echo-request,22", true, "ICMP ports not allowed in port range\n"},
		{"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", false, ""},
		{"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15:16", false, "too many entries in port list (> 15 numbers)\n"},
	} {
		err := ParsePorts(tt.in, tt.icmp)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("ParsePorts(%q, %v) = %q, want %q", tt.in, tt.icmp, got, tt.want)
		}
	}
}

func TestParseAddressList(t *testing.T) {
	for _, tt := range []struct {
		in      string
		version int
		bad     bool
	}{
		{"192.0.2.1", 4, false},
		{"192.0.2.0/24,198.51.100.7", 4, false},
		{"2001:db8::/64", 6, false},
		{"192.0.2.10-192.0.2.20", 4, false},
		{"+office", 0, false},
		{"+dc/office", 0, false},
		{"myalias", 0, false},
		{"dc/myalias", 0, false},
		{"192.0.2.1/24", 0, true},
		{"192.0.2.1,2001:db8::1", 0, true},
		{"192.0.2.1-192.0.2.5,192.0.2.9", 0, true},
		{"192.0.2.300", 0, true},
		{"192.0.2.9-192.0.2.1", 0, true},
	} {
		v, err := ParseAddressList(tt.in)
		if (err != nil) != tt.bad || v != tt.version {
			t.Errorf("ParseAddressList(%q) = %d, %v", tt.in, v, err)
		}
	}
}

type refs map[string]int

func (r refs) HasIPSet(name string) bool { _, ok := r["+"+name]; return ok }
func (r refs) Alias(_, name string) (int, bool) {
	v, ok := r[name]
	return v, ok
}

// verify_rule's checks and messages, the first error winning.
func TestVerifyRule(t *testing.T) {
	known := refs{"+web": 0, "lan": 4, "lan6": 6}
	for _, tt := range []struct {
		r     Rule
		env   Env
		field string
		msg   string
	}{
		{Rule{Type: "in", Action: "ACCEPT", Proto: "tcp", Dport: "22", Source: "+web"}, EnvCT, "", ""},
		{Rule{Type: "in", Action: "ACCEPT", Macro: "ssh"}, EnvCT, "", ""},
		{Rule{Type: "group", Action: "webservers", Iface: "net0"}, EnvCT, "", ""},
		{Rule{Type: "forward", Action: "ACCEPT"}, EnvCT, "type", "invalid rule type 'forward' for rule_env 'ct'"},
		{Rule{Type: "in", Action: "ALLOW"}, EnvCT, "action", "unknown action 'ALLOW'"},
		{Rule{Type: "forward", Action: "REJECT"}, EnvCluster, "action", "cannot define REJECT rules on forward chain"},
		{Rule{Type: "group", Action: "x"}, EnvGroup, "type", "invalid rule type 'group' for rule_env 'group'"},
		{Rule{Type: "in", Action: "DROP", Iface: "eth0"}, EnvCT, "iface", `value does not match the regex pattern 'net\d+'`},
		{Rule{Type: "in", Action: "DROP", Iface: "net0"}, EnvGroup, "type", "parameter -i not allowed for this rule type"},
		{Rule{Type: "in", Action: "DROP", Macro: "Nope"}, EnvCT, "macro", "unknown macro 'Nope'"},
		{Rule{Type: "in", Action: "DROP", Dport: "22"}, EnvCT, "proto", "missing property - 'dport' requires this property"},
		{Rule{Type: "in", Action: "DROP", Proto: "gre", Dport: "22"}, EnvCT, "dport", "protocol 'gre' does not support ports"},
		{Rule{Type: "in", Action: "DROP", Proto: "icmp", ICMPType: "neighbor-solicitation"}, EnvCT, "icmp-type", "invalid icmp-type 'neighbor-solicitation' for proto 'icmp'"},
		{Rule{Type: "in", Action: "DROP", Proto: "tcp", ICMPType: "echo-request"}, EnvCT, "proto", "missing property - 'icmp-type' requires this property"},
		{Rule{Type: "in", Action: "DROP", Source: "+nope"}, EnvCT, "source", "no such ipset 'nope'"},
		{Rule{Type: "in", Action: "DROP", Dest: "nope"}, EnvCT, "dest", "no such alias 'nope'"},
		{Rule{Type: "in", Action: "DROP", Source: "lan", Dest: "lan6"}, EnvCT, "", "detected mixed ipv4/ipv6 addresses in rule\n"},
		{Rule{Type: "in", Action: "DROP", Proto: "icmp", Source: "2001:db8::1"}, EnvCT, "source", "detected mixed ipv4/ipv6 addresses in rule"},
	} {
		r := tt.r
		err := VerifyRule(&r, tt.env, known)
		var field, msg string
		if err != nil {
			field, msg = err.Field, err.Msg
		}
		if field != tt.field || msg != tt.msg {
			t.Errorf("VerifyRule(%+v, %s) = %q %q, want %q %q", tt.r, tt.env, field, msg, tt.field, tt.msg)
		}
	}
	r := Rule{Type: "in", Action: "ACCEPT", Macro: "ssh", Source: "lan"}
	if err := VerifyRule(&r, EnvCT, known); err != nil || r.Macro != "SSH" || r.IPVersion != 4 {
		t.Errorf("macro spelling and ipversion: %+v %v", r, err)
	}
}
