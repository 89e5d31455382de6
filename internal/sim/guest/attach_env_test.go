package guest_test

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	client "github.com/corralhq/corral/internal/guest"
)

// TestGuest_sessionEnvNotOnCommandLine: a session's environment (the
// client's LANG and LC_*, SSH_CONNECTION) reaches the command inside the
// CT, but never a host process's command line, which every user of the
// host reads (it was passed to lxc-attach with -v KEY=VAL).
func TestGuest_sessionEnvNotOnCommandLine(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.needIsolation()
	k.create(131, nil)
	c, err := k.dial(131, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	conn, err := ssh.Dial("tcp", k.addr(131), &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(k.key)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	const secret = "C.corral-env-7f3a9b"
	if err := sess.Setenv("LC_CORRAL", secret); err != nil {
		t.Fatal(err)
	}
	stdin, _ := sess.StdinPipe()
	stdout, _ := sess.StdoutPipe()
	// The command prints its environment and waits on stdin: while it
	// waits, its lxc-attach runs on the host.
	if err := sess.Start(`printf '%s|%s\n' "$LC_CORRAL" "${SSH_CONNECTION:+set}"; read x`); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != secret+"|set\n" {
		t.Fatalf("the command's environment: %q, %v; want %q", line, err, secret+"|set\n")
	}
	attaches := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if strings.HasSuffix(args[0], "lxc-attach") && strings.Contains(string(b), "LC_CORRAL") {
			attaches++ // this session's
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("PID %s's command line holds the session's environment: %q", e.Name(), strings.Join(args, " "))
		}
	}
	if attaches != 1 {
		t.Errorf("%d lxc-attach processes name LC_CORRAL, want the session's one (passed by name: --keep-var)", attaches)
	}
	stdin.Close()
	sess.Wait()
}
