package sim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// realFreeze backs the running VM vmid (agent: 1) up in snapshot mode:
// the guest's own qemu-guest-agent freezes and thaws its filesystems
// around the copy (no ERROR line from either), and reports them thawed
// after. TestQemu_realBoot calls it on its VM.
func realFreeze(t *testing.T, k *e2e, root e2eCaller, vmid string) {
	t.Helper()
	began := time.Now()
	task := k.mustOK(root, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {vmid}, "mode": {"snapshot"}, "storage": {"local"}, "compress": {"zstd"}})
	t.Logf("backup in %s:\n%s", time.Since(began).Round(time.Second), strings.Join(task.log, "\n"))
	if !inOrder(task.log, "INFO: issuing guest-agent 'fs-freeze' command", "INFO: starting backup via QMP command", "INFO: issuing guest-agent 'fs-thaw' command") {
		t.Fatal("no freeze and thaw in the log")
	}
	for _, l := range task.log {
		if strings.HasPrefix(l, "ERROR:") {
			t.Fatalf("the agent failed: %s", l)
		}
	}
	r := k.do(root, http.MethodPost, "/nodes/pve/qemu/"+vmid+"/agent/fsfreeze-status", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.data), `"thawed"`) {
		t.Fatalf("fsfreeze-status after the backup: %d %s %q", r.status, r.data, r.msg)
	}
}
