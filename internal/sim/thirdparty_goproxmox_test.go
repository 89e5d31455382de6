package sim

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// Issue 33: go-proxmox (v0.8.2) drives the emulator through version,
// nodes, pools, cluster resources and tasks, containers (list, status and
// config, stop, start, clone, template, config and tag changes,
// snapshots, interfaces, destroy) with task waits, a CT's and the
// cluster's firewall (options, aliases, IP sets and entries, rules,
// refs), users and roles, the node's status and storage, the next id. It lives in a nested module
// (testdata/thirdparty/goproxmox, its own go.mod and go.sum) so that
// corral's go.mod does not depend on it; testenv.BuildModule builds it
// with the go command that runs the test, with the flags the test was
// built with.
func TestThirdParty_goProxmox(t *testing.T) {
	t.Parallel()
	// Built as this test was (-race under -race), it shares the build
	// cache's standard library with the test's own build; under -race
	// it exits at once (GORACE), as SelfAs's processes do.
	bin := testenv.BuildModule(t, testdataDir(t, "goproxmox"), testenv.GoProxmox, "go-proxmox")
	p := newThirdParty(t)
	client := exec.Command(bin)
	client.Env = []string{"GORACE=" + testenv.RaceOptions()}
	if out := p.run(client); strings.TrimSpace(out) != "ok" {
		t.Fatalf("the go-proxmox client printed %q, want ok", out)
	}
	if conf := p.config("102", false); conf["memory"] != float64(768) || conf["tags"] != "db" {
		t.Errorf("CT 102 after the client: %v", conf)
	}
	if r := p.do(p.root(), "GET", "/nodes/pve/lxc/105/config", nil); r.status != 500 {
		t.Errorf("CT 105, which the client destroyed: %d %s", r.status, r.data)
	}
}
