package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// TestComposeLocalExample runs examples/compose-local for real (issue 31):
// on a real Debian 12 CT, unprivileged, Debian's Docker engine and
// Compose are installed through the emulator's package proxy from this
// host's mirror, an image is built in the container (no registry), and
// the compose project serves its page. Its data lives where the example
// says: a named volume in /var/lib/docker (a kept volume), a bind mount
// on a kept volume, a cache on a kept volume left out of backups. It
// survives destroy and recreate (the image is not built again), the
// backup holds the named volume and the bind mount but not the cache,
// and restore --replace brings the project back with the backed-up page.
func TestComposeLocalExample(t *testing.T) {
	if os.Getenv("CORRAL_TEST_APT_MIRROR") != "1" {
		t.Skip("needs the host's Debian mirror: set CORRAL_TEST_APT_MIRROR=1 to run it")
	}
	t.Parallel()
	c := newRealCluster(t)
	m, err := filepath.Abs("../../examples/compose-local/corral.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Docker in an unprivileged CT needs keyctl=1: corral stops with
	// root's command, the administrator runs it.
	r := c.run("apply", "-f", m, "--auto-approve")
	vmid := c.status(m).Apps[0].Containers[0].VMID
	if want := "pct set " + strconv.Itoa(vmid) + " -features nesting=1,keyctl=1"; r.code != ExitError || !strings.Contains(r.stderr, want) {
		t.Fatalf("first apply: exit %d, want the stop with %q\n%s", r.code, want, r.stderr)
	}
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", vmid, map[string]string{"features": "nesting=1,keyctl=1"}); err != nil {
		t.Fatal(err)
	}
	r = c.run("apply", "-f", m, "--auto-approve")
	needGuestExec(t, r.stderr)
	if r.code != 0 || !strings.Contains(r.stderr, "Apply complete") {
		t.Fatalf("apply after keyctl: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("apply after keyctl:\n%s", phaseTable(r.stderr))

	// sh runs script in the app's container and returns its output.
	sh := func(script string) string {
		t.Helper()
		r := c.execIn(m, "compose-local", script)
		if r.code != 0 {
			t.Fatalf("exec %q: exit %d\n%s%s", script, r.code, r.stdout, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	const web = `docker ps -q --filter label=com.docker.compose.project=site --filter label=com.docker.compose.service=web`
	page := func() string { return sh("busybox wget -qO- http://127.0.0.1:8080/") }
	if got := page(); got != "hello from a locally built image" {
		t.Fatalf("the page: %q", got)
	}
	if got := sh("docker info --format '{{.Driver}}'"); got != "overlay2" {
		t.Errorf("storage driver %q, want overlay2", got)
	}
	sh(`docker exec $(` + web + `) sh -c 'echo kept > /www/index.html; echo bind > /srv/site/bind.txt; echo scratch > /cache/c.txt'`)
	image := sh("docker images -q local/site-web:1")

	// Destroy (volumes kept) and recreate: the named volume, the bind
	// mount and the image are still there.
	c.mustRun("destroy", "-f", m, "--auto-approve")
	r = c.run("apply", "-f", m, "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stderr, "keyctl=1") {
		t.Fatalf("apply after destroy: exit %d, want the keyctl stop for the new container\n%s", r.code, r.stderr)
	}
	vmid = c.status(m).Apps[0].Containers[0].VMID
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", vmid, map[string]string{"features": "nesting=1,keyctl=1"}); err != nil {
		t.Fatal(err)
	}
	r = c.run("apply", "-f", m, "--auto-approve")
	if r.code != 0 || !strings.Contains(r.stderr, "Apply complete") {
		t.Fatalf("apply of the new container: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("recreate:\n%s", phaseTable(r.stderr))
	if got := page(); got != "kept" {
		t.Errorf("the page after recreate: %q, want the named volume's kept", got)
	}
	if got := sh("cat /srv/site/bind.txt /srv/cache/c.txt"); got != "bind\nscratch" {
		t.Errorf("the bind mount and the cache after recreate: %q", got)
	}
	if got := sh("docker images -q local/site-web:1"); got != image {
		t.Errorf("image after recreate %q, want %q (built again?)", got, image)
	}

	// The backup holds the named volume and the bind mount, not the
	// cache (backup: false).
	b := c.backup(m, "compose-local")
	files := c.archiveFiles(b.Archive, "/var/lib/docker/volumes/site_www/_data/index.html", "/srv/site/bind.txt")
	if files["/var/lib/docker/volumes/site_www/_data/index.html"] != "kept\n" || files["/srv/site/bind.txt"] != "bind\n" {
		t.Errorf("the archive lacks the named volume's page or the bind mount's file")
	}
	if _, ok := files["/srv/cache/c.txt"]; ok {
		t.Errorf("the archive holds the cache, which is backup: false")
	}
	if len(b.Excluded) != 1 || b.Excluded[0].Mount != "/srv/cache" {
		t.Errorf("backup -o json excluded %+v, want the cache", b.Excluded)
	}

	// Restore in place: the page is the backed-up one again and the
	// project runs.
	sh(`docker exec $(` + web + `) sh -c 'echo changed > /www/index.html'`)
	c.mustC("restore", "compose-local", "--archive", b.Archive, "--replace", "-f", m, "--auto-approve")
	// Docker starts at boot and brings the service back (restart:
	// unless-stopped); wait for it as a user would, for up to 3 minutes.
	r = c.execIn(m, "compose-local", "for i in $(seq 180); do busybox wget -qO- http://127.0.0.1:8080/ 2>/dev/null && exit 0; sleep 1; done; "+
		"systemctl status docker --no-pager; docker ps -a; journalctl -u docker --no-pager | tail -20; exit 1")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "kept" {
		t.Errorf("the page after restore: exit %d %q, want the backed-up kept\n%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// phaseTable is the phase table apply printed on stderr.
func phaseTable(stderr string) string {
	i := strings.Index(stderr, "APP ")
	if i < 0 {
		return "(no phase table)"
	}
	return regexp.MustCompile(`(?m)^\S+:   \|.*\n`).ReplaceAllString(stderr[i:], "")
}
