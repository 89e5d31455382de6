package sim

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
)

// Issue 33: unmodified third-party PVE clients (Ansible's proxmox
// inventory, proxmoxer, the npm proxmox-api package, go-proxmox) drive
// the emulator over HTTPS, so that what they need of PVE's API does not
// regress. This file is their common part: one emulator with a few CTs,
// and a runner that hands the client the API token by environment and
// keeps its secret out of the test's log.

// thirdParty is an emulator with the scene every client test starts
// from: CT 101 "web1" running, tagged web and prod, in pool "apps"; CT
// 102 "db1" stopped.
type thirdParty struct {
	*e2e
	user, tokenID, secret string
	host, port            string
	ca                    string // the emulator's certificate, PEM
}

// ansibleOfTheDay skips all but one of the four Ansible tests (number i)
// a day unless CORRAL_TEST_FULL is set, as CI does: each runs
// ansible-playbook or ansible-inventory, whose Python was 16.5 of
// internal/sim's 58 CPU-s on a newcomer's first `go test -race ./...`
// (issue 30), and successive days run each of them.
func ansibleOfTheDay(t *testing.T, i int) {
	t.Helper()
	if !testenv.SampleOf(t, i, 4) {
		t.Skipf("one of the four Ansible tests a day without %s=1 (CI sets it): today's is number %d, this is %d (%s=%d)", testenv.FullVar, testenv.Seed()%4, i, testenv.SweepSeedVar, testenv.Seed())
	}
}

// newThirdParty starts the emulator and builds the scene.
func newThirdParty(t *testing.T) *thirdParty {
	t.Helper()
	k := newE2E(t)
	root := k.root()
	k.create(root, "101", url.Values{"hostname": {"web1"}, "tags": {"web;prod"},
		"net0": {"name=eth0,bridge=vmbr0,ip=dhcp"}, "memory": {"256"}, "cores": {"1"}, "features": {"nesting=1"}})
	k.create(root, "102", url.Values{"hostname": {"db1"}, "memory": {"512"}, "features": {"nesting=1"}})
	k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"apps"}, "comment": {"the apps"}}, nil)
	k.ok(root, http.MethodPut, "/pools/apps", url.Values{"vms": {"101"}}, nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/status/start", nil)

	full, secret, ok := strings.Cut(k.srv.Credentials().RootToken, "=")
	user, tokenID, ok2 := strings.Cut(full, "!")
	if !ok || !ok2 {
		t.Fatalf("the root token is not user!id=secret")
	}
	u, err := url.Parse(k.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return &thirdParty{e2e: k, user: user, tokenID: tokenID, secret: secret,
		host: u.Hostname(), port: u.Port(), ca: filepath.Join(k.dir, "pve-ssl.pem")}
}

// env is what every client script reads: where the emulator is and the
// API token, its secret only here (never on a command line or in a file
// of the test's log). The caller's own PROXMOX_* variables are dropped:
// Ansible's modules and inventory would take them for their options.
func (p *thirdParty) env() []string {
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PROXMOX_") {
			base = append(base, kv)
		}
	}
	return append(base,
		"PVE_URL="+p.srv.URL(), "PVE_HOST="+p.host, "PVE_PORT="+p.port,
		"PVE_USER="+p.user, "PVE_TOKEN_ID="+p.tokenID, "PVE_TOKEN_SECRET="+p.secret,
		"PVE_CA="+p.ca, "PVE_NODE=pve")
}

// run runs a client and returns its standard output; on failure the test
// fails with both outputs, the token's secret masked.
func (p *thirdParty) run(cmd *exec.Cmd) string {
	p.t.Helper()
	out, err := p.runErr(cmd)
	if err != nil {
		p.t.Fatalf("%s: %v\nthe emulator's tasks that did not end OK:\n%s", strings.Join(cmd.Args, " "), err, p.failedTasks())
	}
	return out
}

// failedTasks lists the tasks that did not end OK, with their logs: what
// a client that only saw a timeout cannot say.
func (p *thirdParty) failedTasks() string {
	var b strings.Builder
	for _, t := range p.srv.cluster.Tasks("") {
		if t.Status == "stopped" && t.ExitStatus == "OK" {
			continue
		}
		full, err := p.srv.cluster.Task(t.Node, t.UPID)
		fmt.Fprintf(&b, "%s %s %s: %s %q %v\n", t.Type, t.ID, t.Status, t.ExitStatus, full.Log, err)
	}
	return p.maskAll(b.String())
}

// runErr runs cmd with the scene's environment (added to cmd.Env) under
// a two-minute bound, and masks the secret in what it returns.
func (p *thirdParty) runErr(cmd *exec.Cmd) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Dir, c.Env = cmd.Dir, append(p.env(), cmd.Env...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	out := p.maskAll(stdout.String())
	if err != nil {
		return out, &clientError{err: err, stdout: out, stderr: p.maskAll(stderr.String())}
	}
	return out, nil
}

// maskAll replaces the token's secret and root's password wherever a
// client printed them.
func (p *thirdParty) maskAll(s string) string {
	s = strings.ReplaceAll(s, p.secret, "<token secret>")
	return strings.ReplaceAll(s, p.srv.Credentials().RootPassword, "<root password>")
}

// clientError is a client that failed, with what it printed.
type clientError struct {
	err            error
	stdout, stderr string
}

func (e *clientError) Error() string {
	return e.err.Error() + "\nstdout:\n" + e.stdout + "\nstderr:\n" + e.stderr
}

func (e *clientError) Unwrap() error { return e.err }

// testdataDir is the absolute path of testdata/thirdparty/name.
func testdataDir(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "thirdparty", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// A client that prints the token's secret and root's password and fails
// leaves neither in what the test reports.
func TestThirdParty_secretMasked(t *testing.T) {
	t.Parallel()
	p := newThirdParty(t)
	cmd := exec.Command("/bin/sh", "-c", `echo "token $PVE_TOKEN_SECRET"; echo "password $ROOTPW" >&2; exit 3`)
	cmd.Env = []string{"ROOTPW=" + p.srv.Credentials().RootPassword}
	out, err := p.runErr(cmd)
	if err == nil {
		t.Fatal("a client that exits 3 did not fail")
	}
	msg := out + err.Error()
	if strings.Contains(msg, p.secret) || strings.Contains(msg, p.srv.Credentials().RootPassword) {
		t.Fatalf("a secret in the report: %s", msg)
	}
	if !strings.Contains(msg, "token <token secret>") || !strings.Contains(msg, "password <root password>") {
		t.Errorf("the report does not show where the secrets were masked: %s", msg)
	}
}

// sub is the scene for a subtest, so that failures stop the subtest only.
func (p *thirdParty) sub(t *testing.T) *thirdParty {
	c := *p
	c.e2e = p.e2e.sub(t)
	return &c
}
