package sim

import (
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/sim/model"
)

// agentRecorder is a VM runtime whose guests boot at once and whose
// agent answers every command, recording them in order.
type agentRecorder struct {
	mu   sync.Mutex
	cmds []string
}

func (r *agentRecorder) Start(model.VMStartSpec) (int, error) { return 4242, nil }
func (r *agentRecorder) Stop(int) error                       { return nil }
func (r *agentRecorder) Shutdown(int, time.Duration) error    { return nil }
func (r *agentRecorder) Agent(_ int, cmd string) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, cmd)
	return map[string]any{}, nil
}

func (r *agentRecorder) commands() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cmds)
}

// TestQemu_snapshotFreezes: a snapshot of a running VM with the agent
// freezes its filesystems around the disks' snapshots (ping, freeze,
// thaw), as __snapshot_freeze does; a stopped VM's does not.
func TestQemu_snapshotFreezes(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	rec := &agentRecorder{}
	k.srv.cluster.SetVMRuntime(rec)
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("200"))
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"cold"}})
	if got := rec.commands(); len(got) != 0 {
		t.Fatalf("a stopped VM's snapshot ran agent commands %v", got)
	}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/snapshot", url.Values{"snapname": {"hot"}})
	if got, want := rec.commands(), []string{"ping", "fsfreeze-freeze", "fsfreeze-thaw"}; !slices.Equal(got, want) {
		t.Fatalf("a running VM's snapshot ran agent commands %v, want %v", got, want)
	}
}
