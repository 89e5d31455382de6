package apply

import (
	"testing"

	"github.com/corralhq/corral/internal/pve"
)

// TestVMAddresses: a VM's address is the static one of its ipconfig0,
// else the first IPv4 its guest agent lists that is not loopback.
func TestVMAddresses(t *testing.T) {
	for in, want := range map[string]string{"ip=10.0.0.5/24,gw=10.0.0.1": "10.0.0.5", "gw=10.0.0.1,ip=10.0.0.6/24": "10.0.0.6", "ip=dhcp": "", "": ""} {
		if got := configAddress(in); got != want {
			t.Errorf("configAddress(%q) = %q, want %q", in, got, want)
		}
	}
	ifs := []pve.Interface{
		{Name: "lo", IPAddresses: []pve.IPAddress{{Address: "127.0.0.1", Type: "ipv4"}, {Address: "::1", Type: "ipv6"}}},
		{Name: "eth0", IPAddresses: []pve.IPAddress{{Address: "fe80::1", Type: "ipv6"}, {Address: "10.0.2.15", Type: "ipv4", Prefix: 24}}},
	}
	if got := GuestIPv4(ifs); got != "10.0.2.15" {
		t.Fatalf("GuestIPv4 = %q", got)
	}
	if got := GuestIPv4(ifs[:1]); got != "" {
		t.Fatalf("GuestIPv4 of loopback only = %q", got)
	}
}
