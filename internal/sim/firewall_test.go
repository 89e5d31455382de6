package sim

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"testing"
)

// Issue 33: a CT's firewall options are served as pve-firewall's VM.pm
// does: an empty config with its digest at first, booleans as 0/1
// numbers, PUT with delete and digest (assert_if_modified), VM.Audit to
// read and VM.Config.Network to write; a clone copies the config and a
// destroy drops it.
func TestFirewall_guestOptions(t *testing.T) {
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		k.create(root, "101", nil)
		var idx []map[string]string
		k.ok(root, http.MethodGet, "/nodes/pve/lxc/101/firewall", nil, &idx)
		if len(idx) != 5 || idx[0]["name"] != "rules" || idx[4]["name"] != "options" {
			t.Errorf("firewall index: %v", idx)
		}
		r := k.do(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/options", nil)
		if string(r.data) != `{"digest":"da39a3ee5e6b4b0d3255bfef95601890afd80709"}` {
			t.Errorf("fresh options: %s (PVE: only the digest of nothing)", r.data)
		}
		k.ok(root, http.MethodPut, "/nodes/pve/lxc/101/firewall/options", url.Values{"enable": {"1"}, "policy_in": {"DROP"}, "log_level_in": {"info"}, "dhcp": {"0"}}, nil)
		r = k.do(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/options", nil)
		var opts map[string]any
		k.decode(r.data, &opts)
		// copy_opject_with_digest adds the digest, which the returns
		// schema does not declare.
		rest := maps.Clone(opts)
		delete(rest, "digest")
		raw, _ := json.Marshal(rest)
		checkReturns(t, v, "GET", "/nodes/{node}/lxc/{vmid}/firewall/options", raw)
		if opts["enable"] != float64(1) || opts["dhcp"] != float64(0) || opts["policy_in"] != "DROP" || opts["log_level_in"] != "info" {
			t.Errorf("options after PUT: %v", opts)
		}
		want(t, "stale digest", k.do(root, http.MethodPut, "/nodes/pve/lxc/101/firewall/options", url.Values{"enable": {"0"}, "digest": {"da39a3ee5e6b4b0d3255bfef95601890afd80709"}}),
			500, "detected modified configuration - file changed by other user? Try again.\n", nil)
		want(t, "unknown delete", k.do(root, http.MethodPut, "/nodes/pve/lxc/101/firewall/options", url.Values{"delete": {"nonsense"}}),
			400, "Parameter verification failed.\n", map[string]string{"delete": "no such option 'nonsense'"})
		k.ok(root, http.MethodPut, "/nodes/pve/lxc/101/firewall/options", url.Values{"delete": {"dhcp,log_level_in"}, "digest": {opts["digest"].(string)}}, nil)
		opts = nil
		k.ok(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/options", nil, &opts)
		if _, ok := opts["dhcp"]; ok || opts["enable"] != float64(1) {
			t.Errorf("after delete: %v", opts)
		}

		aud := k.auditor("aud@pve", "/vms/101")
		if r := k.do(aud, http.MethodGet, "/nodes/pve/lxc/101/firewall/options", nil); r.status != 200 {
			t.Errorf("VM.Audit reads the options: %d %q", r.status, r.msg)
		}
		want(t, "auditor writes", k.do(aud, http.MethodPut, "/nodes/pve/lxc/101/firewall/options", url.Values{"enable": {"0"}}),
			403, "Permission check failed (/vms/101, VM.Config.Network)\n", nil)

		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/clone", url.Values{"newid": {"102"}})
		var cloned map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/lxc/102/firewall/options", nil, &cloned)
		if cloned["digest"] != opts["digest"] {
			t.Errorf("clone's firewall options %v, source's %v", cloned, opts)
		}
		k.mustOK(root, http.MethodDelete, "/nodes/pve/lxc/101", nil)
		r = k.do(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/options", nil)
		if string(r.data) != `{"digest":"da39a3ee5e6b4b0d3255bfef95601890afd80709"}` {
			t.Errorf("options after destroy: %s", r.data)
		}
	})
}
