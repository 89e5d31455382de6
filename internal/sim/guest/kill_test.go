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
)

const killHelperEnv = "CORRAL_TEST_KILL_HELPER"

// TestGuest_killedEmulatorLeavesNothing: an emulator killed with SIGKILL
// takes its containers' processes and its network namespace with it, and
// the next emulator on the same state directory boots the CTs again.
func TestGuest_killedEmulatorLeavesNothing(t *testing.T) {
	if os.Getenv(killHelperEnv) != "" {
		killHelper(t)
		return
	}
	k := newKit(t)
	k.needIsolation()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGuest_killedEmulatorLeavesNothing$", "-test.v")
	cmd.Env = append(os.Environ(), killHelperEnv+"=1")
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
		deadline := time.Now().Add(10 * time.Second)
		for alive(p.pid) {
			if time.Now().After(deadline) {
				t.Errorf("%s (PID %d) survived the emulator's SIGKILL", p.what, p.pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(data), ") Z ")
}

// killHelper runs in the child: an emulator with one CT running a
// daemon; it prints the daemon's and the namespace holder's host PIDs
// and waits to be killed.
func killHelper(t *testing.T) {
	k := newKit(t)
	k.create(130, nil)
	c, err := k.dial(130, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	daemon := startDaemon(t, c, 7130)
	holder := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || string(b) != "sleep\x00infinity\x00" {
			continue
		}
		st, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		if strings.Contains(string(st), "\nPPid:\t"+strconv.Itoa(os.Getpid())+"\n") {
			holder, _ = strconv.Atoi(e.Name())
		}
	}
	fmt.Printf("PIDS %d %d\n", daemon, holder)
	select {}
}
