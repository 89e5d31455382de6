package guest_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/testenv"
)

// killHelperEnv names, in the child, the state directory its emulator
// uses: the parent's own temporary directory, which the parent's cleanup
// removes (the killed child's never runs).
const killHelperEnv = "CORRAL_TEST_KILL_HELPER"

// TestGuest_killedEmulatorLeavesNothing: an emulator killed with SIGKILL
// takes its containers' processes and its network namespace with it, and
// the next emulator on the same state directory boots the CTs again.
func TestGuest_killedEmulatorLeavesNothing(t *testing.T) {
	t.Parallel()
	if dir := os.Getenv(killHelperEnv); dir != "" {
		killHelper(t, dir)
		return
	}
	k := newKit(t)
	k.needIsolation()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGuest_killedEmulatorLeavesNothing$", "-test.v")
	cmd.Env = append(os.Environ(), killHelperEnv+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var daemon, holder int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, _ := fmt.Sscanf(sc.Text(), "PIDS %d %d", &daemon, &holder); n == 2 {
			break
		}
	}
	if daemon == 0 || holder == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the helper emulator did not report its PIDs")
	}
	cmd.Process.Kill()
	cmd.Wait()
	for _, p := range []struct {
		what string
		pid  int
	}{{"a CT's daemon", daemon}, {"the network namespace's holder", holder}} {
		testenv.WaitFor(t, fmt.Sprintf("%s (PID %d) to end after the emulator's SIGKILL", p.what, p.pid), func() bool { return !alive(p.pid) })
	}
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(data), ") Z ")
}

// killHelper runs in the child: an emulator with one CT running a
// daemon, its state in dir; it prints the daemon's and the namespace
// holder's host PIDs and waits to be killed.
func killHelper(t *testing.T, dir string) {
	k := newKitIn(t, dir, 10*time.Millisecond)
	k.create(130, nil)
	c, err := k.dial(130, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	daemon := startDaemon(t, c, 7130)
	holder, err := netnsHolder(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PIDS %d %d\n", daemon, holder)
	select {}
}

// netnsHolder is the network namespace's holder among parent's children:
// the "sleep infinity" child in a network namespace other than parent's.
// The idmap holder (userns.go) is a "sleep infinity" child too, but it
// shares the emulator's network namespace, so taking any such child could
// watch the wrong one; exactly one must match.
func netnsHolder(parent int) (int, error) {
	own, err := os.Readlink("/proc/" + strconv.Itoa(parent) + "/ns/net")
	if err != nil {
		return 0, err
	}
	var found []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || string(b) != "sleep\x00infinity\x00" {
			continue
		}
		st, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		if !strings.Contains(string(st), "\nPPid:\t"+strconv.Itoa(parent)+"\n") {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && ns != own {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("want one network namespace holder (a sleep infinity child of %d in a network namespace of its own), found %v", parent, found)
	}
	return found[0], nil
}
