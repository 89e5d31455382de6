package sim

import (
	"crypto/tls"
	"net/http"
	"testing"
)

// TestTLS_defaultCurves: an emulator with Go's default key exchanges
// agrees on the hybrid X25519MLKEM768 with its own client, as PVE 9's
// OpenSSL does with corral; one limited to P-256 (the tests' emulators)
// gets P-256 from its client, which offers what the listener accepts.
func TestTLS_defaultCurves(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		curves []tls.CurveID
		want   tls.CurveID
	}{
		{"defaults", nil, tls.X25519MLKEM768},
		{"P-256 alone", []tls.CurveID{tls.CurveP256}, tls.CurveP256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(Options{Dir: t.TempDir(), Listener: ListenTLS, Listen: "127.0.0.1:0", TimeScale: zeroScale(), TLSCurves: tc.curves})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			resp, err := srv.HTTPClient().Get(srv.URL() + "/api2/json/version")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.TLS == nil {
				t.Fatalf("GET /version without a token: %d, TLS %v", resp.StatusCode, resp.TLS != nil)
			}
			if resp.TLS.CurveID != tc.want {
				t.Errorf("key exchange %v, want %v", resp.TLS.CurveID, tc.want)
			}
		})
	}
}
