package cli

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// guestPorts is the tests' guestSSHPortOf: each guest cluster says its
// guests' SSH port under its endpoint, so tests with guests run in
// parallel, where a process-wide CORRAL_SIM_GUEST_SSH_PORT (t.Setenv)
// kept them serial.
var guestPorts sync.Map // endpoint → port

func guestPortOf(endpoint string) int {
	p, _ := guestPorts.Load(endpoint)
	port, _ := p.(int)
	return port
}

// registerGuestPort tells corral commands at endpoint that its guests
// serve SSH on port, until the test ends.
func registerGuestPort(t *testing.T, endpoint string, port int) {
	t.Helper()
	if _, dup := guestPorts.LoadOrStore(endpoint, port); dup {
		t.Fatalf("two emulators at %s", endpoint)
	}
	t.Cleanup(func() { guestPorts.Delete(endpoint) })
}

// TestGuestSSHPort_perEndpoint: a command at an endpoint whose emulator
// is known uses its guests' port, whatever CORRAL_SIM_GUEST_SSH_PORT
// says; at another endpoint the variable still gives the port, and a
// port a flag set (agent install on the local emulator) wins over both.
func TestGuestSSHPort_perEndpoint(t *testing.T) {
	t.Setenv("CORRAL_SIM_GUEST_SSH_PORT", "2201")
	registerGuestPort(t, "https://127.0.0.1:1/", 2301)
	registerGuestPort(t, "https://127.0.0.1:2/", 2302)
	st := &streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard}
	for _, tt := range []struct {
		cf   connFlags
		want int
	}{
		{connFlags{endpoint: "https://127.0.0.1:1/"}, 2301},
		{connFlags{endpoint: "https://127.0.0.1:2/"}, 2302},
		{connFlags{endpoint: "https://127.0.0.1:3/"}, 2201},
		{connFlags{endpoint: "https://127.0.0.1:1/", guestSSHPort: 2401}, 2401},
	} {
		tt.cf.token = "corral@pve!t=00000000-0000-0000-0000-000000000000"
		tt.cf.fingerprint = strings.Repeat("AB:", 31) + "AB"
		s, err := connect(context.Background(), st, tt.cf)
		if err != nil {
			t.Fatal(err)
		}
		ssh, err := sshConfig(s, false)
		if err != nil {
			t.Fatal(err)
		}
		if ssh.Port != tt.want {
			t.Errorf("%s (flag port %d): guests' SSH on %d, want %d", tt.cf.endpoint, tt.cf.guestSSHPort, ssh.Port, tt.want)
		}
		if got := simSSHPort(tt.cf); got != strconv.Itoa(tt.want) {
			t.Errorf("%s (flag port %d): the agent is told %s, want %d", tt.cf.endpoint, tt.cf.guestSSHPort, got, tt.want)
		}
	}
}
