package guest_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	client "github.com/corralhq/corral/internal/guest"
)

// needIsolation skips where CTs run in the fallback view (not root, no
// lxc package), saying why; CI installs lxc and runs as root, where
// CORRAL_REQUIRE_LXC=1 turns the skip into a failure.
func (k *kit) needIsolation() {
	k.t.Helper()
	if ok, why := k.m.Isolated(); !ok {
		if os.Getenv("CORRAL_REQUIRE_LXC") != "" {
			k.t.Fatalf("CTs are not isolated here: %v", why)
		}
		k.t.Skipf("skipped: CTs run in the fallback view: %v", why)
	}
}

// TestGuest_isolation: a CT's commands see only its own processes and
// hostname, and pkill there cannot touch a host process with the same
// command line.
func TestGuest_isolation(t *testing.T) {
	k := newKit(t)
	k.needIsolation()
	host := exec.Command("sleep", "7301")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	k.create(120, map[string]string{"hostname": "iso"})
	c, err := k.dial(120, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tests := []struct {
		name, script, want string
	}{
		{"hostname is the CT's", "hostname", "stdout: iso"},
		{"pid 1 is the CT's init", "cat /proc/1/comm", "stdout: sleep"},
		{"ps sees no host process", "ps -eo comm= | grep -c '^sleep' ; ps -eo args= | grep -c '^sleep 7301' || true", "stdout: 1\nstdout: 0"},
		{"pkill finds nothing to kill", "pkill -f 'slee[p] 7301'; echo $?", "stdout: 1"},
		{"no host network interface", "ls /sys/class/net | grep -v '^lo$' | grep -vc '^eth' || true", "stdout: 0"},
	}
	for _, tt := range tests {
		out, err := run(t, c, tt.script)
		if err != nil || out != tt.want {
			t.Errorf("%s: %q: got %q, %v; want %q", tt.name, tt.script, out, err, tt.want)
		}
	}
	// pkill ran to completion above: a kill would show by now.
	if data, err := os.ReadFile("/proc/" + strconv.Itoa(host.Process.Pid) + "/stat"); err != nil || strings.Contains(string(data), ") Z ") {
		t.Errorf("the host's sleep 7301 is gone after pkill inside the CT: %v", err)
	}
}
