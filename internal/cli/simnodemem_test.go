package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

// TestSimServe_nodeMemory: `corral sim serve --node-memory 2G` gives every
// node 2 GiB (what /nodes and /cluster/resources report as maxmem and
// the node status as memory.total); a size without a unit is refused.
func TestSimServe_nodeMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb lockedBuffer
	done := make(chan int)
	go func() {
		done <- Run(ctx, []string{"sim", "serve", "--state", dir, "--listen", "127.0.0.1:0", "--nodes", "2",
			"--node-memory", "2G", "--time-scale", "0", "--guest-ssh-port", "0", "--real-templates=false"}, strings.NewReader(""), &out, &errb)
	}()
	pvetest.WaitFor(t, "sim serve to print its credentials", func() bool {
		select {
		case code := <-done:
			t.Fatalf("sim serve exited %d early\n%s%s", code, out.String(), errb.String())
		default:
		}
		return strings.Contains(out.String(), "credentials:")
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("sim serve exit %d\n%s", code, errb.String())
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
		if n.MaxMem != 2<<30 || st.Memory.Total != 2<<30 {
			t.Errorf("node %s: maxmem %d, status memory.total %d, want %d", n.Node, n.MaxMem, st.Memory.Total, 2<<30)
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
