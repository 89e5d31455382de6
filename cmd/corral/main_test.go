package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/cli"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// These tests run the built binary exactly as a user does: `corral sim
// serve` in one process, corral verbs in others, talking HTTPS with the
// fingerprint from the emulator's env file.

var corralBin string

func TestMain(m *testing.M) {
	if testenv.RunningAs("corral") {
		// The emulator's after-save journal check is a test of
		// internal/sim/model's; the program runs without it.
		model.SetJournalCheck(false)
		os.Exit(cli.Main())
	}
	dir, err := os.MkdirTemp("", "corral-bin")
	if err != nil {
		panic(err)
	}
	// Keep corral's SSH key and the embedded emulator's state off the
	// user's own directories; the corral processes inherit these.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	// corral sim serve uses the real Debian 12 template by default where
	// the machine can build it (minutes, the first time): these tests
	// keep the stand-in unless they ask (CORRAL_SIM_REAL_TEMPLATES=1).
	if os.Getenv("CORRAL_SIM_REAL_TEMPLATES") == "" {
		os.Setenv("CORRAL_SIM_REAL_TEMPLATES", "0")
	}
	// Where LXC cannot run (not root, no lxc package) the emulator starts
	// no CT unless opted in to the unisolated view: these tests opt in by
	// name (CI has lxc and CORRAL_REQUIRE_LXC=1, so there it is unused).
	// Tests of the refusal itself clear it with t.Setenv.
	if os.Getenv("CORRAL_SIM_UNISOLATED") == "" {
		os.Setenv("CORRAL_SIM_UNISOLATED", "1")
	}
	// With no endpoint, a corral command here runs the emulator in its
	// own process (CORRAL_SIM_INPROCESS=1) rather than starting the
	// local one in the background, which would outlive the test; the
	// tests of the local emulator clear it and stop theirs.
	if os.Getenv("CORRAL_SIM_INPROCESS") == "" {
		os.Setenv("CORRAL_SIM_INPROCESS", "1")
	}
	// corral is this test binary, linked under its name: it runs
	// main's cli.Main (above), under the race detector when the tests
	// do (testenv.SelfAs).
	if corralBin, err = testenv.SelfAs(dir, "corral"); err != nil {
		panic(err)
	}
	// The tests wait on processes and emulators far more than they
	// compute: a plain `go test` runs 8 at once as the README's command
	// does.
	testenv.DefaultParallel(8)
	code := m.Run()
	os.RemoveAll(dir)
	testenv.Exit(code)
}

// serve starts `corral sim serve` and returns its state dir and the
// environment from its env file.
func serve(t *testing.T) (string, []string) { return serveScaled(t, "0") }

// serveScaled is serve with task durations × scale.
func serveScaled(t *testing.T, scale string) (string, []string) {
	t.Helper()
	state := t.TempDir()
	pvetest.ReserveGuestBlock(t, state) // its CTs' addresses are its own (see newDaemonTest)
	cmd := exec.Command(corralBin, "sim", "serve", "--listen", "127.0.0.1:0", "--state", state, "--time-scale", scale, "--guest-ssh-port", "0")
	return startServe(t, cmd, state)
}

// startServe starts cmd, a corral sim serve with --state state (possibly
// wrapped, as in a network namespace), waits until it is ready and
// returns the environment from its env file.
func startServe(t *testing.T, cmd *exec.Cmd, state string) (string, []string) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "credentials:") {
				ready <- true
			}
		}
		ready <- false
	}()
	// Ready when it says so, however loaded the machine: the wait ends
	// at the test's own deadline, not after a fixed time.
	var readyOK, answered bool
	testenv.WaitFor(t, "sim serve to print its credentials", func() bool {
		select {
		case readyOK = <-ready:
			answered = true
		default:
		}
		return answered
	})
	if !readyOK {
		t.Fatal("sim serve exited before it was ready")
	}
	data, err := os.ReadFile(filepath.Join(state, "env"))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, line := range strings.Split(string(data), "\n") {
		if kv, ok := strings.CutPrefix(line, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, k+"="+strings.Trim(v, "'"))
		}
	}
	for _, name := range []string{"PROXMOX_VE_ENDPOINT", "PROXMOX_VE_API_TOKEN", "PROXMOX_VE_FINGERPRINT", "PVE_ROOT_PASSWORD", "PVE_ROOT_TOKEN"} {
		if !strings.Contains(string(data), "export "+name+"=") {
			t.Fatalf("env file lacks %s:\n%s", name, data)
		}
	}
	return state, env
}

func corral(t testing.TB, env []string, args ...string) (int, string, string) {
	t.Helper()
	return corralCmd(t, env, exec.Command(corralBin, args...))
}

// corralCmd runs cmd from the repository root with env added to ours.
func corralCmd(t testing.TB, env []string, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = "../.."
	return testenv.Run(t, cmd)
}

func mustCorral(t *testing.T, env []string, args ...string) string {
	t.Helper()
	code, out, errs := corral(t, env, args...)
	if code != 0 {
		t.Fatalf("corral %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// volumeDir finds the data volume of the quickstart app on disk.
func volumeDir(t *testing.T, state string, env []string) (string, string) {
	out := mustCorral(t, env, "volumes")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == "hello" && f[1] == "data" {
			volid := f[2]
			sid, name, _ := strings.Cut(volid, ":")
			return volid, filepath.Join(state, "data", "pve", sid, name)
		}
	}
	t.Fatalf("no hello/data volume in:\n%s", out)
	return "", ""
}

// TestQuickstartThroughTheBinary is the README's quickstart against a
// standalone emulator over HTTPS.
func TestQuickstartThroughTheBinary(t *testing.T) {
	t.Parallel()
	state, env := serve(t)
	m := "examples/quickstart/corral.yaml"
	if code, out, errs := corral(t, env, "plan", "-f", m); code != 2 {
		t.Fatalf("first plan: exit %d, want 2\n%s%s", code, out, errs)
	}
	mustCorral(t, env, "apply", "-f", m, "--auto-approve")
	if code, out, errs := corral(t, env, "plan", "-f", m); code != 0 {
		t.Fatalf("plan after apply: exit %d, want 0\n%s%s", code, out, errs)
	}
	volid, dir := volumeDir(t, state, env)
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCorral(t, env, "destroy", "-f", m, "--auto-approve")
	if out := mustCorral(t, env, "status", "-f", m); !strings.Contains(out, "not created") {
		t.Fatalf("status after destroy:\n%s", out)
	}
	mustCorral(t, env, "apply", "-f", m, "--auto-approve")
	volid2, dir2 := volumeDir(t, state, env)
	if volid2 != volid {
		t.Fatalf("volume changed from %s to %s", volid, volid2)
	}
	if b, err := os.ReadFile(filepath.Join(dir2, "hello.txt")); err != nil || string(b) != "still here" {
		t.Fatalf("data after recreate: %q %v", b, err)
	}
}

// TestEmbeddedEmulator: with no endpoint and CORRAL_SIM_INPROCESS=1 (set
// by TestMain), the emulator runs inside the command, which says so (the
// local emulator the README's first command starts is daemon_test.go's).
func TestEmbeddedEmulator(t *testing.T) {
	t.Parallel()
	env := []string{"PROXMOX_VE_ENDPOINT=", "PROXMOX_VE_API_TOKEN=", "XDG_STATE_HOME=" + t.TempDir(), "CORRAL_SIM_TIME_SCALE=0"}
	code, out, errs := corral(t, env, "apply", "-f", "examples/quickstart/corral.yaml", "--auto-approve")
	if code != 0 || !strings.Contains(errs, "embedded Proxmox VE emulator") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	// The state persists between runs: the next plan has nothing to do.
	code, out, errs = corral(t, env, "plan", "-f", "examples/quickstart/corral.yaml")
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestKill9DuringApply kills the corral binary with SIGKILL at a sample of
// moments during apply and destroy (the in-process crash test in
// internal/apply covers every API-call boundary), then runs it again: it
// converges and the volume keeps its volid and data.
func TestKill9DuringApply(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: real processes and task durations")
	}
	state, env := serveScaled(t, "0.02")
	m := "examples/quickstart/corral.yaml"
	start := time.Now()
	mustCorral(t, env, "apply", "-f", m, "--auto-approve")
	clean := time.Since(start)
	volid, dir := volumeDir(t, state, env)
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCorral(t, env, "destroy", "-f", m, "--auto-approve")

	kills := 0
	// Without CORRAL_TEST_FULL every other moment, shifted daily
	// (testenv.SampleOf); CI kills at all five.
	t.Logf("moments: all five with %s=1, else every other (%s=%d)", testenv.FullVar, testenv.SweepSeedVar, testenv.Seed())
	for i := 1; i <= 5; i++ {
		if !testenv.SampleOf(t, i, 2) {
			continue
		}
		for _, verb := range []string{"apply", "destroy"} {
			cmd := exec.Command(corralBin, verb, "-f", m, "--auto-approve")
			cmd.Env = append(os.Environ(), env...)
			cmd.Dir = "../.."
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(clean * time.Duration(i) / 6) // the point: a kill at a later moment of the run each time
			if cmd.Process.Signal(syscall.SIGKILL) == nil {
				kills++
			}
			cmd.Wait()
			// Run it again, as a user would.
			mustCorral(t, env, verb, "-f", m, "--auto-approve")
			if verb == "apply" {
				if code, out, errs := corral(t, env, "plan", "-f", m); code != 0 {
					t.Fatalf("kill %d: plan after re-apply: exit %d\n%s%s", i, code, out, errs)
				}
			}
			v, d := volumeDir(t, state, env)
			if v != volid {
				t.Fatalf("kill %d during %s: volume is %s, was %s", i, verb, v, volid)
			}
			if b, err := os.ReadFile(filepath.Join(d, "precious")); err != nil || string(b) != "data" {
				t.Fatalf("kill %d during %s: data lost: %q %v", i, verb, b, err)
			}
		}
	}
	t.Logf("%d SIGKILLs during apply/destroy (clean apply took %s); 0 volumes lost", kills, clean.Round(time.Millisecond))
}

// TestCtrlC: the first SIGINT lets the step under way finish and stops
// before the next (exit 130, keeper protected, lock released); the next
// apply goes on from there (issue 16, item 6).
func TestCtrlC(t *testing.T) {
	t.Parallel()
	state, env := serve(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "corral.yaml")
	os.WriteFile(m, []byte(`apps:
  - name: slow
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    features: {nesting: true}
    volumes:
      - {name: data, size: 1G, mount: /srv/data}
    provision:
      - run: |
          echo first-started
          sleep 2
          echo first > /srv/data/first
      - run: |
          echo second > /srv/data/second
`), 0o644)
	cmd := exec.Command(corralBin, "apply", "-f", m, "--auto-approve")
	cmd.Env = append(os.Environ(), env...)
	var errb safeBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // if the wait below gives up
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stderr:\n%s", errb.String())
		}
	})
	testenv.WaitFor(t, "the first step to start", func() bool { return strings.Contains(errb.String(), "first-started") })
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	out := errb.String()
	if code != 130 || !strings.Contains(out, "stopped on request between two steps") {
		t.Fatalf("after one Ctrl-C: exit %d (want 130)\n%s", code, out)
	}
	if strings.Contains(out, "second") {
		t.Errorf("the second step ran after the Ctrl-C:\n%s", out)
	}
	volid, vdir := volumeDirOf(t, state, env, "slow")
	if b, err := os.ReadFile(filepath.Join(vdir, "first")); err != nil || string(b) != "first\n" {
		t.Fatalf("the step under way did not finish (volume %s): %q %v\n%s", volid, b, err, out)
	}
	status := mustCorral(t, env, "status", "-f", m, "-o", "json")
	if !strings.Contains(status, `"protected": true`) || strings.Contains(status, `"lock":`) {
		t.Errorf("keeper unprotected or still locked after the Ctrl-C:\n%s", status)
	}
	out2 := mustCorral(t, env, "apply", "-f", m, "--auto-approve")
	_ = out2
	if b, err := os.ReadFile(filepath.Join(vdir, "second")); err != nil || string(b) != "second\n" {
		t.Fatalf("the next apply did not go on: %q %v", b, err)
	}
}

// safeBuffer is a bytes.Buffer safe to read while a process writes it.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// volumeDirOf finds volume data of app on disk.
func volumeDirOf(t *testing.T, state string, env []string, app string) (string, string) {
	out := mustCorral(t, env, "volumes")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == app && f[1] == "data" {
			sid, name, _ := strings.Cut(f[2], ":")
			return f[2], filepath.Join(state, "data", "pve", sid, name)
		}
	}
	t.Fatalf("no data volume of %s in:\n%s", app, out)
	return "", ""
}

// walkthroughEnv is the environment of TestREADMEWalkthrough's commands:
// a fresh state home whose local emulator the first command starts and
// the test's cleanup stops, with a guest block of its own, as
// newDaemonTest's (the quickstart's web server of a test beside it
// listens on the same port), and task durations scaled down.
func walkthroughEnv(t *testing.T) []string {
	home := t.TempDir()
	pvetest.ReserveGuestBlock(t, filepath.Join(home, "corral", "sim"))
	extra := []string{"XDG_STATE_HOME=" + home, "PROXMOX_VE_ENDPOINT=", "PROXMOX_VE_API_TOKEN=", "CORRAL_SIM_TIME_SCALE=0.02", "CORRAL_SIM_INPROCESS="}
	t.Cleanup(func() {
		cmd := exec.Command(corralBin, "sim", "stop")
		cmd.Env = append(os.Environ(), extra...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sim stop: %v\n%s", err, out)
		}
	})
	return extra
}

// TestREADMEWalkthrough runs the README's "Quickstart, step by step" block
// line by line, as written, on the local emulator with a fresh state,
// after the README's first command, then its "Backups, restore and
// snapshots" block (VOLID: the archive corral backups lists first), and
// checks each line's exit status against its "# exit N" comment (0 where
// there is none). Nothing runs on a terminal: a line that would ask for
// confirmation fails.
func TestREADMEWalkthrough(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := func(heading string) string {
		t.Helper()
		_, rest, ok := strings.Cut(string(readme), heading)
		if !ok {
			t.Fatalf("README has no %q section", heading)
		}
		_, rest, _ = strings.Cut(rest, "```sh\n")
		b, _, _ := strings.Cut(rest, "```")
		return b
	}
	// Task durations scaled down: what is checked is each exit status.
	// As for a user, the first line starts the local emulator and the
	// others use it; the test stops it at the end.
	extra := walkthroughEnv(t)
	run := func(line string, want int) string {
		t.Helper()
		cmdline, comment, _ := strings.Cut(line, "#")
		args := strings.Fields(cmdline)
		if args[0] != "corral" {
			t.Fatalf("walkthrough line %q does not run corral", line)
		}
		code, stdout, stderr := corralCmd(t, extra, exec.Command(corralBin, args[1:]...))
		if code != want {
			t.Fatalf("%s\nexit %d, want %d (comment %q)\n%s%s", line, code, want, comment, stdout, stderr)
		}
		return stdout
	}
	lines := func(b string) []string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(b), "\n") {
			if !strings.HasPrefix(line, "go build") {
				out = append(out, line)
			}
		}
		return out
	}
	wantOf := func(line string) int {
		want := 0
		if _, c, ok := strings.Cut(line, "# exit "); ok {
			fmt.Sscanf(c, "%d", &want)
		}
		return want
	}
	// The README's first command, then the block.
	run("corral apply -f examples/quickstart/corral.yaml --auto-approve", 0)
	steps := 0
	for _, line := range lines(block("## Quickstart, step by step")) {
		out := run(line, wantOf(line))
		// The app a command started is still up in a later one: its
		// health check (a request to its web server) passes.
		if strings.Contains(line, "# HEALTH healthy") && (!strings.Contains(out, "healthy") || strings.Contains(out, "unhealthy") || strings.Contains(out, "unknown")) {
			t.Errorf("%s\nwant the app healthy:\n%s", line, out)
		}
		steps++
	}
	if steps < 8 {
		t.Fatalf("only %d walkthrough lines ran", steps)
	}
	archive := ""
	for _, line := range lines(block("## Backups, restore and snapshots")) {
		if strings.Contains(line, "VOLID") {
			if archive == "" {
				var list struct {
					Backups []struct {
						VolID string `json:"volid"`
					} `json:"backups"`
				}
				if err := json.Unmarshal([]byte(run("corral backups hello -o json", 0)), &list); err != nil || len(list.Backups) == 0 {
					t.Fatalf("no archive to restore: %v %+v", err, list)
				}
				archive = list.Backups[0].VolID
			}
			line = strings.ReplaceAll(line, "VOLID", archive)
		}
		run(line, wantOf(line))
		steps++
	}
	if steps < 14 {
		t.Fatalf("only %d walkthrough lines ran", steps)
	}
}

// TestEmbeddedEnvFileSources: the embedded emulator's env file holds no
// endpoint that nothing serves; sourcing it, or eval "$(corral sim env)",
// in a shell that had a stale endpoint brings corral back to the embedded
// emulator and its state, and the file says how to serve that state.
func TestEmbeddedEnvFileSources(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	base := append(os.Environ(), "XDG_STATE_HOME="+state, "CORRAL_SIM_TIME_SCALE=0")
	cmd := exec.Command(corralBin, "volumes")
	cmd.Env = append(slices.Clone(base), "PROXMOX_VE_ENDPOINT=", "PROXMOX_VE_API_TOKEN=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("corral volumes: %v\n%s", err, out)
	}
	file := filepath.Join(state, "corral", "sim", "env")
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(text), "sim.invalid") || !strings.Contains(string(text), "corral sim serve --state "+filepath.Join(state, "corral", "sim")) {
		t.Fatalf("env file:\n%s", text)
	}
	for _, script := range []string{`. "$1" && exec "$2" volumes`, `eval "$("$2" sim env)" && exec "$2" volumes`} {
		sh := exec.Command("/bin/sh", "-c", script, "sh", file, corralBin)
		sh.Env = append(slices.Clone(base), "PROXMOX_VE_ENDPOINT=https://127.0.0.1:1", "PROXMOX_VE_API_TOKEN=stale@pve!x=y", "PROXMOX_VE_FINGERPRINT=AA")
		out, err := sh.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "using the embedded Proxmox VE emulator") {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
}
