package sim

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// TestNetworkList: GET /nodes/{node}/network lists the node's NIC and
// bridge, filters by type as API2/Network.pm does, and hides a bridge from
// a caller without SDN.Audit or SDN.Use on it (check_sdn_bridge).
func TestNetworkList(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	_, nobody := k.newUserToken("nobody@pve", "nopriv", false)
	type row struct {
		Iface       string `json:"iface"`
		Type        string `json:"type"`
		BridgePorts string `json:"bridge_ports"`
		Active      int    `json:"active"`
	}
	for _, tc := range []struct {
		name string
		who  e2eCaller
		typ  string
		want []string
	}{
		{"all", k.root(), "", []string{"eno1/eth", "vmbr0/bridge"}},
		{"bridges", k.op(), "bridge", []string{"vmbr0/bridge"}},
		{"any bridge", k.op(), "any_bridge", []string{"vmbr0/bridge"}},
		{"eth", k.op(), "eth", []string{"eno1/eth"}},
		{"OVS bridges", k.op(), "OVSBridge", nil},
		{"no SDN privilege hides the bridge", nobody, "", []string{"eno1/eth"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := url.Values{}
			if tc.typ != "" {
				params.Set("type", tc.typ)
			}
			var rows []row
			k.ok(tc.who, http.MethodGet, "/nodes/pve/network", params, &rows)
			var got []string
			for _, r := range rows {
				got = append(got, r.Iface+"/"+r.Type)
				if r.Type == "bridge" && r.BridgePorts != "eno1" || r.Active != 1 {
					t.Errorf("row %+v", r)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if r := k.do(k.op(), http.MethodGet, "/nodes/pve/network", url.Values{"type": {"wifi"}}); r.status != 400 {
		t.Errorf("type=wifi: %d %q, want 400", r.status, r.msg)
	}
}

// TestStartOnMissingBridge: a CT whose net0 names a bridge the node does
// not have is created (PVE checks the bridge only with mtu set) but its
// start fails as vm_start's read_bridge_mtu dies, and it stays stopped.
func TestStartOnMissingBridge(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	op := k.op()
	k.create(op, "101", url.Values{"net0": {"name=eth0,bridge=vmbr9,ip=dhcp"}})
	task := k.task(op, http.MethodPost, "/nodes/pve/lxc/101/status/start", nil)
	if task.ExitStatus != "bridge 'vmbr9' does not exist" {
		t.Errorf("start: exitstatus %q, want the bridge error", task.ExitStatus)
	}
	var st struct {
		Status string `json:"status"`
	}
	k.ok(op, http.MethodGet, "/nodes/pve/lxc/101/status/current", nil, &st)
	if st.Status != "stopped" {
		t.Errorf("status %q after a failed start", st.Status)
	}
}
