package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// dialRecorder replaces the endpoint dialler for one test: loopback
// addresses are dialled for real, anything else is recorded and refused,
// so no test traffic ever leaves the machine.
type dialRecorder struct {
	mu      sync.Mutex
	offHost []string
	// onOff, when set, is called after an off-host dial was recorded.
	onOff func()
}

func recordDials(t *testing.T) *dialRecorder {
	t.Helper()
	r := &dialRecorder{}
	old := dialContext
	dialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		r.mu.Lock()
		r.offHost = append(r.offHost, addr)
		onOff := r.onOff
		r.mu.Unlock()
		if onOff != nil {
			onOff()
		}
		return nil, errors.New("test dialer: refusing to dial off the loopback")
	}
	t.Cleanup(func() { dialContext = old })
	return r
}

func (r *dialRecorder) off() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.offHost...)
}

// TestPlainHTTPRefusedBeforeDialing: an http:// endpoint off the loopback
// is refused before any connection; --insecure-plain-http (or its env
// variable) lets it through with a warning, and only then is it dialled.
func TestPlainHTTPRefusedBeforeDialing(t *testing.T) {
	for _, k := range []string{"PROXMOX_VE_ENDPOINT", "PROXMOX_VE_API_TOKEN", "PROXMOX_VE_FINGERPRINT", "PROXMOX_VE_CA_FILE", "PROXMOX_VE_INSECURE", "CORRAL_INSECURE_PLAIN_HTTP", "CORRAL_LOG"} {
		t.Setenv(k, "")
	}
	file := filepath.Join(t.TempDir(), "corral.yaml")
	if err := os.WriteFile(file, []byte(goodApp), 0o644); err != nil {
		t.Fatal(err)
	}
	const secret = "0d9e7a2c-5f1b-4c3e-9a8d-112233445566"
	base := []string{"plan", "-f", file, "--endpoint", "http://192.0.2.10:8006", "--api-token", "corral@pve!op=" + secret}
	for _, tc := range []struct {
		name      string
		args      []string
		env       string
		wantDial  bool
		wantInErr string
	}{
		{name: "refused", args: base, wantInErr: "Error: endpoint http://192.0.2.10:8006/api2/json: plain http would send the API token in clear text to a host off this machine; use https (pin a self-signed certificate with --fingerprint), or pass --insecure-plain-http (env CORRAL_INSECURE_PLAIN_HTTP=1) if the network path is trusted\n"},
		{name: "refused-name", args: []string{"plan", "-f", file, "--endpoint", "http://pve.example.com:8006", "--api-token", "corral@pve!op=" + secret}, wantInErr: "Error: endpoint http://pve.example.com:8006/api2/json: plain http would send"},
		{name: "flag", args: append(append([]string(nil), base...), "--insecure-plain-http"), wantDial: true, wantInErr: "corral: warning: plain http allowed (--insecure-plain-http): the API token crosses the network in clear text\n"},
		{name: "env", args: base, env: "1", wantDial: true, wantInErr: "corral: warning: plain http allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CORRAL_INSECURE_PLAIN_HTTP", tc.env)
			rec := recordDials(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The client retries a refused dial; one attempt is proof enough.
			rec.mu.Lock()
			rec.onOff = cancel
			rec.mu.Unlock()
			var out, errb bytes.Buffer
			code := Run(ctx, tc.args, strings.NewReader(""), &out, &errb)
			if strings.Contains(errb.String()+out.String(), secret) {
				t.Fatalf("output holds the token secret:\n%s", errb.String())
			}
			if !strings.Contains(errb.String(), tc.wantInErr) {
				t.Errorf("stderr:\n%s\nwant it to hold:\n%s", errb.String(), tc.wantInErr)
			}
			dials := rec.off()
			if !tc.wantDial {
				if code != ExitError || len(dials) != 0 {
					t.Errorf("exit %d, dials %v; want exit 1 and no dial", code, dials)
				}
				return
			}
			if len(dials) == 0 || dials[0] != "192.0.2.10:8006" {
				t.Errorf("dials %v, want the endpoint dialled once allowed", dials)
			}
		})
	}
}

// Every file corral reads is a regular file of bounded size: devices and
// FIFOs are refused before they are opened (nothing blocks, nothing fills
// memory), with a clear message (issue 12, item 3).
func TestUnboundedReadsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ref := writeManifest(t, "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    password: ${file:/dev/zero}\n")
	good := writeManifestIn(t, "other", "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "-f", "/dev/zero"}, "/dev/zero is not a regular file (a character device)"},
		{[]string{"validate", "-f", fifo}, "is not a regular file (a FIFO)"},
		{[]string{"validate", "-f", ref}, "/dev/zero is not a regular file"},
		{[]string{"plan", "-f", good, "--endpoint", "https://127.0.0.1:1", "--api-token", "a@pve!t=x", "--ca-file", "/dev/urandom"}, "/dev/urandom is not a regular file"},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
		if code != ExitError || !strings.Contains(errb.String()+out.String(), tc.want) {
			t.Errorf("corral %s: exit %d\n%s%s", strings.Join(tc.args, " "), code, out.String(), errb.String())
		}
	}
}

// A description line that reads as one of corral's markers once
// normalized (a no-break space before corral-hostkey:, a zero-width
// space, a line break PVE or a browser may honour) is refused, so no
// manifest can plant a host-key pin (issue 12, item 2).
func TestDescriptionCannotPlantMarkers(t *testing.T) {
	t.Parallel()
	for _, desc := range []string{"\u00a0corral-hostkey: ssh-ed25519 AAAA", "ok\u2028corral-app: other", "\u200bcorral-provisioned: 0", "x\rCORRAL-hostkey: k"} {
		m := writeManifest(t, "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    description: "+strconv.Quote(desc)+"\n")
		var out, errb bytes.Buffer
		code := Run(context.Background(), []string{"validate", "-f", m}, strings.NewReader(""), &out, &errb)
		if code != ExitError || !strings.Contains(errb.String(), "reserved for corral's own lines") {
			t.Errorf("description %q: exit %d\n%s%s", desc, code, out.String(), errb.String())
		}
	}
}

// Volumes over the kernel's file systems and adoptions of a root file
// system are refused before anything changes (issue 12, item 4).
func TestMountAndAdoptGaps(t *testing.T) {
	t.Parallel()
	for _, mount := range []string{"/proc", "/sys/fs", "/dev"} {
		m := writeManifest(t, "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    volumes:\n      - name: v\n        size: 1G\n        mount: "+mount+"\n")
		var out, errb bytes.Buffer
		if code := Run(context.Background(), []string{"validate", "-f", m}, strings.NewReader(""), &out, &errb); code != ExitError || !strings.Contains(errb.String(), "is the kernel's") {
			t.Errorf("mount %s: exit %d\n%s", mount, code, errb.String())
		}
	}
	c := newCluster(t)
	m := writeManifest(t, threeVolumes("alpha"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	k := c.keepers()[0]
	rootfs := plan.ParseMountPoint(c.config(k)["rootfs"]).Volume
	thief := writeManifestIn(t, "thief", "apps:\n  - name: beta\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    volumes:\n      - name: sys\n        mount: /srv/sys\n        adopt: "+rootfs+"\n")
	before := len(c.srv.Cluster().Resources("vm"))
	if r := c.run("apply", "-f", thief, "--auto-approve"); r.code != ExitError || !strings.Contains(r.stdout+r.stderr, fmt.Sprintf("is the root file system of keeper %d", k)) {
		t.Errorf("adopting the keeper's rootfs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := len(c.srv.Cluster().Resources("vm")); after != before {
		t.Errorf("guests %d → %d after a refused apply", before, after)
	}
}

// Negative durations are refused (issue 12, item 4).
func TestNegativeDurationsRefused(t *testing.T) {
	t.Parallel()
	m := writeManifest(t, "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n")
	for _, args := range [][]string{{"apply", "-f", m, "--lock-wait", "-5s"}, {"apply", "-f", m, "--lock-timeout", "-1m"}, {"destroy", "-f", m, "--lock-timeout", "-1s"}} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, strings.NewReader(""), &out, &errb); code != ExitError || !strings.Contains(errb.String(), "want 0 or more") {
			t.Errorf("corral %s: exit %d\n%s", strings.Join(args, " "), code, errb.String())
		}
	}
}
