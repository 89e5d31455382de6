package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testLoopback is every CT's lo as the interfaces call reports it.
var testLoopback = Interface{Name: "lo", HWAddr: "00:00:00:00:00:00", Inet: "127.0.0.1/8", Addresses: []IPAddress{
	{Address: "127.0.0.1", Type: "inet", Prefix: 8}, {Address: "::1", Type: "inet6", Prefix: 128}}}

func TestCluster_CTInterfaces(t *testing.T) {
	t.Parallel()
	lo := testLoopback
	tests := []struct {
		name    string
		vmid    int
		conf    map[string]string
		running bool
		want    []Interface
	}{
		{name: "stopped is null", vmid: 101, want: nil},
		{name: "dhcp gets a loopback address", vmid: 101, running: true, want: []Interface{lo, {
			Name: "eth0", HWAddr: "bc:24:11:5e:7a:01", Inet: "127.1.0.101/8",
			Addresses: []IPAddress{{Address: "127.1.0.101", Type: "inet", Prefix: 8}}}}},
		{name: "vmid multiple of 256", vmid: 512, running: true, want: []Interface{lo, {
			Name: "eth0", HWAddr: "bc:24:11:5e:7a:01", Inet: "127.129.2.1/8",
			Addresses: []IPAddress{{Address: "127.129.2.1", Type: "inet", Prefix: 8}}}}},
		{name: "static and manual, index order", vmid: 101, running: true, conf: map[string]string{
			"net0":  "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=10.0.0.5/24,ip6=fd00::5/64,type=veth",
			"net10": "name=eth10,bridge=vmbr0,hwaddr=BC:24:11:00:00:10,ip=manual,type=veth",
			"net2":  "name=eth2,bridge=vmbr0,hwaddr=BC:24:11:00:00:02,type=veth",
		}, want: []Interface{lo,
			{Name: "eth0", HWAddr: "bc:24:11:00:00:01", Inet: "10.0.0.5/24", Inet6: "fd00::5/64", Addresses: []IPAddress{
				{Address: "10.0.0.5", Type: "inet", Prefix: 24}, {Address: "fd00::5", Type: "inet6", Prefix: 64}}},
			{Name: "eth2", HWAddr: "bc:24:11:00:00:02"},
			{Name: "eth10", HWAddr: "bc:24:11:00:00:10"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", tt.vmid, tt.conf)
			k.edit(tt.vmid, func(g *Guest) { g.Running = tt.running })
			got, err := k.c.CTInterfaces("pve", tt.vmid)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("interfaces (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCluster_CTInterfaces_missingCT(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	got, err := k.c.CTInterfaces("pve", 4242)
	if err != nil || got != nil {
		t.Fatalf("CTInterfaces(4242) = %v, %v; want nil, nil (PVE answers null)", got, err)
	}
}

func TestDhcpAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		block, vmid int
		want        string
	}{
		{1, 100, "127.1.0.100"},
		{1, 255, "127.1.0.255"},
		{1, 256, "127.129.1.1"},
		{1, 257, "127.1.1.1"},
		{3, 1000, "127.3.3.232"},
		{126, 512, "127.254.2.1"},
	}
	for _, tt := range tests {
		if got := dhcpAddress(tt.block, tt.vmid); got != tt.want {
			t.Errorf("dhcpAddress(%d, %d) = %q, want %q", tt.block, tt.vmid, got, tt.want)
		}
	}
}
