package pve

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/localfile"
)

// clientCurves are the key exchanges the client offers: nil (Go's
// defaults, the hybrid X25519MLKEM768 preferred, as PVE 9 prefers it)
// except in test binaries, where they are P-256 alone, the one key
// exchange the tests' emulators accept (internal/pvetest). Go ignores the
// list's order and offers its own first choices' key shares, so with more
// than P-256 listed every test handshake computed an X25519 and an ML-KEM
// key share the server refused, then P-256 after a HelloRetryRequest:
// under -race that Go code was 3% of internal/cli's CPU (issue 30).
// TestClientCurves checks both: P-256 in one round trip here, the hybrid
// with Go's defaults.
var clientCurves []tls.CurveID

func init() {
	if testing.Testing() {
		clientCurves = []tls.CurveID{tls.CurveP256}
	}
}

// CertError is a server certificate the client did not trust. Fingerprint
// is the SHA-256 of the leaf the server presented, in PVE's colon-separated
// upper-case form, so the message can say exactly what to pin. Pinned is
// set when a pinned fingerprint did not match; Err is the x509 error when
// the certificate failed CA verification.
type CertError struct {
	Fingerprint string
	Pinned      string
	Err         error
}

func (e *CertError) Error() string {
	if e.Pinned != "" {
		return fmt.Sprintf("server certificate fingerprint %s does not match the pinned %s; "+
			"if the host's certificate was replaced on purpose, pin the new one with --fingerprint %s (or PROXMOX_VE_FINGERPRINT)",
			e.Fingerprint, e.Pinned, e.Fingerprint)
	}
	return fmt.Sprintf("%v; the server certificate's SHA-256 fingerprint is %s: "+
		"after checking it on the host (pvenode cert info), pin it with --fingerprint %s (or PROXMOX_VE_FINGERPRINT), or trust its CA with --ca-file",
		e.Err, e.Fingerprint, e.Fingerprint)
}

func (e *CertError) Unwrap() error { return e.Err }

// newTransport builds the HTTPS transport for cfg. Verification is on by
// default against the system roots or CAFile. With Fingerprint it is
// replaced by pinning the leaf's SHA-256, which ignores the chain and the
// hostname, as PVE's tools pin a self-signed node certificate. Insecure
// turns verification off and says so once.
func newTransport(cfg Config, log *slog.Logger) (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep a connection for each request the client runs at once
	// (MaxConcurrent, 8 by default): with net/http's default of 2, the
	// others are closed after each answer and the next request pays a
	// new TLS handshake, on both sides.
	tr.MaxIdleConnsPerHost = max(cfg.MaxConcurrent, 16)
	if cfg.DialContext != nil {
		tr.DialContext = cfg.DialContext
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, CurvePreferences: clientCurves}
	switch {
	case cfg.Fingerprint != "":
		pin, err := parseFingerprint(cfg.Fingerprint)
		if err != nil {
			return nil, err
		}
		tc.InsecureSkipVerify = true // replaced by VerifyConnection below
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: server sent no certificate")
			}
			seen := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if !bytes.Equal(seen[:], pin) {
				return &CertError{Fingerprint: formatFingerprint(seen[:]), Pinned: formatFingerprint(pin)}
			}
			return nil
		}
	case cfg.Insecure:
		tc.InsecureSkipVerify = true
		log.Warn("TLS verification is disabled (insecure): the API token can be read by anyone on the path; pin the certificate with --fingerprint instead")
	case cfg.CAFile != "":
		pem, err := localfile.Read(cfg.CAFile, localfile.MaxPEM)
		if err != nil {
			return nil, fmt.Errorf("ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca file %s: no PEM certificates found", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	tr.TLSClientConfig = tc
	return tr, nil
}

// parseFingerprint reads a SHA-256 fingerprint: 64 hex digits, optionally
// separated by colons, any case.
func parseFingerprint(s string) ([]byte, error) {
	clean := strings.ReplaceAll(strings.TrimSpace(s), ":", "")
	b, err := hex.DecodeString(clean)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("fingerprint %q: want a SHA-256 fingerprint, 64 hex digits optionally separated by colons (pvenode cert info shows it)", s)
	}
	return b, nil
}

// formatFingerprint prints b as PVE does: AB:CD:….
func formatFingerprint(b []byte) string {
	h := strings.ToUpper(hex.EncodeToString(b))
	var sb strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(h[i : i+2])
	}
	return sb.String()
}

// fingerprintOf is the SHA-256 fingerprint of cert.
func fingerprintOf(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return formatFingerprint(sum[:])
}
