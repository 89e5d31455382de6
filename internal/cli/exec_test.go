package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// guestApp applies a one-app manifest (app "notes", volumes on /srv/data
// and /var/cache/notes) on a cluster whose containers answer SSH, and
// returns the manifest and the flags that reach the cluster; it skips
// where the emulator cannot run commands in a guest.
func guestApp(t *testing.T) (*cluster, string, []string) {
	t.Helper()
	c := newGuestCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	conn := []string{"-f", m, "--endpoint", c.srv.URL(), "--api-token", c.srv.Credentials().OperatorToken, "--fingerprint", c.srv.Fingerprint()}
	r := c.run(append([]string{"exec", "notes"}, append(conn, "--", "true")...)...)
	needGuestExec(t, r.stderr)
	if r.code != 0 {
		t.Fatalf("exec true: exit %d\n%s", r.code, r.stderr)
	}
	return c, m, conn
}

// waitFor waits until the buffer holds want; if it never does, the
// failure shows what the terminal holds.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("the terminal shows:\n%s", s.String())
		}
	}()
	testenv.WaitFor(t, fmt.Sprintf("%q in the terminal", want), func() bool { return strings.Contains(s.String(), want) })
}

// TestExecInteractiveTTY: `corral exec -it APP -- bash` run on a local
// terminal gives bash a terminal in the container (tty names a /dev/pts
// device, TERM and the window size are the local ones), follows a
// resize of the local terminal, puts the local terminal back as it was,
// and exits with the shell's status.
func TestExecInteractiveTTY(t *testing.T) {
	testenv.NeedRoot(t, "the emulator's guest view")
	_, _, conn := guestApp(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	before, err := termiosOf(tty)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TERM", "xterm-corral-test")
	screen := copyScreen(t, ptmx)
	code := make(chan int, 1)
	go func() {
		args := append([]string{"exec", "-it", "notes"}, append(conn, "--", "bash", "--norc", "--noprofile")...)
		code <- Run(context.Background(), args, tty, tty, tty)
	}()
	// The arithmetic makes the markers appear only in the shell's output,
	// never in the echo of what was typed.
	io.WriteString(ptmx, "echo TTY-$((6*7)) $(tty) $TERM $(stty size)\r")
	screen.waitFor(t, "TTY-42 /dev/pts/")
	out := screen.String()
	line := out[strings.Index(out, "TTY-42"):]
	line = line[:strings.IndexAny(line, "\r\n")]
	if f := strings.Fields(line); len(f) != 5 || f[2] != "xterm-corral-test" || f[3] != "40" || f[4] != "100" {
		t.Fatalf("in the container: %q, want TTY-42 /dev/pts/N xterm-corral-test 40 100", line)
	}

	// A resize of the local terminal reaches the container's.
	io.WriteString(ptmx, "echo READY-$((1+1)); for i in $(seq 300); do s=$(stty size); [ \"$s\" = '50 120' ] && break; sleep 0.1; done; echo SIZE-$((2+2)) $s\r")
	screen.waitFor(t, "READY-2")
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	screen.waitFor(t, "SIZE-4 ")
	if out := screen.String(); !strings.Contains(out, "SIZE-4 50 120") {
		t.Fatalf("resize did not reach the container:\n%s", out)
	}

	io.WriteString(ptmx, "exit 3\r")
	select {
	case got := <-code:
		if got != 3 {
			t.Fatalf("exec -it exit %d, want the shell's 3\n%s", got, screen.String())
		}
	case <-testenv.Expiry(t):
		t.Fatalf("exec -it did not end after exit (waited until the test's deadline):\n%s", screen.String())
	}
	after, err := termiosOf(tty)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Errorf("local terminal not restored: %+v, was %+v", after, before)
	}
}

// TestExecStdin: -i pipes stdin through byte for byte; without -i the
// command reads EOF; -t without a terminal is refused with the fix; a
// signal's death is 128+N.
func TestExecStdin(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "the emulator's guest view")
	c, _, conn := guestApp(t)
	run := func(stdin string, args ...string) result {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	exec := func(flags []string, script string) []string {
		return append(append(append([]string{"exec"}, flags...), "notes"), append(conn, "--", "sh", "-c", script)...)
	}
	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		stdout      string
		stderr      string
	}{
		{"-i pipes stdin", "line one\nno newline", exec([]string{"-i"}, "cat; echo; echo done"), 0, "line one\nno newline\ndone\n", ""},
		{"without -i: EOF", "ignored\n", exec(nil, "if read x; then echo read-$x; else echo eof; fi"), 0, "eof\n", ""},
		{"output byte for byte", "", exec(nil, "printf 'a\\tb'"), 0, "a\tb", ""},
		{"exit status", "", exec(nil, "echo oops >&2; exit 5"), 5, "", "oops"},
		{"signal", "", exec(nil, "kill -TERM $$"), 128 + 15, "", ""},
		{"-t without a terminal", "", exec([]string{"-t"}, "true"), ExitError, "", "stdin is not a terminal"},
		{"no command", "", append([]string{"exec", "notes"}, conn...), ExitError, "", "no command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.stdin, tc.args...)
			if r.code != tc.code || (tc.code == 0 && r.stdout != tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q in it)", r.code, tc.code, r.stdout, tc.stdout, r.stderr, tc.stderr)
			}
		})
	}
	_ = c
}

func termiosOf(f *os.File) (*unix.Termios, error) {
	return unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
}
