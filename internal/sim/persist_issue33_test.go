package sim

import (
	"net/http"
	"net/url"
	"testing"
)

// Issue 33: pools with their members, a CT's firewall options and
// aliases and rules, the cluster's aliases, options and security
// groups survive a restart of the emulator.
func TestPersistence_poolsAndFirewall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Dir: dir, TimeScale: zeroScale(), NodeMemory: 32 << 30}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ka := &e2e{t: t, srv: a, dir: dir, hc: a.HTTPClient()}
	root := ka.root()
	ka.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"keep"}, "comment": {"c"}}, nil)
	ka.create(root, "120", url.Values{"pool": {"keep"}})
	ka.ok(root, http.MethodPut, "/nodes/pve/lxc/120/firewall/options", url.Values{"enable": {"1"}}, nil)
	ka.ok(root, http.MethodPost, "/nodes/pve/lxc/120/firewall/aliases", url.Values{"name": {"db"}, "cidr": {"10.0.0.5"}}, nil)
	ka.ok(root, http.MethodPost, "/cluster/firewall/aliases", url.Values{"name": {"lan"}, "cidr": {"10.0.0.0/8"}}, nil)
	ka.ok(root, http.MethodPost, "/nodes/pve/lxc/120/firewall/rules", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "macro": {"SSH"}, "source": {"db"}, "enable": {"1"}}, nil)
	ka.ok(root, http.MethodPost, "/cluster/firewall/groups", url.Values{"group": {"web"}}, nil)
	ka.ok(root, http.MethodPost, "/cluster/firewall/groups/web", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "macro": {"HTTP"}}, nil)
	ka.ok(root, http.MethodPut, "/cluster/firewall/options", url.Values{"policy_in": {"DROP"}}, nil)
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	k := openE2E(t, opts)
	root = k.root()
	if got := k.poolMembers("9.1", "keep", ""); len(got) != 1 || got[0] != "lxc/120" {
		t.Errorf("pool keep after a restart: %v", got)
	}
	var fwopts map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/lxc/120/firewall/options", nil, &fwopts)
	if fwopts["enable"] != float64(1) {
		t.Errorf("firewall options after a restart: %v", fwopts)
	}
	fwopts = nil
	k.ok(root, http.MethodGet, "/cluster/firewall/options", nil, &fwopts)
	if fwopts["policy_in"] != "DROP" {
		t.Errorf("cluster firewall options after a restart: %v", fwopts)
	}
	for _, p := range []string{"/nodes/pve/lxc/120/firewall/aliases/db", "/cluster/firewall/aliases/lan",
		"/nodes/pve/lxc/120/firewall/rules/0", "/cluster/firewall/groups/web/0"} {
		if r := k.do(root, http.MethodGet, p, nil); r.status != 200 {
			t.Errorf("%s after a restart: %d %q", p, r.status, r.msg)
		}
	}
}
