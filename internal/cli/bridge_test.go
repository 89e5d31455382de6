package cli

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

// TestBridgeUncheckedWhenNetworkListUnreadable: when GET
// /nodes/{node}/network fails, plan and doctor warn and go on rather than
// refuse; apply then meets PVE's own answer, the failed start of a
// container on a bridge the node lacks (the emulator fails vzstart as
// vm_start's read_bridge_mtu does).
func TestBridgeUncheckedWhenNetworkListUnreadable(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, strings.Replace(goodApp, "    memory: 512\n", "    memory: 512\n    network:\n      bridge: vmbr9\n", 1))
	c.srv.SetFaults(sim.FaultSpec{Seed: 1, Read5xx: 1, Match: "/network"})
	const warn = "could not read the network list of node pve (list bridges on pve: GET /nodes/pve/network: 500"

	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout+r.stderr, warn) {
		t.Errorf("plan: exit %d, want %d with the warning %q\nstdout:\n%s\nstderr:\n%s", r.code, ExitChanges, warn, r.stdout, r.stderr)
	}
	r = c.run(append([]string{"doctor", "-f", m}, c.connArgs()...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "could not read the network list of node pve") {
		t.Errorf("doctor: exit %d, want 0 with the warning\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("apply", "-f", m, "--auto-approve")
	if r.code != 1 || !strings.Contains(r.stderr, "bridge 'vmbr9' does not exist") {
		t.Errorf("apply: exit %d, want 1 with PVE's start error\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestBridgeUncheckedWhenTokenSeesNoBridge: PVE lists a bridge only to a
// token with SDN.Audit or SDN.Use on it, so a token without them sees
// none; plan then warns that bridges are not checked rather than call
// every bridge missing (doctor names the missing SDN.Use).
func TestBridgeUncheckedWhenTokenSeesNoBridge(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	var privs []string
	for _, p := range model.OperatorPrivileges {
		if p != "SDN.Use" {
			privs = append(privs, p)
		}
	}
	d.setRole(model.OperatorRole, privs)
	m := writeManifest(t, goodApp)
	r := d.run("plan", "-f", m)
	const warn = "the token sees no bridge on node pve (PVE lists a bridge only with SDN.Audit or SDN.Use on /sdn/zones/localnetwork/<bridge>): the bridges of apps there are not checked before apply"
	if r.code != ExitChanges || !strings.Contains(r.stdout+r.stderr, warn) {
		t.Errorf("plan: exit %d, want %d with the warning %q\nstdout:\n%s\nstderr:\n%s", r.code, ExitChanges, warn, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "does not exist on node") {
		t.Errorf("plan calls the bridge missing:\n%s%s", r.stdout, r.stderr)
	}
}
