package pve_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/internal/pve"
)

// tlsServer is a TLS test server that answers /version, and the
// fingerprint of its certificate in PVE's AA:BB:… form.
func tlsServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeData(w, map[string]string{"version": "9.1.2", "release": "9.1", "repoid": "0123abcd"})
	}))
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(srv.Certificate().Raw)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var parts []string
	for i := 0; i < len(h); i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return srv, strings.Join(parts, ":")
}

func TestClient_fingerprintPinning(t *testing.T) {
	srv, fp := tlsServer(t)
	wrong := strings.Repeat("AB:", 31) + "AB"
	tests := []struct {
		name        string
		fingerprint string
		wantErr     bool
	}{
		{"colon upper case", fp, false},
		{"bare lower case", strings.ToLower(strings.ReplaceAll(fp, ":", "")), false},
		{"wrong", wrong, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := pve.New(pve.Config{Endpoint: srv.URL, Token: testToken, Fingerprint: tt.fingerprint})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			_, err = c.Version(ctx(t))
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Version with the right fingerprint: %v", err)
				}
				return
			}
			var ce *pve.CertError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *CertError", err, err)
			}
			if got, want := ce.Fingerprint, fp; got != want {
				t.Errorf("CertError.Fingerprint=%s, want %s", got, want)
			}
			for _, want := range []string{fp, wrong, "--fingerprint", "PROXMOX_VE_FINGERPRINT"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			noSecret(t, "cert error", err.Error())
		})
	}
}

// Without a fingerprint, an untrusted certificate is an x509 error that
// says which fingerprint to pin.
func TestClient_untrustedCertificate(t *testing.T) {
	srv, fp := tlsServer(t)
	c, err := pve.New(pve.Config{Endpoint: srv.URL, Token: testToken})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = c.Version(ctx(t))
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) {
		t.Fatalf("err = %v (%T), want an x509.UnknownAuthorityError in the chain", err, err)
	}
	for _, want := range []string{"x509", fp, "--fingerprint", "--ca-file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestClient_caFile(t *testing.T) {
	srv, _ := tlsServer(t)
	path := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := pve.New(pve.Config{Endpoint: srv.URL, Token: testToken, CAFile: path})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := c.Version(ctx(t)); err != nil {
		t.Fatalf("Version with the CA file: %v", err)
	}

	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("not pem"), 0o600)
	if _, err := pve.New(pve.Config{Endpoint: srv.URL, Token: testToken, CAFile: empty}); err == nil {
		t.Errorf("New with a CA file without certificates succeeded")
	}
}

func TestClient_insecureWarnsOnce(t *testing.T) {
	srv, _ := tlsServer(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := pve.New(pve.Config{Endpoint: srv.URL, Token: testToken, Insecure: true, Logger: log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for range 3 {
		if _, err := c.Version(ctx(t)); err != nil {
			t.Fatalf("Version, insecure: %v", err)
		}
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 {
		t.Errorf("%d warnings logged, want 1:\n%s", got, logs.String())
	}
}

func TestNew_badFingerprint(t *testing.T) {
	for _, fp := range []string{"AB:CD", "zz" + strings.Repeat("00", 31), strings.Repeat("00", 33)} {
		if _, err := pve.New(pve.Config{Endpoint: "https://pve:8006", Token: testToken, Fingerprint: fp}); err == nil {
			t.Errorf("New(Fingerprint=%q) succeeded, want error", fp)
		}
	}
}

// Pinning replaces chain and hostname checks; without a pin the hostname
// is still checked. The test server's certificate names 127.0.0.1 and
// example.com, not localhost.
func TestClient_hostnameCheckedUnlessPinned(t *testing.T) {
	srv, fp := tlsServer(t)
	byName := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	pinned, err := pve.New(pve.Config{Endpoint: byName, Token: testToken, Fingerprint: fp})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := pinned.Version(ctx(t)); err != nil {
		t.Errorf("Version via %s with the pinned fingerprint: %v", byName, err)
	}

	trusted, err := pve.New(pve.Config{Endpoint: byName, Token: testToken, CAFile: path})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = trusted.Version(ctx(t))
	var he x509.HostnameError
	if !errors.As(err, &he) {
		t.Fatalf("Version via %s with only the CA trusted: err = %v (%T), want an x509.HostnameError", byName, err, err)
	}
	noSecret(t, "hostname error", err.Error())
}

// A redirect is not followed: the token header never reaches the target,
// even on the same host over plain http.
func TestClient_redirectNotFollowed(t *testing.T) {
	var leaked atomic.Bool
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
		writeData(w, map[string]string{"version": "9.1.2", "release": "9.1"})
	}))
	t.Cleanup(plain.Close)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(srv.Certificate().Raw)
	c, err := pve.New(pve.Config{Endpoint: srv.URL, Token: testToken, Fingerprint: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = c.Version(ctx(t))
	var ae *pve.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusFound {
		t.Errorf("err = %v, want the 302 as an *APIError", err)
	}
	if leaked.Load() {
		t.Error("the redirect target got the token header")
	}
}
