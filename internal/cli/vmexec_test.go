package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// vmExecApp applies a VM app web with provisioning (which pins the VM's
// host key) on a cluster whose VMs are view guests SSH reaches, and
// returns the cluster, the manifest, the VM's id and its guest's root
// directory. The guest's sudo is wrapped to record each call's options
// in /var/tmp/sudo.calls, so a test sees that corral went through it.
func vmExecApp(t *testing.T) (*cluster, string, int, string) {
	t.Helper()
	c := newVMGuestCluster(t)
	c.offerVMImage()
	if err := c.srv.Cluster().UpdateRole(model.OperatorRole, []string{"VM.GuestAgent.Audit"}, true); err != nil {
		t.Fatal(err)
	}
	m := vmGuestManifest(t, vmGuestSteps("a=1"))
	r := c.run("apply", "-f", m, "--auto-approve")
	needGuestExec(t, r.stderr)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vmid, _, _ := c.vmOf(m)
	root := c.srv.Guests().ViewVMs().Root(vmid)
	sudo := filepath.Join(root, "usr/local/bin/sudo")
	orig, err := os.ReadFile(sudo)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sudo, sudo+".real"); err != nil {
		t.Fatal(err)
	}
	wrap := "#!/bin/sh\necho \"$*\" >> /var/tmp/sudo.calls\nexec /usr/local/bin/sudo.real \"$@\"\n"
	if err := os.WriteFile(sudo, []byte(wrap), 0o755); err != nil || len(orig) == 0 {
		t.Fatal(err)
	}
	return c, m, vmid, root
}

// sudoCalls are the guest's recorded sudo calls since the last look.
func sudoCalls(t *testing.T, root string) string {
	t.Helper()
	p := filepath.Join(root, "var/tmp/sudo.calls")
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	os.Remove(p)
	return string(b)
}

// TestVMExecAndLogs (issue 34): corral exec of a VM app logs in to its
// VM as vm.user and runs the command through sudo, with its output,
// stdin (-i) and exit status passed through; corral logs shows the
// syslog file's last lines there, and says why when the VM keeps no
// logs; corral cp refuses a VM app with the alternative; a stopped VM is
// refused with what to do.
func TestVMExecAndLogs(t *testing.T) {
	t.Parallel()
	c, m, vmid, root := vmExecApp(t)
	conn := []string{"-f", m, "--endpoint", c.srv.URL(), "--api-token", c.srv.Credentials().OperatorToken, "--fingerprint", c.srv.Fingerprint()}
	run := func(stdin string, args ...string) result { // the connection flags before --
		var out, errb bytes.Buffer
		i := slices.Index(args, "--")
		if i < 0 {
			i = len(args)
		}
		full := slices.Concat(args[:i], conn, args[i:])
		code := Run(testenv.Context(t), full, strings.NewReader(stdin), &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	sudoCalls(t, root)
	r := run("", "exec", "web", "--", "sh", "-c", "cat /etc/web/app.conf; id -u; echo oops >&2; exit 3")
	if r.code != 3 || r.stdout != "a=1\n0\n" || !strings.Contains(r.stderr, "oops") {
		t.Fatalf("exec: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	if calls := sudoCalls(t, root); !strings.HasPrefix(calls, "-n -- sh -c ") {
		t.Errorf("exec's sudo calls: %q, want one with -n --", calls)
	}
	if r := run("line one\nno newline", "exec", "-i", "web", "--", "sh", "-c", "cat; echo; echo done"); r.code != 0 || r.stdout != "line one\nno newline\ndone\n" {
		t.Errorf("exec -i: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}

	r = run("", "logs", "web")
	if r.code == 0 || !strings.Contains(r.stderr, "app web: this VM keeps no system journal") || !strings.Contains(r.stderr, "corral exec web -- tail FILE") {
		t.Errorf("logs without any: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := os.MkdirAll(filepath.Join(root, "var/log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/log/syslog"), []byte("first\nsecond\nthird\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sudoCalls(t, root)
	if r := run("", "logs", "web", "-n", "2"); r.code != 0 || !strings.Contains(r.stdout, "second\nthird\n") || strings.Contains(r.stdout, "first") {
		t.Errorf("logs -n 2: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	if calls := sudoCalls(t, root); !strings.HasPrefix(calls, "-n -- sh -c ") {
		t.Errorf("logs' sudo calls: %q", calls)
	}

	if r := run("", "cp", "web:/etc/web/app.conf", filepath.Join(t.TempDir(), "x")); r.code == 0 || !strings.Contains(r.stderr, "app web is a VM app: this command works on containers only for now") ||
		!strings.Contains(r.stderr, "corral exec -i web -- tar x") {
		t.Errorf("cp from a VM app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	ctx := context.Background()
	pc := c.pveRoot()
	upid, err := pc.StopVM(ctx, "pve", vmid)
	if err == nil {
		_, err = pc.WaitTask(ctx, upid, pve.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	if r := run("", "exec", "web", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "vm "+strconv.Itoa(vmid)+" is stopped; start it with `corral apply`") {
		t.Errorf("exec in a stopped VM: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestVMExecLoginShell (issue 34): corral exec -it of a VM app without a
// command gives root's login shell in the VM (sudo -i) on a terminal,
// and exits with its status.
func TestVMExecLoginShell(t *testing.T) {
	c, m, _, root := vmExecApp(t)
	conn := []string{"-f", m, "--endpoint", c.srv.URL(), "--api-token", c.srv.Credentials().OperatorToken, "--fingerprint", c.srv.Fingerprint()}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	screen := copyScreen(t, ptmx)
	code := make(chan int, 1)
	sudoCalls(t, root)
	go func() {
		code <- Run(context.Background(), append([]string{"exec", "-it", "web"}, conn...), tty, tty, tty)
	}()
	// The arithmetic makes the marker appear only in the shell's output,
	// never in the echo of what was typed.
	io.WriteString(ptmx, "echo SHELL-$((6*7)) $(id -u) $(tty)\r")
	screen.waitFor(t, "SHELL-42 0 /dev/pts/")
	io.WriteString(ptmx, "exit 4\r")
	select {
	case got := <-code:
		if got != 4 {
			t.Fatalf("exec -it exit %d, want the shell's 4\n%s", got, screen.String())
		}
	case <-testenv.Expiry(t):
		t.Fatalf("exec -it did not end after exit (waited until the test's deadline):\n%s", screen.String())
	}
	if calls := sudoCalls(t, root); calls != "-n -i\n" {
		t.Errorf("the login shell's sudo calls: %q, want sudo -n -i", calls)
	}
}
