package cli

import "testing"

func TestParseDefaultGateway(t *testing.T) {
	head := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	tests := []struct {
		name, table, want string
	}{
		{"emulator bridge", head + "eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n", "10.0.0.1"},
		{"lan", head + "eth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\neth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n", "192.168.1.1"},
		{"no default route", head + "eth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		got, err := parseDefaultGateway(tt.table)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}
