package sim

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// Issue 33: proxmoxer (1.2.0, Debian 12's python3-proxmoxer) drives the
// emulator through pools, users (full=1 or not), roles, a CT's firewall
// options, rules, aliases and IP sets (and the cluster's), power, clone,
// template, tasks and cluster resources: testdata/thirdparty/proxmoxer/
// client.py asserts each answer as PVE gives it.
func TestThirdParty_proxmoxer(t *testing.T) {
	t.Parallel()
	py := pythonWith(t, "proxmoxer")
	p := newThirdParty(t)
	out := p.run(exec.Command(py, testdataDir(t, "proxmoxer")+"/client.py"))
	if strings.TrimSpace(out) != "ok" {
		t.Fatalf("client.py printed %q, want ok", out)
	}
	// What the client did is the emulator's state now.
	if conf := p.config("103", false); conf["template"] != float64(1) || conf["hostname"] != "db2" {
		t.Errorf("CT 103 after the client: %v", conf)
	}
	var alias struct {
		CIDR string `json:"cidr"`
	}
	p.ok(p.root(), "GET", "/nodes/pve/lxc/101/firewall/aliases/admin", nil, &alias)
	if alias.CIDR != "10.0.0.6" {
		t.Errorf("alias admin: %q", alias.CIDR)
	}
}

// pythonWith returns a python3 that imports module (and requests), the
// one on PATH or Debian's, or skips (fails where proxmoxer is required).
func pythonWith(t *testing.T, module string) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import requests, "+module).Run() == nil {
			return path
		}
	}
	testenv.Lack(t, testenv.Proxmoxer, "no python3 here imports "+module+": apt-get install python3-proxmoxer python3-requests (.ci/run does)")
	return ""
}
