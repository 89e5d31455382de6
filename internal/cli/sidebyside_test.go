package cli

import (
	"net"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

const sideBySideManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - run: echo provisioned
`

// TestTwoEmulatorsSideBySide: two emulators in one process serve their
// guests' SSH on the same port and have CTs on the same VMIDs; corral
// reaches each one's own container: a file written through one is
// absent in the other.
func TestTwoEmulatorsSideBySide(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "guest exec")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	a, b := newGuestClusterOn(t, port), newGuestClusterOn(t, port)
	if a.srv.Guests().Block() == b.srv.Guests().Block() {
		t.Fatalf("both emulators use the loopback block 127.%d on port %d", a.srv.Guests().Block(), port)
	}
	m := writeManifest(t, sideBySideManifest)
	for name, c := range map[string]*cluster{"a": a, "b": b} {
		r := c.run("apply", "-f", m, "--auto-approve")
		if r.code != 0 {
			needGuestExec(t, r.stderr)
			t.Fatalf("apply on %s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
	}
	if va, vb := a.vmidOf(m, "web"), b.vmidOf(m, "web"); va != vb {
		t.Fatalf("the apps got VMIDs %d and %d; the test needs the same", va, vb)
	}
	exec := func(c *cluster, script string) result {
		t.Helper()
		return c.run(append([]string{"exec", "web", "-f", m}, append(c.connArgs(), "--", "sh", "-c", script)...)...)
	}
	if r := exec(a, "echo from-a > /root/mark"); r.code != 0 {
		t.Fatalf("exec on a: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := exec(b, "if [ -e /root/mark ]; then echo found; exit 3; fi; echo absent"); r.code != 0 || !strings.Contains(r.stdout, "absent") {
		t.Errorf("exec on b: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := exec(a, "cat /root/mark"); r.code != 0 || strings.TrimSpace(r.stdout) != "from-a" {
		t.Errorf("exec on a again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
