package sim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// haVM creates VM vmid on pve1 with its disk on storage, stopped.
func (k *e2e) haVM(vmid, storage string) {
	k.t.Helper()
	p := vmParams(vmid)
	p.Set("scsi0", storage+":1")
	p.Set("ide2", storage+":cloudinit")
	k.runOn("pve1", k.root(), http.MethodPost, "/nodes/pve1/qemu", p)
}

// Issue 34: a VM is an HA resource vm:<vmid> as a CT is ct:<vmid>: the
// CRM starts it (a qmstart by root@pam), its start, stop and shutdown
// requests are hastart/hastop tasks that only ask, a migrate request is
// a hamigrate that HA carries out as a relocation (the emulator has no
// live migration), status/current and /cluster/resources say it is
// managed, and destroy needs purge, which drops the resource.
func TestHA_vm(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Nodes: 2, Version: "9.1",
		NodeMemory: 32 << 30, SharedStorage: []string{model.SharedNFS}})
	root := k.root()
	k.haVM("200", "nfs")
	for _, tc := range []struct{ sid, msg string }{
		{"vm:999", "resource 'vm:999' does not exist in cluster\n"},
		{"ct:200", "resource 'ct:200' does not exist in cluster\n"},
	} {
		if r := k.do(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {tc.sid}}); r.status != 500 || r.msg != tc.msg {
			t.Errorf("create %s: %d %q, want 500 %q", tc.sid, r.status, r.msg, tc.msg)
		}
	}
	k.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"200"}}, nil)
	var list []map[string]any
	k.ok(root, http.MethodGet, "/cluster/ha/resources", url.Values{"type": {"vm"}}, &list)
	if len(list) != 1 || list[0]["sid"] != "vm:200" || list[0]["type"] != "vm" {
		t.Errorf("vm resources = %v, want vm:200 of type vm", list)
	}
	k.ok(root, http.MethodGet, "/cluster/ha/resources", url.Values{"type": {"ct"}}, &list)
	if len(list) != 0 {
		t.Errorf("ct resources = %v, want none", list)
	}
	k.waitResource("qemu/200", haResource{Node: "pve1", Status: "running", HAState: "started"})
	var status map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve1/qemu/200/status/current", nil, &status)
	if ha, _ := status["ha"].(map[string]any); ha["managed"] != float64(1) || ha["state"] != "started" {
		t.Errorf("status/current ha = %v, want managed 1, started", status["ha"])
	}

	st := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/200/status/shutdown", nil)
	if st.Type != "hastop" || !st.has("Requesting HA stop for VM 200") || st.ExitStatus != "OK" {
		t.Errorf("shutdown of an HA VM: %s %q %v, want an OK hastop task", st.Type, st.ExitStatus, st.log)
	}
	k.waitResource("qemu/200", haResource{Node: "pve1", Status: "stopped", HAState: "stopped"})
	st = k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/200/status/start", nil)
	if st.Type != "hastart" || !st.has("Requesting HA start for VM 200") {
		t.Errorf("start of an HA VM: %s %v, want a hastart task", st.Type, st.log)
	}
	k.waitResource("qemu/200", haResource{Node: "pve1", Status: "running", HAState: "started"})

	st = k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/qemu/200/migrate", url.Values{"target": {"pve2"}, "online": {"1"}})
	if st.Type != "hamigrate" || !st.has("Requesting HA migration for VM 200 to node pve2") {
		t.Errorf("migrate of an HA VM: %s %v, want a hamigrate task", st.Type, st.log)
	}
	k.waitResource("qemu/200", haResource{Node: "pve2", Status: "running", HAState: "started"})
	if log := strings.Join(k.srv.Cluster().HALog(), "\n"); !strings.Contains(log, "service 'vm:200': state changed from 'started' to 'relocate'  (node = pve1, target = pve2)") {
		t.Errorf("HA log lacks the relocation:\n%s", log)
	}

	r := k.do(root, http.MethodDelete, "/nodes/pve2/qemu/200", nil)
	if want := "unable to remove VM 200 - used in HA resources and purge parameter not set.\n"; r.status != 500 || r.msg != want {
		t.Errorf("destroy without purge: %d %q, want 500 %q", r.status, r.msg, want)
	}
	k.ok(root, http.MethodPut, "/cluster/ha/resources/vm:200", url.Values{"state": {"stopped"}}, nil)
	k.waitResource("qemu/200", haResource{Node: "pve2", Status: "stopped", HAState: "stopped"})
	st = k.runOn("pve2", root, http.MethodDelete, "/nodes/pve2/qemu/200", url.Values{"purge": {"1"}})
	if !st.has("NOTE: removed VM 200 from HA resource configuration.") {
		t.Errorf("destroy with purge: %v", st.log)
	}
	k.ok(root, http.MethodGet, "/cluster/ha/resources", nil, &list)
	if len(list) != 0 {
		t.Errorf("after destroy with purge: resources %v", list)
	}
}

// Issue 34: a node failure recovers an HA VM as it does a CT: fenced,
// its config moved to the other node and started there.
func TestHA_vmRecovery(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Nodes: 2, Version: "9.1",
		NodeMemory: 32 << 30, SharedStorage: []string{model.SharedNFS}})
	root := k.root()
	k.haVM("200", "nfs")
	k.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"vm:200"}}, nil)
	k.waitResource("qemu/200", haResource{Node: "pve1", Status: "running", HAState: "started"})
	if r := k.admin(root, "/_corral/node", `{"node":"pve1","online":false,"poweroff":true}`); r.status != 200 {
		t.Fatalf("power off pve1: %d %q", r.status, r.msg)
	}
	k.waitResource("qemu/200", haResource{Node: "pve2", Status: "running", HAState: "started"})
	if log := strings.Join(k.srv.Cluster().HALog(), "\n"); !strings.Contains(log, "recover service 'vm:200' from fenced node 'pve1' to node 'pve2'") {
		t.Errorf("HA log lacks the recovery:\n%s", log)
	}
}
