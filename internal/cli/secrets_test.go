package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/internal/testutil/secretscan"
)

// syncBuffer is a bytes.Buffer safe for the emulator's concurrent logging.
// copyScreen copies what terminal ptmx shows into a buffer until the test
// ends, then stops reading it: a writer the test left on the terminal
// (an interactive session that outlived it) then blocks on the full pty
// instead of filling the buffer. In CI one such writer filled the cli
// test binary's memory (24 GB, killed) while later tests ran.
func copyScreen(t *testing.T, ptmx *os.File) *syncBuffer {
	screen := &syncBuffer{}
	var ended atomic.Bool
	t.Cleanup(func() { ended.Store(true) })
	go func() {
		buf := make([]byte, 32<<10)
		for !ended.Load() {
			n, err := ptmx.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	return screen
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecretHygieneFullCycle runs a whole life cycle at --log-level debug
// with root passwords written in the manifest itself and read from a
// ${file:…}, and scans everything anyone could see for every secret in
// play: corral's stdout and stderr (which carry its debug log), the
// emulator's own debug log, and every task log it kept. The secrets are
// the operator token's secret (the one corral uses), the emulator's root
// password and root token secret (which corral never needs), both app
// passwords, and a private key a user mistook for a public key.
// (TestSecretsNeverPrinted covers ${env:…} with the default emulator.)
func TestSecretHygieneFullCycle(t *testing.T) {
	t.Parallel() // TestMain cleared the connection variables and CORRAL_LOG
	simLog := &syncBuffer{}
	c := newCluster(t, func(o *sim.Options) {
		o.Logger = slog.New(slog.NewTextHandler(simLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	srv := c.srv

	const inlinePW = "Inline-R00t-Pa55word"
	const filePW = "From-A-File/Pa55+word"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "wiki.pw"), []byte(filePW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A private key in the place of a public one: the manifest is refused,
	// and the refusal must not quote the key.
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(block)
	if err := os.WriteFile(filepath.Join(dir, "id_ed25519"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	var secrets secretscan.Set
	cred := srv.Credentials()
	secrets.AddToken(t, "operator token secret", cred.OperatorToken)
	secrets.AddToken(t, "root token secret", cred.RootToken)
	secrets.Add(t, "root password", cred.RootPassword)
	secrets.Add(t, "inline app password", inlinePW)
	secrets.Add(t, "file app password", filePW)
	keyBody := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")[1]
	secrets.Add(t, "private key body", keyBody)

	good := strings.ReplaceAll(appManifest, "MEMORY", "512") + "    password: " + inlinePW + "\n" +
		`  - name: wiki
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    password: ${file:wiki.pw}
    volumes:
      - name: pages
        size: 1G
        mount: /srv/pages
`
	m := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(m, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(good+"    ssh:\n      publicKeys:\n        - ${file:id_ed25519}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	debug := func(args ...string) []string {
		return append(append([]string{"--log-level", "debug"}, args...), c.connArgs()...)
	}
	steps := []struct {
		args []string
		code int
	}{
		{[]string{"--log-level", "debug", "validate", "-f", m}, 0},
		{[]string{"--log-level", "debug", "validate", "-f", bad}, 1},
		{[]string{"--log-level", "debug", "validate", "-f", bad, "-o", "json"}, 1},
		{debug("plan", "-f", bad), 1},
		{debug("plan", "-f", m), ExitChanges},
		{debug("plan", "-f", m, "-o", "json"), ExitChanges},
		{debug("apply", "-f", m, "--auto-approve", "--verbose"), 0},
		{debug("apply", "-f", m, "--auto-approve", "-o", "json"), 0},
		{debug("status", "-f", m), 0},
		{debug("status", "-f", m, "-o", "json"), 0},
		{debug("destroy", "-f", m, "--auto-approve", "wiki"), 0},
		{debug("apply", "-f", m, "--auto-approve", "-o", "json", "--verbose"), 0},
		{debug("destroy", "-f", m, "--auto-approve", "--delete-volumes", "-o", "json"), 0},
		{debug("destroy", "-f", m, "--auto-approve"), 0},
	}
	var all strings.Builder
	for _, st := range steps {
		var out, errb bytes.Buffer
		code := Run(context.Background(), st.args, strings.NewReader(""), &out, &errb)
		what := "corral " + strings.Join(st.args[:min(len(st.args), 5)], " ")
		if code != st.code {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, code, st.code, out.String(), secretsRedacted(&secrets, errb.String()))
		}
		secrets.Check(t, "stdout of "+what, out.String())
		secrets.Check(t, "stderr of "+what, errb.String())
		all.WriteString(out.String() + errb.String())
	}
	secrets.Check(t, "the emulator's debug log", simLog.String())
	logged := 0
	for _, task := range srv.Cluster().Tasks("pve") {
		full, err := srv.Cluster().Task("pve", task.UPID)
		if err != nil {
			t.Fatal(err)
		}
		logged += len(full.Log)
		secrets.Check(t, "the log of task "+task.UPID, strings.Join(full.Log, "\n"))
	}
	if logged == 0 {
		t.Error("no task log lines; the scan of task logs proves nothing")
	}

	// The scan proves something only if the debug output was there and
	// the secrets were really in play.
	if !strings.Contains(all.String(), "level=DEBUG") {
		t.Error("no debug lines in corral's output; the scan proves nothing")
	}
	if !strings.Contains(all.String(), "id_ed25519") {
		t.Error("the manifest with a private key was not refused naming the file")
	}
	if simLog.String() == "" {
		t.Error("the emulator logged nothing; the scan of its log proves nothing")
	}
	created := 0
	for _, task := range srv.Cluster().Tasks("pve") {
		if task.Type == "vzcreate" && (task.ExitStatus == "OK" || strings.HasPrefix(task.ExitStatus, "WARNINGS")) {
			created++
		}
	}
	if created < 3 {
		t.Errorf("%d containers created, want the keeper and both apps at least", created)
	}
}

// secretsRedacted hides the secrets in text before a failure prints it.
func secretsRedacted(s *secretscan.Set, text string) string {
	if len(s.Find(text)) > 0 {
		return "(output withheld: it contains a secret)"
	}
	return text
}

// runScanned runs corral on c and fails t unless it exits want (showing
// its output with the secrets redacted); neither stream may hold one of
// secrets. It returns stdout and stderr together.
func (c *cluster) runScanned(t *testing.T, secrets *secretscan.Set, want int, args ...string) string {
	t.Helper()
	r := c.run(args...)
	if r.code != want {
		needGuestExec(t, r.stderr)
		t.Fatalf("%v: exit %d, want %d\n%s", args, r.code, want, secretsRedacted(secrets, r.stdout+r.stderr))
	}
	secrets.Check(t, "stdout of corral "+strings.Join(args, " "), r.stdout)
	secrets.Check(t, "stderr of corral "+strings.Join(args, " "), r.stderr)
	return r.stdout + r.stderr
}

// secretRig is a guest cluster whose manifest reads a database password
// from CORRAL_TEST_DB_PW, and a run that fails on an exit code other than
// want and on the password in any output (the interpolation tests).
type secretRig struct {
	c       *cluster
	m       string // the manifest's path
	secrets *secretscan.Set
}

func newSecretRig(t *testing.T, pw, manifest string) *secretRig {
	t.Helper()
	testenv.NeedRoot(t, "a guest view writable for provisioning")
	r := &secretRig{c: newGuestCluster(t), secrets: &secretscan.Set{}}
	ownEnv(t, "CORRAL_TEST_DB_PW", pw)
	r.m = writeManifest(t, manifest)
	r.secrets.Add(t, "database password", pw)
	return r
}

func (r *secretRig) run(t *testing.T, want int, args ...string) string {
	t.Helper()
	return r.c.runScanned(t, r.secrets, want, args...)
}
