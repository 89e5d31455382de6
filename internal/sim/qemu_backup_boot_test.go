package sim

import (
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/sim/vmrun"
	"github.com/corralhq/corral/internal/testenv"
)

// TestQemuBackup_realFreeze backs a real VM up in snapshot mode: the
// guest's own qemu-guest-agent freezes and thaws its filesystems around
// the copy (no ERROR line from either), and reports them thawed after.
// Minutes under TCG, so it runs only with CORRAL_TEST_FULL=1 or
// CORRAL_REQUIRE_KVM=1.
func TestQemuBackup_realFreeze(t *testing.T) {
	if !testenv.Full() && !testenv.KVM.Required() {
		t.Skip("boots a real VM (minutes without KVM); CORRAL_TEST_FULL=1 or CORRAL_REQUIRE_KVM=1 runs it")
	}
	for _, tool := range []string{"qemu-img", "qemu-system-x86_64", "genisoimage"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Lackf(t, testenv.KVM, "%s not found (apt-get install qemu-system-x86 qemu-utils genisoimage)", tool)
		}
	}
	if _, ok := vmrun.CachedImage(); !ok {
		testenv.Lack(t, testenv.KVM, "the VM image is not built (go test ./internal/sim/vmrun -run TestEnsureImage with CORRAL_TEST_FULL=1)")
	}
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), RealVMs: true})
	root := k.root()
	p := url.Values{"vmid": {"901"}, "name": {"freezer"}, "memory": {"768"}, "cores": {"1"}, "agent": {"1"},
		"scsi0": {"local-lvm:0,import-from=local:import/" + ImportImageName}, "ide2": {"local-lvm:cloudinit"},
		"net0": {"virtio,bridge=vmbr0"}, "ipconfig0": {"ip=dhcp"}, "ciuser": {"corral"}}
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p)
	began := time.Now()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/901/status/start", nil)
	defer k.task(root, http.MethodPost, "/nodes/pve/qemu/901/status/stop", nil)
	testenv.WaitFor(t, "the guest agent to answer ping", func() bool {
		return k.do(root, http.MethodPost, "/nodes/pve/qemu/901/agent/ping", nil).status == http.StatusOK
	})
	t.Logf("agent answered %s after start", time.Since(began).Round(time.Second))
	began = time.Now()
	task := k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"901"}, "mode": {"snapshot"}, "storage": {"local"}, "compress": {"zstd"}})
	t.Logf("backup in %s:\n%s", time.Since(began).Round(time.Second), strings.Join(task.log, "\n"))
	if !inOrder(task.log, "INFO: issuing guest-agent 'fs-freeze' command", "INFO: starting backup via QMP command", "INFO: issuing guest-agent 'fs-thaw' command") {
		t.Fatal("no freeze and thaw in the log")
	}
	for _, l := range task.log {
		if strings.HasPrefix(l, "ERROR:") {
			t.Fatalf("the agent failed: %s", l)
		}
	}
	r := k.do(root, http.MethodPost, "/nodes/pve/qemu/901/agent/fsfreeze-status", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.data), `"thawed"`) {
		t.Fatalf("fsfreeze-status after the backup: %d %s %q", r.status, r.data, r.msg)
	}
}
