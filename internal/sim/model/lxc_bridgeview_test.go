package model

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCluster_CTBridgeInterfaces: from the bridge, ip=dhcp is the CT's
// bridge address (never the host's loopback one); static addresses are
// as set; GuestBridgeAddresses lists where other CTs reach the CT.
func TestCluster_CTBridgeInterfaces(t *testing.T) {
	t.Parallel()
	lo := testLoopback
	tests := []struct {
		name      string
		vmid      int
		conf      map[string]string
		want      []Interface
		wantAddrs []string
	}{
		{name: "dhcp gets its bridge address", vmid: 101, want: []Interface{lo, {
			Name: "eth0", HWAddr: "bc:24:11:5e:7a:01", Inet: "10.0.0.103/16",
			Addresses: []IPAddress{{Address: "10.0.0.103", Type: "inet", Prefix: 16}}}},
			wantAddrs: []string{"10.0.0.103"}},
		{name: "vmid 65534 wraps past the gateway", vmid: 65534, want: []Interface{lo, {
			Name: "eth0", HWAddr: "bc:24:11:5e:7a:01", Inet: "10.0.2.24/16",
			Addresses: []IPAddress{{Address: "10.0.2.24", Type: "inet", Prefix: 16}}}},
			wantAddrs: []string{"10.0.2.24"}},
		{name: "static as set, dhcp with ip6 keeps the ip6", vmid: 101, conf: map[string]string{
			"net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=192.168.7.5/24,type=veth",
			"net1": "name=eth1,bridge=vmbr0,hwaddr=BC:24:11:00:00:02,ip=dhcp,ip6=fd00::5/64,type=veth",
			"net2": "name=eth2,bridge=vmbr0,hwaddr=BC:24:11:00:00:03,ip=manual,type=veth",
		}, want: []Interface{lo,
			{Name: "eth0", HWAddr: "bc:24:11:00:00:01", Inet: "192.168.7.5/24", Addresses: []IPAddress{{Address: "192.168.7.5", Type: "inet", Prefix: 24}}},
			{Name: "eth1", HWAddr: "bc:24:11:00:00:02", Inet: "10.0.0.103/16", Inet6: "fd00::5/64", Addresses: []IPAddress{
				{Address: "10.0.0.103", Type: "inet", Prefix: 16}, {Address: "fd00::5", Type: "inet6", Prefix: 64}}},
			{Name: "eth2", HWAddr: "bc:24:11:00:00:03"},
		}, wantAddrs: []string{"192.168.7.5", "10.0.0.103"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", tt.vmid, tt.conf)
			k.edit(tt.vmid, func(g *Guest) { g.Running = true })
			got, err := k.c.CTBridgeInterfaces("pve", tt.vmid)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("interfaces from the bridge (-want +got):\n%s", diff)
			}
			if addrs := k.c.GuestBridgeAddresses(tt.vmid); !slices.Equal(addrs, tt.wantAddrs) {
				t.Errorf("GuestBridgeAddresses = %v, want %v", addrs, tt.wantAddrs)
			}
			// The host's view is unchanged: loopback for dhcp.
			host, _ := k.c.CTInterfaces("pve", tt.vmid)
			if diff := cmp.Diff(host, got); tt.conf == nil && diff == "" {
				t.Error("the host's view and the bridge's are the same")
			}
		})
	}
}
