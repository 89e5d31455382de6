package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHermesExampleUpToTheInternet runs examples/hermes for real (issue
// 31) on a real Debian 12 CT: every step that installs from Debian runs
// through the emulator's package proxy from this host's mirror (the
// baseline packages: build tools, ffmpeg, ripgrep, git, the browser's
// libraries), and the run stops exactly at the first step that needs
// more than Debian: Hermes' installer from GitHub, which the CT cannot
// reach (the proxy serves the host's package sources only).
func TestHermesExampleUpToTheInternet(t *testing.T) {
	if os.Getenv("CORRAL_TEST_APT_MIRROR") != "1" {
		t.Skip("needs the host's Debian mirror: set CORRAL_TEST_APT_MIRROR=1 to run it")
	}
	t.Parallel()
	const key = "sk-test-opencode-real-31"
	ownEnv(t, "OPENCODE_GO_API_KEY", key)
	c := newRealCluster(t)
	m, err := filepath.Abs("../../examples/hermes/corral.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := c.run("apply", "-f", m, "--auto-approve")
	needGuestExec(t, r.stderr)
	if strings.Contains(r.stdout+r.stderr, key) {
		t.Errorf("apply printed the key")
	}
	t.Logf("apply, exit %d; steps:\n%s", r.code, stepTimes(r.stderr))
	if r.code != ExitError {
		t.Fatalf("apply: exit %d, want it to stop at the Hermes download\n%s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`hermes: provision baseline packages\.\.\.\n(?:hermes:   \|.*\n|hermes: still .*\n)*hermes: provision done`).MatchString(r.stderr) {
		t.Errorf("the baseline packages step did not complete\n%s", tail(r.stderr, 40))
	}
	if !strings.Contains(r.stderr, "install hermes") || !strings.Contains(r.stderr, "raw.githubusercontent.com") {
		t.Errorf("apply did not stop at install hermes, naming the host it could not reach\n%s", tail(r.stderr, 40))
	}
	// What the baseline step installed is there and works.
	e := c.execIn(m, "hermes", "id -u hermes && gcc --version | head -1 && ffmpeg -version | head -1 && rg --version | head -1 && git --version")
	if e.code != 0 || !strings.HasPrefix(e.stdout, "10000\n") || !strings.Contains(e.stdout, "ffmpeg version") || !strings.Contains(e.stdout, "ripgrep") {
		t.Errorf("the baseline in the container: exit %d\n%s%s", e.code, e.stdout, e.stderr)
	}
}

// stepTimes are the provisioning steps' start and done lines of apply's
// progress (what docs/examples.md's phase tables are made of).
func stepTimes(stderr string) string {
	var b strings.Builder
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, ": provision ") || strings.Contains(l, " done [") || strings.Contains(l, "failed") {
			b.WriteString(l + "\n")
		}
	}
	return b.String() + phaseTable(stderr)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
