package pve

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestClientCurves: in a test binary the client offers P-256 alone and
// a server that accepts only P-256 (the tests' emulators) completes the
// handshake in one round trip, without a HelloRetryRequest; with Go's
// defaults (clientCurves nil, as built outside tests) the client gets
// the hybrid X25519MLKEM768 from a server with Go's defaults, as from
// PVE 9, and a server of P-256 alone still answers.
func TestClientCurves(t *testing.T) {
	if len(clientCurves) != 1 || clientCurves[0] != tls.CurveP256 {
		t.Fatalf("clientCurves in a test binary %v, want P-256 alone", clientCurves)
	}
	product := func(t *testing.T) {
		saved := clientCurves
		clientCurves = nil
		t.Cleanup(func() { clientCurves = saved })
	}
	for _, tt := range []struct {
		name    string
		product bool
		server  []tls.CurveID
		want    tls.CurveID
		retried bool
	}{
		{"test binary, emulator of the tests", false, []tls.CurveID{tls.CurveP256}, tls.CurveP256, false},
		{"test binary, server defaults", false, nil, tls.CurveP256, false},
		{"product, server defaults", true, nil, tls.X25519MLKEM768, false},
		{"product, P-256 alone", true, []tls.CurveID{tls.CurveP256}, tls.CurveP256, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.product {
				product(t)
			}
			var curve, retried atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				curve.Store(int64(r.TLS.CurveID))
				if r.TLS.HelloRetryRequest {
					retried.Store(1)
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"data":{"version":"9.1.2","release":"9.1","repoid":"0123abcd"}}`))
			}))
			srv.TLS = &tls.Config{CurvePreferences: tt.server}
			srv.StartTLS()
			t.Cleanup(srv.Close)
			c, err := New(Config{Endpoint: srv.URL, Token: "root@pam!t=00000000-0000-0000-0000-000000000000", Insecure: true, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Version(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := tls.CurveID(curve.Load()); got != tt.want {
				t.Errorf("key exchange %v, want %v", got, tt.want)
			}
			if got := retried.Load() == 1; got != tt.retried {
				t.Errorf("HelloRetryRequest %v, want %v", got, tt.retried)
			}
		})
	}
}
