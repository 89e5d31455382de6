package sim

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Issue 33: a CT's firewall options are served as pve-firewall's VM.pm
// does: an empty config with its digest at first, booleans as 0/1
// numbers, PUT with delete and digest (assert_if_modified), VM.Audit to
// read and VM.Config.Network to write; a clone copies the config and a
// destroy drops it.
func TestFirewall_guestOptions(t *testing.T) {
	t.Parallel()
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

// Issue 33: firewall aliases, the cluster's and a CT's, as Aliases.pm
// serves them: a list by lower-cased name with ipversion and the list's
// digest on every entry, the CIDR without a host prefix, names unique in
// any case, rename and digest on PUT, 400 for a missing one;
// Sys.Audit/Sys.Modify on / for the cluster's, VM.Audit/VM.Config.Network
// for a CT's.
func TestFirewall_aliases(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		for _, base := range []string{"/cluster/firewall/aliases", "/nodes/pve/lxc/101/firewall/aliases"} {
			path := strings.Replace(strings.Replace(base, "/pve/", "/{node}/", 1), "/101/", "/{vmid}/", 1)
			r := k.do(root, http.MethodGet, base, nil)
			if r.status != 200 || string(r.data) != "[]" {
				t.Fatalf("GET %s on a fresh state: %d %s", base, r.status, r.data)
			}
			k.ok(root, http.MethodPost, base, url.Values{"name": {"Office"}, "cidr": {"192.0.2.10/32"}, "comment": {"hq"}}, nil)
			k.ok(root, http.MethodPost, base, url.Values{"name": {"lan6"}, "cidr": {"2001:db8::/64"}}, nil)
			want(t, base+" taken", k.do(root, http.MethodPost, base, url.Values{"name": {"office"}, "cidr": {"192.0.2.11"}}),
				400, "Parameter verification failed.\n", map[string]string{"name": "alias 'office' already exists"})
			want(t, base+" bad cidr", k.do(root, http.MethodPost, base, url.Values{"name": {"bad"}, "cidr": {"192.0.2.1/33"}}),
				400, "Parameter verification failed.\n", map[string]string{"cidr": "invalid format - value does not look like a valid IP address or CIDR network\n"})
			r = k.do(root, http.MethodGet, base, nil)
			var list []map[string]any
			k.decode(r.data, &list)
			// parse_alias files each alias with its ipversion, which the
			// list sends though its returns schema does not declare it.
			var rest []map[string]any
			for _, e := range list {
				e = maps.Clone(e)
				delete(e, "ipversion")
				rest = append(rest, e)
			}
			raw, _ := json.Marshal(rest)
			checkReturns(t, v, "GET", path, raw)
			if len(list) != 2 || list[1]["name"] != "Office" || list[1]["cidr"] != "192.0.2.10" || list[1]["ipversion"] != float64(4) ||
				list[0]["ipversion"] != float64(6) || list[0]["digest"] != list[1]["digest"] {
				t.Errorf("GET %s = %s", base, r.data)
			}
			var one map[string]any
			k.ok(root, http.MethodGet, base+"/OFFICE", nil, &one)
			if one["comment"] != "hq" || one["digest"] != nil {
				t.Errorf("GET %s/OFFICE = %v", base, one)
			}
			want(t, base+" stale digest", k.do(root, http.MethodPut, base+"/office", url.Values{"cidr": {"192.0.2.0/24"}, "digest": {"0000000000000000000000000000000000000000"}}),
				500, "detected modified configuration - file changed by other user? Try again.\n", nil)
			k.ok(root, http.MethodPut, base+"/office", url.Values{"cidr": {"192.0.2.0/24"}, "rename": {"branch"}, "digest": {list[0]["digest"].(string)}}, nil)
			want(t, base+" renamed away", k.do(root, http.MethodGet, base+"/office", nil), 400, "Parameter verification failed.\n", map[string]string{"name": "no such alias"})
			one = nil
			k.ok(root, http.MethodGet, base+"/branch", nil, &one)
			if one["cidr"] != "192.0.2.0/24" || one["comment"] != nil || one["name"] != "branch" {
				t.Errorf("after rename: %v (PVE drops a comment the PUT does not repeat)", one)
			}
			k.ok(root, http.MethodDelete, base+"/branch", nil, nil)
			k.ok(root, http.MethodDelete, base+"/nothing", nil, nil)
			k.ok(root, http.MethodGet, base, nil, &list)
			if len(list) != 1 {
				t.Errorf("after delete: %v", list)
			}
		}
		// refs: the cluster's aliases, then the CT's, by lower-cased name.
		k.ok(root, http.MethodPost, "/cluster/firewall/aliases", url.Values{"name": {"GW"}, "cidr": {"10.0.0.1"}, "comment": {"gateway"}}, nil)
		r := k.do(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/refs", nil)
		checkReturns(t, v, "GET", "/nodes/{node}/lxc/{vmid}/firewall/refs", r.data)
		if got := string(r.data); got != `[{"comment":"gateway","name":"gw","ref":"gw","scope":"dc","type":"alias"},{"name":"lan6","ref":"lan6","scope":"dc","type":"alias"},{"name":"lan6","ref":"lan6","scope":"guest","type":"alias"}]` {
			t.Errorf("refs = %s", got)
		}
		if r := k.do(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/refs", url.Values{"type": {"ipset"}}); string(r.data) != "[]" {
			t.Errorf("refs type=ipset = %s", r.data)
		}

		aud := k.auditor("aud@pve", "/vms/101")
		want(t, "cluster aliases need Sys.Audit on /", k.do(aud, http.MethodGet, "/cluster/firewall/aliases", nil), 403, "Permission check failed (/, Sys.Audit)\n", nil)
		if r := k.do(aud, http.MethodGet, "/nodes/pve/lxc/101/firewall/aliases", nil); r.status != 200 {
			t.Errorf("VM.Audit reads a CT's aliases: %d %q", r.status, r.msg)
		}
		want(t, "CT aliases need VM.Config.Network", k.do(aud, http.MethodPost, "/nodes/pve/lxc/101/firewall/aliases", url.Values{"name": {"x1"}, "cidr": {"10.0.0.1"}}),
			403, "Permission check failed (/vms/101, VM.Config.Network)\n", nil)
	})
}

// Issue 33: IP sets, the cluster's and a CT's, as IPSet.pm serves them:
// the list by name with its digest; entries newest first until the file
// sorts them by CIDR; alias references resolved (dc/ and guest/ scopes);
// duplicates, zero prefixes and non-empty deletes refused; rename; refs
// lists them as +name.
func TestFirewall_ipsets(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		k.ok(root, http.MethodPost, "/cluster/firewall/aliases", url.Values{"name": {"gw"}, "cidr": {"10.0.0.1"}}, nil)
		for _, base := range []string{"/cluster/firewall/ipset", "/nodes/pve/lxc/101/firewall/ipset"} {
			path := strings.Replace(strings.Replace(base, "/pve/", "/{node}/", 1), "/101/", "/{vmid}/", 1)
			if r := k.do(root, http.MethodGet, base, nil); r.status != 200 || string(r.data) != "[]" {
				t.Fatalf("GET %s fresh: %d %s", base, r.status, r.data)
			}
			k.ok(root, http.MethodPost, base, url.Values{"name": {"trusted"}, "comment": {"ok"}}, nil)
			want(t, base+" twice", k.do(root, http.MethodPost, base, url.Values{"name": {"trusted"}}), 400, "Parameter verification failed.\n",
				map[string]string{"name": "IPSet 'trusted' already exists"})
			r := k.do(root, http.MethodGet, base, nil)
			checkReturns(t, v, "GET", path, r.data)
			for _, cidr := range []string{"192.0.2.0/24", "10.1.1.1/32", "dc/gw"} {
				k.ok(root, http.MethodPost, base+"/trusted", url.Values{"cidr": {cidr}}, nil)
			}
			want(t, base+" duplicate", k.do(root, http.MethodPost, base+"/trusted", url.Values{"cidr": {"10.1.1.1"}}), 400, "Parameter verification failed.\n",
				map[string]string{"cidr": "address '10.1.1.1' already exists"})
			want(t, base+" zero prefix", k.do(root, http.MethodPost, base+"/trusted", url.Values{"cidr": {"0.0.0.0/0"}}), 400, "Parameter verification failed.\n",
				map[string]string{"cidr": "a zero prefix is not allowed in ipset entries"})
			want(t, base+" unknown alias", k.do(root, http.MethodPost, base+"/trusted", url.Values{"cidr": {"nowhere"}}), 500, "no such alias 'nowhere'\n", nil)
			want(t, base+" missing set", k.do(root, http.MethodGet, base+"/nope", nil), 500, "no such IPSet 'nope'\n", nil)
			r = k.do(root, http.MethodGet, base+"/trusted", nil)
			checkReturns(t, v, "GET", path+"/{name}", r.data)
			var entries []map[string]any
			k.decode(r.data, &entries)
			if len(entries) != 3 || entries[0]["cidr"] != "10.1.1.1" || entries[1]["cidr"] != "192.0.2.0/24" || entries[2]["cidr"] != "dc/gw" {
				t.Errorf("%s/trusted = %s (the file's order: by CIDR)", base, r.data)
			}
			k.ok(root, http.MethodPut, base+"/trusted/"+url.PathEscape("192.0.2.0/24"), url.Values{"nomatch": {"1"}, "comment": {"not this"}, "digest": {entries[0]["digest"].(string)}}, nil)
			var one map[string]any
			k.ok(root, http.MethodGet, base+"/trusted/"+url.PathEscape("192.0.2.0/24"), nil, &one)
			if one["nomatch"] != float64(1) || one["comment"] != "not this" {
				t.Errorf("entry after PUT: %v", one)
			}
			want(t, base+" not empty", k.do(root, http.MethodDelete, base+"/trusted", nil), 500, "IPSet 'trusted' is not empty\n", nil)
			k.ok(root, http.MethodPost, base, url.Values{"name": {"friends"}, "rename": {"trusted"}}, nil)
			var sets []map[string]any
			k.ok(root, http.MethodGet, base, nil, &sets)
			if len(sets) != 1 || sets[0]["name"] != "friends" || sets[0]["comment"] != "ok" {
				t.Errorf("after rename: %v", sets)
			}
		}
		var refs []map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/refs", url.Values{"type": {"ipset"}}, &refs)
		if len(refs) != 2 || refs[0]["ref"] != "+friends" || refs[0]["scope"] != "dc" || refs[1]["scope"] != "guest" {
			t.Errorf("ipset refs: %v", refs)
		}
		k.ok(root, http.MethodDelete, "/cluster/firewall/ipset/friends", url.Values{"force": {"1"}}, nil)
		k.ok(root, http.MethodDelete, "/nodes/pve/lxc/101/firewall/ipset/friends/"+url.PathEscape("10.1.1.1"), nil, nil)
		var entries []map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/lxc/101/firewall/ipset/friends", nil, &entries)
		if len(entries) != 2 {
			t.Errorf("after deleting an entry: %v", entries)
		}
	})
}
