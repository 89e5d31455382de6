package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/testenv"
)

const bridgeHealthManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    features: {nesting: true}
    health:
      - name: hostname file
        command: test -s /etc/hostname
        interval: 1s
`

// TestAgent_healthFromIsolatedCT: an agent installed in an isolated CT
// (its own network namespace, on the emulator's bridge) runs the app's
// health check over SSH: it asks the API at the bridge gateway for the
// app's address, which the API gives it as the app's bridge address,
// and reaches the app's sshd there, as on a PVE bridge.
func TestAgent_healthFromIsolatedCT(t *testing.T) {
	// Serial: it needs real containers where the machine has them, not
	// TestMain's view.
	machineRuntime(t)
	c := newGuestCluster(t)
	if ok, why := c.srv.Guests().Isolated(); !ok {
		testenv.Lackf(t, testenv.LXC, "CTs share the host's network here (%v): nothing to prove", why)
	}
	m := writeManifest(t, bridgeHealthManifest)
	c.mustRun("apply", "-f", m, "--auto-approve")
	bin := corralBinary(t)
	r := runCorral(t, append([]string{"agent", "install", "-f", m, "--binary", bin, "--interval", "1s"}, c.rootArgs()...)...)
	if r.code != 0 {
		t.Fatalf("install: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() { runCorral(t, append([]string{"agent", "uninstall", "-f", m}, c.rootArgs()...)...) })
	vmid := c.agentCTs("demo")[0]
	agentLogText := func() string {
		b, _ := os.ReadFile(c.file(strings.Split(c.config(vmid)["rootfs"], ",")[0], strings.TrimPrefix(agent.InstalledLog, "/")))
		return "the agent's log:\n" + string(b)
	}
	var web struct {
		Health string `json:"health"`
		IP     string `json:"ip"`
		Checks []struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"checks"`
	}
	waitFor(t, "the agent's SSH health check of web passes", func() bool {
		r := runCorral(t, append([]string{"agent", "status", "-f", m, "-o", "json"}, c.rootArgs()...)...)
		var st struct {
			Status struct {
				Apps []json.RawMessage `json:"apps"`
			} `json:"status"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Status.Apps) == 0 {
			return false
		}
		json.Unmarshal(st.Status.Apps[0], &web)
		return web.Health == "healthy"
	}, func() string { b, _ := json.Marshal(web); return string(b) + "\n" + agentLogText() })
	if !strings.HasPrefix(web.IP, "10.0.") {
		t.Errorf("the agent sees web at %q, want its bridge address", web.IP)
	}
}
