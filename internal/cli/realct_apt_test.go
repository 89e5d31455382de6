package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim"
)

// fakeMirror serves, on loopback, a flat apt repository with one
// package, corral-hello (a file /usr/share/corral-hello/hello): what a
// CT's apt needs from a mirror, without the network.
func fakeMirror(t *testing.T) *httptest.Server {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not found (Debian's dpkg)")
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg")
	for p, text := range map[string]string{
		"DEBIAN/control":               "Package: corral-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: corral <corral@example.invalid>\nDescription: corral's fake mirror package\n",
		"usr/share/corral-hello/hello": "hello from the fake mirror\n",
	} {
		if err := os.MkdirAll(filepath.Join(pkg, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, p), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, "corral-hello_1.0_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	debData, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	packages := fmt.Sprintf("Package: corral-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: corral <corral@example.invalid>\nFilename: ./corral-hello_1.0_all.deb\nSize: %d\nSHA256: %s\nDescription: corral's fake mirror package\n\n", len(debData), sum(debData))
	release := fmt.Sprintf("Origin: corral-test\nLabel: corral-test\nSuite: fake\nCodename: fake\nArchitectures: all amd64\nSHA256:\n %s %d Packages\n", sum([]byte(packages)), len(packages))
	files := map[string][]byte{"/Packages": []byte(packages), "/Release": []byte(release), "/corral-hello_1.0_all.deb": debData}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[path.Clean("/"+r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv
}

const aptManifest = `apps:
  - name: aptct
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
`

// TestRealTemplateApt_fakeMirror: inside a real-template CT, apt reaches
// the emulator's package sources (here a fake mirror on the host's
// loopback, the emulator's only allowed source) through the proxy on
// the bridge: apt-get update and install work. A source that is not the
// host's fails apt-get update with the proxy's reason, and nothing but
// the allowed sources is reachable through it.
func TestRealTemplateApt_fakeMirror(t *testing.T) {
	t.Parallel()
	mirror := fakeMirror(t)
	c := newRealCluster(t, func(o *sim.Options) { o.AptSources = []string{mirror.URL + "/"} })
	m := writeManifestIn(t, "aptct", aptManifest)
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	exec := func(script string) result { return c.execIn(m, "aptct", script) }
	src := "deb [trusted=yes] " + mirror.URL + "/ ./"
	tests := []struct {
		name, script, want string
	}{
		{"apt is pointed at the proxy", "apt-config dump | grep -i 'Acquire::http::Proxy '", "Acquire::http::Proxy \"http://10.0.0.1:3142\";\n"},
		{"update and install from the host's source",
			"echo '" + src + "' > /etc/apt/sources.list; apt-get -q update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q corral-hello >/dev/null && cat /usr/share/corral-hello/hello",
			"hello from the fake mirror\n"},
		{"a source that is not the host's fails update, saying why",
			"echo 'deb http://deb.debian.org/debian bookworm main' > /etc/apt/sources.list.d/other.list; apt-get -q update 2>&1 >/dev/null | grep -o 'deb.debian.org is not one of the host.s package sources' | sort -u; rm /etc/apt/sources.list.d/other.list",
			"deb.debian.org is not one of the host's package sources\n"},
		{"the proxy forwards nowhere else", "curl -s -o /dev/null -w '%{http_code}\\n' -x http://10.0.0.1:3142 http://10.0.0.1:8006/", "403\n"},
	}
	for _, tt := range tests {
		r := exec(tt.script)
		if r.code != 0 || r.stdout != tt.want {
			t.Errorf("%s: exit %d, stdout %q, want %q\n%s", tt.name, r.code, r.stdout, tt.want, r.stderr)
		}
	}
}

// TestRealTemplateApt_hostMirror: apt-get install of a small package
// from the host's own Debian mirror, inside a real-template CT. It
// needs the host's mirror, so it runs only with
// CORRAL_TEST_APT_MIRROR=1 (set it where the host's apt-get works
// reliably).
func TestRealTemplateApt_hostMirror(t *testing.T) {
	t.Parallel()
	if os.Getenv("CORRAL_TEST_APT_MIRROR") != "1" {
		t.Skip("needs the host's Debian mirror: set CORRAL_TEST_APT_MIRROR=1 to run it")
	}
	c := newRealCluster(t)
	m := writeManifestIn(t, "aptct", aptManifest)
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	r := c.execIn(m, "aptct",
		"apt-get -q update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q hello >/dev/null && hello")
	if r.code != 0 || !strings.Contains(r.stdout, "Hello, world!") {
		t.Fatalf("apt-get install hello: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
