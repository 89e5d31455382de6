package guest_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/testenv"
)

// needIsolation skips where CTs run in the fallback view (not root, no
// lxc package), saying why; CI installs lxc and runs as root, where
// CORRAL_REQUIRE_LXC=1 turns the skip into a failure.
func (k *kit) needIsolation() {
	k.t.Helper()
	if ok, why := k.m.Isolated(); !ok {
		testenv.Lackf(k.t, testenv.LXC, "CTs run in the fallback view, not isolated: %v", why)
	}
}

// TestGuest_isolation: a CT's commands see only its own processes and
// hostname, and pkill there cannot touch a host process with the same
// command line.
func TestGuest_isolation(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.needIsolation()
	host, arg := hostSleep(t)
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
		{"pid 1 is the CT's init (LXC's minimal init)", "cat /proc/1/comm", "stdout: init.lxc.static"},
		{"init reaps orphans", "(sleep 0.1 &); sleep 0.6; grep -l '^State:.*Z' /proc/[0-9]*/status | wc -l", "stdout: 0"},
		{"ps sees no host process", "ps -eo comm= | grep -c '^sleep' ; ps -eo args= | grep -c '^sleep " + arg + "' || true", "stdout: 1\nstdout: 0"},
		{"pkill finds nothing to kill", "pkill -xf 'sleep " + arg + "'; echo $?", "stdout: 1"},
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
		t.Errorf("the host's sleep %s is gone after pkill inside the CT: %v", arg, err)
	}
}

// hostSleep starts a host process for a CT's pkill to miss: sleep with
// an argument (a random fraction) no other process has, so that only
// the CT's pkill could end it. With a fixed one, another package's test
// running a pkill unisolated on the host at the same time killed it.
func hostSleep(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	arg := fmt.Sprintf("7301.%09d", rand.IntN(1e9))
	host := exec.Command("sleep", arg)
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	return host, arg
}

// TestGuest_network: eth0 is on the emulator's bridge with the address
// from net0 and its MAC, the CT reaches the gateway's exposed API port,
// and a second CT reaches the first over the bridge.
func TestGuest_network(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.needIsolation()
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	go func() {
		for {
			c, err := api.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "pveproxy-here\n")
			c.Close()
		}
	}()
	if err := k.m.Expose(8006, api.Addr().String()); err != nil {
		t.Fatal(err)
	}
	k.create(122, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=dhcp,hwaddr=BC:24:11:00:01:22"})
	k.create(123, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=192.168.50.23/24,gw=192.168.50.1"})
	c, err := k.dial(122, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tests := []struct {
		name, script, want string
	}{
		{"eth0's MAC is hwaddr", "cat /sys/class/net/eth0/address", "stdout: bc:24:11:00:01:22"},
		{"eth0's address", "ip -4 -o addr show dev eth0 | awk '{print $4}'", "stdout: " + "10.0.0.124/16"},
		{"the gateway serves the API", "exec 3<>/dev/tcp/" + guest.GatewayIP + "/8006 && head -1 <&3", "stdout: pveproxy-here"},
		{"the static CT answers on the bridge", "ip route; timeout 5 bash -c 'exec 3<>/dev/tcp/192.168.50.23/22' 2>/dev/null; echo $?", "stdout: default via 10.0.0.1 dev eth0 \nstdout: 10.0.0.0/16 dev eth0 proto kernel scope link src 10.0.0.124 \nstdout: 1"},
	}
	for _, tt := range tests {
		out, err := run(t, c, tt.script)
		if err != nil || out != tt.want {
			t.Errorf("%s: %q: got %q, %v; want %q", tt.name, tt.script, out, err, tt.want)
		}
	}
}

// TestGuest_forwarding: a direct-tcpip channel (ssh -L, the client's
// DialContext) connects from inside the CT, so a service the CT serves
// only on its own loopback is reachable through its login, and a port
// nothing listens on is refused as sshd refuses it.
func TestGuest_forwarding(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.needIsolation()
	k.create(124, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=dhcp"})
	c, err := k.dial(124, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The service: one line on 127.0.0.1:7070 inside the CT, served by a
	// shell the session leaves running.
	srv := `import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7070))
s.listen(4)
while True:
    c, _ = s.accept()
    c.sendall(("inside-" + socket.gethostname() + "\n").encode())
    c.close()
`
	if out, err := run(t, c, "printf '%s' "+client.ShellQuote(srv)+" > /root/srv.py && (setsid python3 /root/srv.py >/dev/null 2>&1 </dev/null &) && echo started"); err != nil || out != "stdout: started" {
		t.Fatalf("start the service: %q %v", out, err)
	}
	var line string
	testenv.WaitFor(t, "a line from 127.0.0.1:7070 through the CT's login", func() bool {
		dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // one dial
		defer cancel()
		conn, err := c.DialContext(dctx, "tcp", "127.0.0.1:7070")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(conn)
		conn.Close()
		line = strings.TrimSpace(string(b))
		return line != ""
	})
	if want := "inside-hermes"; line != want {
		t.Errorf("through the CT's login: got %q, want %q (the CT's own service, not the host's)", line, want)
	}
	// The host's own 127.0.0.1:7070 is not what answered: nothing listens
	// there on the host.
	if hc, err := net.DialTimeout("tcp", "127.0.0.1:7070", time.Second); err == nil {
		hc.Close()
		t.Error("127.0.0.1:7070 answers on the host: the test cannot tell the CT's service from the host's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.DialContext(ctx, "tcp", "127.0.0.1:7071"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a closed port in the CT: got %v, want a refused connection", err)
	}
}
