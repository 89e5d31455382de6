package cli

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// unisolatedManifest's one step is the quickstart's: a pkill that, run
// unisolated, reaches every process on the host with the command line
// sleep arg. arg is the test's own (a random fraction): this pkill runs
// as root on the host, and with a fixed one it killed another package's
// test process (sim/guest's sleep 7302) that ran at the same time.
func unisolatedManifest(arg string) string {
	return fmt.Sprintf(`apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - name: stop-old
        run: pkill -xf 'sleep %s' || true
`, arg)
}

// embeddedWithoutLXC makes the next corral command use a fresh embedded
// emulator with LXC forced unavailable and no opt-in, and starts a host
// process the manifest's step would kill.
func embeddedWithoutLXC(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	t.Setenv("PROXMOX_VE_ENDPOINT", "")
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("CORRAL_SIM_TIME_SCALE", "0")
	t.Setenv("CORRAL_SIM_RUNTIME", "view")
	t.Setenv("CORRAL_SIM_UNISOLATED", "")
	arg := fmt.Sprintf("7302.%09d", rand.IntN(1e9))
	host := exec.Command("sleep", arg)
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	return writeManifest(t, unisolatedManifest(arg)), host
}

// TestApply_refusesUnisolatedGuests (issue 27 item 4): where the emulator
// cannot isolate containers and nobody opted in, apply stops before its
// first change with one message naming the fix, and the step's pkill
// never reaches the host's process.
func TestApply_refusesUnisolatedGuests(t *testing.T) {
	m, host := embeddedWithoutLXC(t)
	r := runCorral(t, "apply", "-f", m, "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stderr, "the emulator cannot isolate containers on this machine") ||
		!strings.Contains(r.stderr, "apt-get install --no-install-recommends lxc") ||
		!strings.Contains(r.stderr, "--unisolated-guests / CORRAL_SIM_UNISOLATED=1") ||
		!strings.Contains(r.stderr, "nothing was changed") {
		t.Fatalf("exit %d, want the refusal:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Count(r.stderr, "cannot isolate containers") != 1 {
		t.Errorf("the refusal is said more than once:\n%s", r.stderr)
	}
	if host.ProcessState != nil || host.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("the host's process is gone")
	}
	if s := runCorral(t, "status", "-f", m, "-o", "json"); strings.Contains(s.stdout, `"vmid"`) {
		t.Fatalf("apply created a container:\n%s", s.stdout)
	}
}

// TestApply_unisolatedGuestsOptIn: --unisolated-guests runs the step, on
// this host (its pkill reaches the host's process, as the warning says),
// and says so loudly.
func TestApply_unisolatedGuestsOptIn(t *testing.T) {
	m, host := embeddedWithoutLXC(t)
	r := runCorral(t, "--unisolated-guests", "apply", "-f", m, "--auto-approve")
	if r.code != 0 || !strings.Contains(r.stderr, "GUEST COMMANDS RUN UNISOLATED ON THIS HOST") {
		t.Fatalf("exit %d, want 0 and the warning:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := host.Wait(); err == nil {
		t.Fatal("the host's sleep ended on its own, not by the step's pkill")
	}
}
