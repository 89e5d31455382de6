package cli

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseDefaultGateway(t *testing.T) {
	t.Parallel()
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

// TestCheckEndpointFromGuest_trust: the agent's endpoint check trusts the
// API's certificate as every other call of corral does (one
// connFlags.pveConfig): --insecure skips verification, a pinned
// fingerprint verifies it, neither refuses it. The dialer stands in for
// the guest's (direct-tcpip).
func TestCheckEndpointFromGuest_trust(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api2/json/version" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"data":{"release":"9.1","repoid":"ee7bad0a","version":"9.1.9"}}`)
	}))
	defer srv.Close()
	sum := sha256.Sum256(srv.Certificate().Raw)
	var fp []string
	for _, b := range sum {
		fp = append(fp, fmt.Sprintf("%02X", b))
	}
	var d net.Dialer
	tests := []struct {
		name    string
		cf      connFlags
		wantErr string
	}{
		{"--insecure", connFlags{token: "u@pve!t=s", insecure: true}, ""},
		{"pinned fingerprint", connFlags{token: "u@pve!t=s", fingerprint: strings.Join(fp, ":")}, ""},
		{"no trust setting", connFlags{token: "u@pve!t=s"}, "certificate"},
	}
	for _, tt := range tests {
		err := checkEndpointFromGuest(context.Background(), d.DialContext, tt.cf, srv.URL)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}
