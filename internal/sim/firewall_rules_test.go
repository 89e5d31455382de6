package sim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
)

// checkRuleReturns checks a rule list against 9.1's returns schema,
// which declares every field but the digest copy_list_with_digest adds
// (8.4's declares only pos).
func checkRuleReturns(t *testing.T, v, path string, data []byte) {
	t.Helper()
	if v != "9.1" {
		return
	}
	var list []map[string]any
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		delete(r, "digest")
	}
	raw, _ := json.Marshal(list)
	checkReturns(t, v, "GET", path, raw)
}

// ruleSummary is a listed rule's identifying fields, for order checks.
func ruleSummary(rules []map[string]any) []string {
	var out []string
	for _, r := range rules {
		s, _ := r["comment"].(string)
		out = append(out, s)
	}
	return out
}

// Issue 33: a CT's firewall rules as Rules.pm serves them: POST puts the
// new rule first whatever pos says and disables it without enable; the
// list carries pos and the list's digest on each rule, the macro in its
// preferred spelling and the ipversion the addresses give; verify_rule's
// errors name the field; PUT moves (moveto), edits and deletes
// properties under a digest; DELETE by position; VM.Audit reads,
// VM.Config.Network writes.
func TestFirewall_guestRules(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		k.create(root, "101", nil)
		base := "/nodes/pve/lxc/101/firewall/rules"
		if r := k.do(root, http.MethodGet, base, nil); r.status != 200 || string(r.data) != "[]" {
			t.Fatalf("fresh rules: %d %s", r.status, r.data)
		}
		k.ok(root, http.MethodPost, "/nodes/pve/lxc/101/firewall/ipset", url.Values{"name": {"admins"}}, nil)
		k.ok(root, http.MethodPost, base, url.Values{"type": {"in"}, "action": {"ACCEPT"}, "proto": {"tcp"}, "dport": {"22,80:90"}, "source": {"+admins"}, "comment": {" a "}, "enable": {"1"}}, nil)
		k.ok(root, http.MethodPost, base, url.Values{"type": {"in"}, "action": {"ACCEPT"}, "macro": {"http"}, "source": {"192.0.2.0/24"}, "comment": {"b"}, "log": {"info"}, "pos": {"1"}}, nil)
		k.ok(root, http.MethodPost, base, url.Values{"type": {"out"}, "action": {"REJECT"}, "proto": {"icmp"}, "icmp-type": {"echo-request"}, "iface": {"net0"}, "comment": {"c"}, "enable": {"1"}}, nil)
		r := k.do(root, http.MethodGet, base, nil)
		checkRuleReturns(t, v, "/nodes/{node}/lxc/{vmid}/firewall/rules", r.data)
		var rules []map[string]any
		k.decode(r.data, &rules)
		if got := ruleSummary(rules); len(got) != 3 || got[0] != "c" || got[1] != "b" || got[2] != "a" {
			t.Fatalf("order %v: each POST puts its rule first", got)
		}
		if rules[1]["macro"] != "HTTP" || rules[1]["enable"] != float64(0) || rules[1]["ipversion"] != float64(4) || rules[1]["log"] != "info" || rules[1]["pos"] != float64(1) {
			t.Errorf("rule b = %v (macro spelled HTTP, disabled without enable, ipversion 4)", rules[1])
		}
		if rules[0]["ipversion"] != float64(4) || rules[2]["enable"] != float64(1) || rules[2]["dport"] != "22,80:90" || rules[0]["digest"] != rules[2]["digest"] {
			t.Errorf("rules %v", rules)
		}
		digest := rules[0]["digest"].(string)

		bad := []struct {
			params url.Values
			errs   map[string]string
		}{
			{url.Values{"type": {"forward"}, "action": {"ACCEPT"}}, map[string]string{"type": "invalid rule type 'forward' for rule_env 'ct'"}},
			{url.Values{"type": {"in"}, "action": {"ACCEPT"}, "dport": {"22"}}, map[string]string{"proto": "missing property - 'dport' requires this property"}},
			{url.Values{"type": {"in"}, "action": {"ACCEPT"}, "dport": {"70000"}, "proto": {"tcp"}}, map[string]string{"dport": "invalid format - invalid port '70000'\n"}},
			{url.Values{"type": {"in"}, "action": {"ACCEPT"}, "source": {"+nosuch"}}, map[string]string{"source": "no such ipset 'nosuch'"}},
			{url.Values{"type": {"in"}, "action": {"ACCEPT"}, "dest": {"nosuch"}}, map[string]string{"dest": "no such alias 'nosuch'"}},
			{url.Values{"type": {"in"}, "action": {"ACCEPT"}, "iface": {"eth0"}}, map[string]string{"iface": `value does not match the regex pattern 'net\d+'`}},
			{url.Values{"type": {"in"}, "action": {"ACCEPT"}, "macro": {"nosuch"}}, map[string]string{"macro": "unknown macro 'nosuch'"}},
			{url.Values{"type": {"in"}, "action": {"ACCEPT"}, "proto": {"nosuch"}}, map[string]string{"proto": "invalid format - unknown protocol 'nosuch'\n"}},
			{url.Values{"action": {"ACCEPT"}}, map[string]string{"type": "property is missing and it is not optional"}},
		}
		for _, b := range bad {
			want(t, "POST "+b.params.Encode(), k.do(root, http.MethodPost, base, b.params), 400, "Parameter verification failed.\n", b.errs)
		}

		var one map[string]any
		k.ok(root, http.MethodGet, base+"/2", nil, &one)
		if one["comment"] != "a" || one["pos"] != float64(2) || one["digest"] != digest {
			t.Errorf("GET %s/2 = %v", base, one)
		}
		want(t, "past the end", k.do(root, http.MethodGet, base+"/3", nil), 500, "no rule at position 3\n", nil)
		want(t, "stale digest", k.do(root, http.MethodPut, base+"/0", url.Values{"moveto": {"2"}, "digest": {"0000000000000000000000000000000000000000"}}),
			500, "detected modified configuration - file changed by other user? Try again.\n", nil)
		// moveto 2 puts rule c before the old list's rule 2 (a): b c a.
		k.ok(root, http.MethodPut, base+"/0", url.Values{"moveto": {"2"}, "digest": {digest}, "comment": {"ignored"}}, nil)
		k.ok(root, http.MethodGet, base, nil, &rules)
		if got := ruleSummary(rules); got[0] != "b" || got[1] != "c" || got[2] != "a" {
			t.Errorf("after moveto 2: %v", got)
		}
		k.ok(root, http.MethodPut, base+"/0", url.Values{"moveto": {"9"}}, nil)
		k.ok(root, http.MethodGet, base, nil, &rules)
		if got := ruleSummary(rules); got[0] != "c" || got[1] != "a" || got[2] != "b" {
			t.Errorf("after moveto past the end: %v", got)
		}
		k.ok(root, http.MethodPut, base+"/2", url.Values{"enable": {"1"}, "delete": {"log,macro"}, "proto": {"udp"}, "dport": {"53"}, "comment": {"-"}}, nil)
		one = nil
		k.ok(root, http.MethodGet, base+"/2", nil, &one)
		if one["macro"] != nil || one["log"] != nil || one["proto"] != "udp" || one["enable"] != float64(1) || one["comment"] != nil {
			t.Errorf("after PUT: %v", one)
		}
		want(t, "delete action", k.do(root, http.MethodPut, base+"/2", url.Values{"delete": {"action"}}), 400, "Parameter verification failed.\n",
			map[string]string{"delete": "unable to delete required property 'action'"})
		want(t, "edit into a bad rule", k.do(root, http.MethodPut, base+"/2", url.Values{"proto": {"gre"}}), 400, "Parameter verification failed.\n",
			map[string]string{"dport": "protocol 'gre' does not support ports"})
		k.ok(root, http.MethodDelete, base+"/0", nil, nil)
		k.ok(root, http.MethodGet, base, nil, &rules)
		if got := ruleSummary(rules); len(got) != 2 || got[0] != "a" {
			t.Errorf("after DELETE 0: %v", got)
		}

		aud := k.auditor("aud@pve", "/vms/101")
		if r := k.do(aud, http.MethodGet, base, nil); r.status != 200 {
			t.Errorf("VM.Audit reads the rules: %d %q", r.status, r.msg)
		}
		want(t, "auditor writes", k.do(aud, http.MethodPost, base, url.Values{"type": {"in"}, "action": {"DROP"}}),
			403, "Permission check failed (/vms/101, VM.Config.Network)\n", nil)

		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"102"}})
		var cloned []map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/lxc/102/firewall/rules", nil, &cloned)
		if len(cloned) != 2 || cloned[0]["digest"] != rules[0]["digest"] {
			t.Errorf("clone's rules %v", cloned)
		}
		k.mustOK(root, http.MethodDelete, "/nodes/pve/lxc/101", nil)
		if r := k.do(root, http.MethodGet, base, nil); string(r.data) != "[]" {
			t.Errorf("rules after destroy: %s", r.data)
		}
	})
}

// Issue 33: security groups (Groups.pm): listed by name with the list's
// digest, their rules at /cluster/firewall/groups/{group}; a guest rule
// of type group names one; a rename moves the rules and renames the
// references; a group with rules is not deleted; a missing one is 500
// "no such security group"; Sys.Modify on / to change them.
func TestFirewall_securityGroups(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		k.create(root, "101", nil)
		k.ok(root, http.MethodPost, "/cluster/firewall/groups", url.Values{"group": {"web"}, "comment": {"frontends"}}, nil)
		want(t, "twice", k.do(root, http.MethodPost, "/cluster/firewall/groups", url.Values{"group": {"web"}}), 400, "Parameter verification failed.\n",
			map[string]string{"group": "Security group 'web' already exists"})
		k.ok(root, http.MethodPost, "/cluster/firewall/groups/web", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "macro": {"HTTPS"}, "enable": {"1"}}, nil)
		want(t, "group rule with iface", k.do(root, http.MethodPost, "/cluster/firewall/groups/web", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "iface": {"net0"}}),
			400, "Parameter verification failed.\n", map[string]string{"type": "parameter -i not allowed for this rule type"})
		want(t, "group in a group", k.do(root, http.MethodPost, "/cluster/firewall/groups/web", url.Values{"type": {"group"}, "action": {"web"}}),
			400, "Parameter verification failed.\n", map[string]string{"type": "invalid rule type 'group' for rule_env 'group'"})
		want(t, "missing group", k.do(root, http.MethodGet, "/cluster/firewall/groups/nope", nil), 500, "no such security group 'nope'\n", nil)
		r := k.do(root, http.MethodGet, "/cluster/firewall/groups", nil)
		checkReturns(t, v, "GET", "/cluster/firewall/groups", r.data)
		var groups []map[string]any
		k.decode(r.data, &groups)
		if len(groups) != 1 || groups[0]["group"] != "web" || groups[0]["comment"] != "frontends" {
			t.Errorf("groups %s", r.data)
		}
		k.ok(root, http.MethodPost, "/nodes/pve/lxc/101/firewall/rules", url.Values{"type": {"group"}, "action": {"web"}, "iface": {"net0"}, "enable": {"1"}}, nil)
		k.ok(root, http.MethodPost, "/cluster/firewall/groups", url.Values{"group": {"www"}, "rename": {"web"}, "digest": {groups[0]["digest"].(string)}}, nil)
		var rules []map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/rules", nil, &rules)
		if len(rules) != 1 || rules[0]["action"] != "www" || rules[0]["type"] != "group" {
			t.Errorf("guest rule after the rename: %v", rules)
		}
		k.ok(root, http.MethodGet, "/cluster/firewall/groups/www", nil, &rules)
		if len(rules) != 1 || rules[0]["macro"] != "HTTPS" {
			t.Errorf("renamed group's rules: %v", rules)
		}
		want(t, "not empty", k.do(root, http.MethodDelete, "/cluster/firewall/groups/www", nil), 500, "Security group 'www' is not empty\n", nil)
		k.ok(root, http.MethodDelete, "/cluster/firewall/groups/www/0", nil, nil)
		k.ok(root, http.MethodDelete, "/cluster/firewall/groups/www", nil, nil)

		aud := k.auditor("aud@pve", "/")
		if r := k.do(aud, http.MethodGet, "/cluster/firewall/rules", nil); r.status != 200 {
			t.Errorf("Sys.Audit reads the cluster's rules: %d %q", r.status, r.msg)
		}
		want(t, "auditor makes a group", k.do(aud, http.MethodPost, "/cluster/firewall/groups", url.Values{"group": {"x1"}}),
			403, "Permission check failed (/, Sys.Modify)\n", nil)
	})
}

// Issue 33: the cluster's options and rules, a node's rules and a CT's
// firewall log: the options with their digest (enable and ebtables as
// numbers), the cluster's rule env allowing forward, the log's empty
// answer (dump_logfile's "no content" line, total 1) under VM.Console.
func TestFirewall_clusterNodeAndLog(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		r := k.do(root, http.MethodGet, "/cluster/firewall/options", nil)
		if string(r.data) != `{"digest":"da39a3ee5e6b4b0d3255bfef95601890afd80709"}` {
			t.Errorf("fresh cluster options: %s", r.data)
		}
		k.ok(root, http.MethodPut, "/cluster/firewall/options", url.Values{"enable": {"1"}, "ebtables": {"0"}, "policy_in": {"DROP"}}, nil)
		var opts map[string]any
		k.ok(root, http.MethodGet, "/cluster/firewall/options", nil, &opts)
		if opts["enable"] != float64(1) || opts["ebtables"] != float64(0) || opts["policy_in"] != "DROP" {
			t.Errorf("cluster options %v", opts)
		}
		want(t, "unknown delete", k.do(root, http.MethodPut, "/cluster/firewall/options", url.Values{"delete": {"policy_up"}}),
			400, "Parameter verification failed.\n", map[string]string{"delete": "no such option 'policy_up'"})
		k.ok(root, http.MethodPost, "/cluster/firewall/rules", url.Values{"type": {"forward"}, "action": {"ACCEPT"}, "enable": {"1"}}, nil)
		want(t, "forward REJECT", k.do(root, http.MethodPost, "/cluster/firewall/rules", url.Values{"type": {"forward"}, "action": {"REJECT"}}),
			400, "Parameter verification failed.\n", map[string]string{"action": "cannot define REJECT rules on forward chain"})
		k.ok(root, http.MethodPost, "/nodes/pve/firewall/rules", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "macro": {"SSH"}, "iface": {"vmbr0"}, "enable": {"1"}}, nil)
		var rules []map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/firewall/rules", nil, &rules)
		if len(rules) != 1 || rules[0]["iface"] != "vmbr0" {
			t.Errorf("node rules %v", rules)
		}
		r = k.do(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/log", url.Values{"limit": {"10"}})
		checkReturns(t, v, "GET", "/nodes/{node}/lxc/{vmid}/firewall/log", r.data)
		if string(r.data) != `[{"n":1,"t":"no content"}]` {
			t.Errorf("log = %s", r.data)
		}
		aud := k.auditor("aud@pve", "/vms/101")
		want(t, "log needs VM.Console", k.do(aud, http.MethodGet, "/nodes/pve/lxc/101/firewall/log", nil),
			403, "Permission check failed (/vms/101, VM.Console)\n", nil)
	})
}
