package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// TestSimServe_nodeMemory: `corral sim serve --node-memory 1G` gives
// every node 1 GiB (what /nodes and /cluster/resources report as maxmem
// and the node status as memory.total), and `corral apply` against it
// (with DIR/env's endpoint) starts two 512 MiB apps and fails the third
// with the reason; a size without a unit is refused.
func TestSimServe_nodeMemory(t *testing.T) {
	t.Parallel()
	s := serveSim(t, "--nodes", "2", "--node-memory", "1G", "--real-templates=false")
	dir, vars := s.dir, s.env(t)
	m := writeManifest(t, strings.ReplaceAll(placementManifest(3, "placement:\n  nodes: [pve1]\n"), "memory: 256", "memory: 512"))
	var aout, aerr bytes.Buffer
	code := Run(context.Background(), []string{"apply", "-f", m, "--auto-approve", "--endpoint", vars["PROXMOX_VE_ENDPOINT"],
		"--api-token", vars["PROXMOX_VE_API_TOKEN"], "--fingerprint", vars["PROXMOX_VE_FINGERPRINT"]}, strings.NewReader(""), &aout, &aerr)
	if code != ExitError || !strings.Contains(aerr.String(), "failed: not enough memory on node 'pve1' to start CT ") ||
		!strings.Contains(aerr.String(), "the 2 CT(s) running there hold 1024 of the node's 1024 MiB") {
		t.Fatalf("apply of three 512 MiB apps on a 1 GiB node: exit %d\n%s%s", code, aout.String(), aerr.String())
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("sim serve exit %d\n%s", code, s.errb.String())
	}
	c, err := model.Open(model.Options{Dir: dir, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range c.Nodes() {
		st, err := c.NodeStatus(n.Node)
		if err != nil {
			t.Fatal(err)
		}
		if n.MaxMem != 1<<30 || st.Memory.Total != 1<<30 {
			t.Errorf("node %s: maxmem %d, status memory.total %d, want %d", n.Node, n.MaxMem, st.Memory.Total, 1<<30)
		}
	}

	for _, tc := range []struct{ arg, want string }{
		{"2048", `--node-memory "2048": give a size with its unit, e.g. 2048M or 16G`},
		{"1M", "--node-memory 1M: want at least 64M"},
	} {
		var o, e bytes.Buffer
		code := Run(context.Background(), []string{"sim", "serve", "--state", t.TempDir(), "--listen", "127.0.0.1:0", "--node-memory", tc.arg}, strings.NewReader(""), &o, &e)
		if code == 0 || !strings.Contains(e.String(), tc.want) {
			t.Errorf("--node-memory %s: exit %d\n%s", tc.arg, code, e.String())
		}
	}
}
