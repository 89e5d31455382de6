package cli

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pve"
)

// TestSimServe_allowedHost: corral sim serve answers a request to its
// loopback port under a name not its own (DNS rebinding) with 421, an
// --allowed-host name with the API, and corral's own client (the
// endpoint and fingerprint of DIR/env) works as before.
func TestSimServe_allowedHost(t *testing.T) {
	t.Parallel()
	vars := serveSim(t, "--allowed-host", "pve.lan").env(t)
	c, err := pve.New(pve.Config{Endpoint: vars["PROXMOX_VE_ENDPOINT"], Token: vars["PROXMOX_VE_API_TOKEN"], Fingerprint: vars["PROXMOX_VE_FINGERPRINT"]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Version(context.Background()); err != nil {
		t.Errorf("corral's client at %s: %v", vars["PROXMOX_VE_ENDPOINT"], err)
	}
	u, _ := url.Parse(vars["PROXMOX_VE_ENDPOINT"])
	// The certificate is beside the point here: the name is.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, vars["PROXMOX_VE_ENDPOINT"]+"/api2/json/version", nil)
		req.Host = host
		req.Header.Set("Authorization", "PVEAPIToken="+vars["PROXMOX_VE_API_TOKEN"])
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("evil.example:" + u.Port()); code != http.StatusMisdirectedRequest || !strings.Contains(body, "corral sim serve --allowed-host evil.example") {
		t.Errorf("Host evil.example: %d %q", code, body)
	}
	if code, body := get("pve.lan:" + u.Port()); code != http.StatusOK || !strings.Contains(body, "version") {
		t.Errorf("Host pve.lan: %d %q", code, body)
	}
}
