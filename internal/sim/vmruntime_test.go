package sim

import (
	"encoding/json"
	"testing"
)

// TestForwardedAddress: the real VMs' agent reports eth0 at the address
// their SSH is forwarded on, lo and IPv6 as the guest said.
func TestForwardedAddress(t *testing.T) {
	var out any
	raw := `[{"name":"lo","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"127.0.0.1","prefix":8}]},
		{"name":"eth0","hardware-address":"bc:24:11:00:00:01","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"10.0.2.15","prefix":24},{"ip-address-type":"ipv6","ip-address":"fec0::1","prefix":64}]}]`
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(forwardedAddress(out, "127.3.0.120"))
	want := `[{"ip-addresses":[{"ip-address":"127.0.0.1","ip-address-type":"ipv4","prefix":8}],"name":"lo"},` +
		`{"hardware-address":"bc:24:11:00:00:01","ip-addresses":[{"ip-address":"127.3.0.120","ip-address-type":"ipv4","prefix":8},{"ip-address":"fec0::1","ip-address-type":"ipv6","prefix":64}],"name":"eth0"}]`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
