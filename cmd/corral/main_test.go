package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run the built binary exactly as a user does: `corral sim
// serve` in one process, corral verbs in others, talking HTTPS with the
// fingerprint from the emulator's env file.

var corralBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "corral-bin")
	if err != nil {
		panic(err)
	}
	corralBin = filepath.Join(dir, "corral")
	// Keep corral's SSH key and the embedded emulator's state off the
	// user's own directories; the corral processes inherit these.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	out, err := exec.Command("go", "build", "-o", corralBin, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serve starts `corral sim serve` and returns its state dir and the
// environment from its env file.
func serve(t *testing.T) (string, []string) { return serveScaled(t, "0") }

// serveScaled is serve with task durations × scale.
func serveScaled(t *testing.T, scale string) (string, []string) {
	t.Helper()
	state := t.TempDir()
	cmd := exec.Command(corralBin, "sim", "serve", "--listen", "127.0.0.1:0", "--state", state, "--time-scale", scale, "--guest-ssh-port", "0")
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
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("sim serve exited before it was ready")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sim serve not ready after 30s")
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

func corral(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(corralBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = "../.."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
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

// TestEmbeddedEmulator is the README's first command: no endpoint, so the
// embedded emulator is used, and it says so.
func TestEmbeddedEmulator(t *testing.T) {
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
	for i := 1; i <= 5; i++ {
		for _, verb := range []string{"apply", "destroy"} {
			cmd := exec.Command(corralBin, verb, "-f", m, "--auto-approve")
			cmd.Env = append(os.Environ(), env...)
			cmd.Dir = "../.."
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(clean * time.Duration(i) / 6)
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
