package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestShellUnquote: the token read from DIR/env is the one sim's
// shellQuote wrote, quotes included.
func TestShellUnquote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`'corral@pve!corral=abc-123'`: "corral@pve!corral=abc-123",
		`'it'\''s'`:                   "it's",
		`plain`:                       "plain",
		`''`:                          "",
	} {
		if got := shellUnquote(in); got != want {
			t.Errorf("shellUnquote(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestDaemonSettingsDifferences: each setting that differs is named with
// both values; equal settings give none.
func TestDaemonSettingsDifferences(t *testing.T) {
	t.Parallel()
	a := daemonSettings{TimeScale: 0.25, Runtime: "view", Unisolated: true}
	if d := a.differences(a); len(d) != 0 {
		t.Fatalf("equal settings differ: %v", d)
	}
	b := daemonSettings{TimeScale: 0, RealTemplates: true}
	got := strings.Join(a.differences(b), "; ")
	for _, want := range []string{"CORRAL_SIM_TIME_SCALE=0.25 (here 0)", `CORRAL_SIM_RUNTIME="view" (here "")`,
		"CORRAL_SIM_UNISOLATED=1 (here unset)", "CORRAL_SIM_REAL_TEMPLATES=unset (here 1)"} {
		if !strings.Contains(got, want) {
			t.Errorf("differences %q lack %q", got, want)
		}
	}
}

// TestFollowLog: sim logs -F prints the log, then what is appended, until
// stopped.
func TestFollowLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "daemon.log")
	if err := os.WriteFile(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- followLog(context.Background(), stop, path, &out, true) }()
	testenv.WaitFor(t, "the log's first line", func() bool { return out.String() == "first\n" })
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("second\n")
	f.Close()
	testenv.WaitFor(t, "the appended line", func() bool { return out.String() == "first\nsecond\n" })
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := followLog(context.Background(), nil, filepath.Join(t.TempDir(), "none"), &out, false); err == nil || !strings.Contains(err.Error(), "any corral command without PROXMOX_VE_ENDPOINT starts it") {
		t.Fatalf("no log: %v", err)
	}
}

// TestCompletionStartsNoEmulator: a completion (connectTo with start
// false) with no endpoint and no local emulator running starts none.
func TestCompletionStartsNoEmulator(t *testing.T) {
	t.Setenv("PROXMOX_VE_ENDPOINT", "")
	t.Setenv(inProcessEnv, "")
	home := t.TempDir()
	t.Setenv("XDG_STATE_HOME", home)
	quiet := &streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard}
	_, err := connectTo(context.Background(), quiet, connFlags{}, false)
	if err == nil || !strings.Contains(err.Error(), "the local emulator is not running") {
		t.Fatalf("connectTo without start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "corral", "sim", daemonLogFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an emulator was started (its log: %v)", err)
	}
	if got := fromCluster(newSimCmd(quiet), func(context.Context, *session) ([]string, error) { return []string{"x"}, nil }); got != nil {
		t.Fatalf("completion listed %v with no emulator", got)
	}
}

// TestWaitReleased: after a SIGKILL the emulator's pid is a zombie while
// its other threads still close its files, the state lock with them; the
// next command waits for the lock then (it failed with "in use by another
// corral emulator"), but not for a lock held by a process that is gone.
func TestWaitReleased(t *testing.T) {
	t.Parallel()
	d := localDaemon{dir: t.TempDir()}
	hold := func() *os.File {
		f, err := os.OpenFile(d.path(".lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		return f
	}
	within := func(what string, f func()) {
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-testenv.Expiry(t):
			t.Fatalf("%s: waitReleased still waiting at the test's deadline", what)
		}
	}

	zombie := exec.Command("sleep", "600")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zombie.Wait() })
	zombie.Process.Kill() // not waited for: a zombie until the cleanup
	testenv.WaitFor(t, "the killed sleep to be a zombie", func() bool {
		return !processAlive(zombie.Process.Pid) && pidExists(zombie.Process.Pid)
	})

	lock := hold()
	go func() { time.Sleep(200 * time.Millisecond); lock.Close() }()
	within("zombie", func() { d.waitReleased(context.Background(), zombie.Process.Pid, time.Hour) })
	if d.stateBusy() {
		t.Fatal("waitReleased returned for a zombie's pid while the state directory was still locked")
	}

	other := hold() // another emulator's, for as long as the test runs
	defer other.Close()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	within("gone", func() { d.waitReleased(context.Background(), gone.Process.Pid, time.Hour) })
	if !d.stateBusy() {
		t.Fatal("the other holder's lock is gone")
	}
}

// TestDaemonSignal: a signal for the recorded emulator reaches a process
// whose command line is this directory's `sim serve --daemon`, and not
// one that has the number but is something else (a number is reused once
// pid_max wraps); a process that has ended is no error.
func TestDaemonSignal(t *testing.T) {
	t.Parallel()
	d := localDaemon{dir: t.TempDir()}
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command("sh", append([]string{"-c", "sleep 600; :"}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	waitState := func(cmd *exec.Cmd) string {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ProcessState.String()
		}
		return fmt.Sprint("exited: ", err)
	}

	other := start("serve", "--daemon", d.dir+"-other")
	if err := d.signal(other.Process.Pid, unix.SIGTERM); err != nil {
		t.Fatalf("signal to another directory's process: %v", err)
	}
	ours := start("serve", "--daemon", d.dir)
	if err := d.signal(ours.Process.Pid, unix.SIGTERM); err != nil {
		t.Fatalf("signal to the emulator: %v", err)
	}
	if got := waitState(ours); got != "signal: terminated" {
		t.Fatalf("the emulator after SIGTERM: %s", got)
	}
	if !processAlive(other.Process.Pid) {
		t.Fatal("another directory's process got the signal")
	}
	if err := d.signal(ours.Process.Pid, unix.SIGTERM); err != nil {
		t.Fatalf("signal to an emulator that has ended: %v", err)
	}
}
