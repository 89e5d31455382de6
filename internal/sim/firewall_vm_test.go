package sim

import (
	"net/http"
	"net/url"
	"testing"
)

// Issue 34: a VM's firewall is VM.pm's under /nodes/{node}/qemu/{vmid}:
// the same options, rules, aliases, IP sets, refs and log as a CT's,
// with the rule list's rule_env "vm" (its errors say so), VM.Audit to
// read and VM.Config.Network to write; a VM's clone copies its config
// and its destroy drops it.
func TestFirewall_vm(t *testing.T) {
	t.Parallel()
	k := vmOpsE2E(t)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	base := "/nodes/pve/qemu/200/firewall"
	var idx []map[string]string
	k.ok(root, http.MethodGet, base, nil, &idx)
	if len(idx) != 5 || idx[0]["name"] != "rules" {
		t.Errorf("a VM's firewall index: %v", idx)
	}
	k.ok(root, http.MethodPut, base+"/options", url.Values{"enable": {"1"}, "policy_in": {"DROP"}}, nil)
	k.ok(root, http.MethodPost, base+"/aliases", url.Values{"name": {"Office"}, "cidr": {"192.0.2.0/24"}}, nil)
	k.ok(root, http.MethodPost, base+"/ipset", url.Values{"name": {"admins"}}, nil)
	k.ok(root, http.MethodPost, base+"/ipset/admins", url.Values{"cidr": {"198.51.100.7"}}, nil)
	k.ok(root, http.MethodPost, base+"/rules", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "proto": {"tcp"}, "dport": {"22"}, "source": {"+admins"}, "iface": {"net0"}, "enable": {"1"}, "comment": {"ssh"}}, nil)
	k.ok(root, http.MethodPost, base+"/rules", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "macro": {"http"}, "source": {"office"}, "comment": {"web"}}, nil)
	var rules []map[string]any
	k.ok(root, http.MethodGet, base+"/rules", nil, &rules)
	if len(rules) != 2 || rules[0]["comment"] != "web" || rules[0]["macro"] != "HTTP" || rules[1]["iface"] != "net0" || rules[1]["enable"] != float64(1) {
		t.Errorf("a VM's rules: %v", rules)
	}
	var refs []map[string]any
	k.ok(root, http.MethodGet, base+"/refs", nil, &refs)
	if len(refs) != 2 || refs[0]["ref"] != "+admins" || refs[1]["name"] != "office" || refs[1]["scope"] != "guest" {
		t.Errorf("a VM's refs: %v", refs)
	}
	for _, tc := range []struct {
		name   string
		params url.Values
		field  string
		msg    string
	}{
		{"forward", url.Values{"type": {"forward"}, "action": {"ACCEPT"}}, "type", "invalid rule type 'forward' for rule_env 'vm'"},
		{"iface", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "iface": {"eth0"}}, "iface", `value does not match the regex pattern 'net\d+'`},
		{"ipset", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "source": {"+nosuch"}}, "source", "no such ipset 'nosuch'"},
	} {
		want(t, tc.name, k.do(root, http.MethodPost, base+"/rules", tc.params), 400, "Parameter verification failed.\n", map[string]string{tc.field: tc.msg})
	}
	var log []map[string]any
	k.ok(root, http.MethodGet, base+"/log", nil, &log)
	if len(log) != 1 || log[0]["t"] != "no content" {
		t.Errorf("a VM's firewall log: %v", log)
	}

	aud := k.auditor("aud@pve", "/vms/200")
	if r := k.do(aud, http.MethodGet, base+"/rules", nil); r.status != 200 {
		t.Errorf("VM.Audit reads a VM's rules: %d %q", r.status, r.msg)
	}
	want(t, "auditor writes a rule", k.do(aud, http.MethodPost, base+"/rules", url.Values{"type": {"in"}, "action": {"DROP"}}),
		403, "Permission check failed (/vms/200, VM.Config.Network)\n", nil)
	want(t, "auditor writes options", k.do(aud, http.MethodPut, base+"/options", url.Values{"enable": {"0"}}),
		403, "Permission check failed (/vms/200, VM.Config.Network)\n", nil)

	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/clone", url.Values{"newid": {"201"}})
	var cloned []map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/qemu/201/firewall/rules", nil, &cloned)
	if len(cloned) != 2 || cloned[1]["comment"] != "ssh" {
		t.Errorf("the clone's rules: %v, want the source's", cloned)
	}
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/200", nil)
	if r := k.do(root, http.MethodGet, base+"/rules", nil); r.status != 200 || string(r.data) != "[]" {
		t.Errorf("rules after the VM's destroy: %d %s", r.status, r.data)
	}
}
