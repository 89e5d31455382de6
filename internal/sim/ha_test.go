package sim

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// newHAE2E is a two-node emulator with NFS shared storage and instant
// tasks and HA delays.
func newHAE2E(t *testing.T, version string) *e2e {
	t.Helper()
	return openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Nodes: 2, Version: version, SharedStorage: []string{model.SharedNFS}})
}

// haResource is /cluster/resources' view of a CT.
type haResource struct {
	ID, Node, Status, HAState string
}

func (k *e2e) haResource(id string) haResource {
	k.t.Helper()
	var rs []struct {
		ID      string `json:"id"`
		Node    string `json:"node"`
		Status  string `json:"status"`
		HAState string `json:"hastate"`
	}
	k.ok(k.root(), http.MethodGet, "/cluster/resources", url.Values{"type": {"vm"}}, &rs)
	for _, r := range rs {
		if r.ID == id {
			return haResource{r.ID, r.Node, r.Status, r.HAState}
		}
	}
	return haResource{}
}

// waitResource waits until /cluster/resources shows id as want.
func (k *e2e) waitResource(id string, want haResource) {
	k.t.Helper()
	want.ID = id
	var got haResource
	testenv.WaitFor(k.t, id+" to be "+want.Node+"/"+want.Status+"/"+want.HAState, func() bool {
		got = k.haResource(id)
		return got == want
	})
}

// haCT creates CT vmid on pve1 with its rootfs on storage.
func (k *e2e) haCT(vmid, storage string) {
	k.t.Helper()
	k.runOn("pve1", k.root(), http.MethodPost, "/nodes/pve1/lxc", url.Values{"vmid": {vmid}, "ostemplate": {model.DefaultTemplate}, "rootfs": {storage + ":1"}, "hostname": {"ct" + vmid}})
}

// TestHA_resourcesAPI: a CT made an HA resource is started by the CRM,
// shows its hastate, and the resource reads back as PVE writes it; the
// writes need Sys.Console, 9.x refuses groups, destroy needs purge.
func TestHA_resourcesAPI(t *testing.T) {
	t.Parallel()
	k := newHAE2E(t, "9.1")
	root := k.root()
	k.haCT("101", "nfs")

	_, audit := k.newUserToken("audit@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/"}, "users": {"audit@pve"}, "roles": {"PVEAuditor"}}, nil)
	if r := k.do(audit, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"ct:101"}}); r.status != 403 {
		t.Errorf("create as auditor: %d %q, want 403", r.status, r.msg)
	}
	k.ok(audit, http.MethodGet, "/cluster/ha/resources", nil, nil)

	for _, tc := range []struct {
		params url.Values
		msg    string
	}{
		{url.Values{"sid": {"ct:101"}, "group": {"g1"}}, "invalid parameter 'group': ha groups have been migrated to rules\n"},
		{url.Values{"sid": {"ct:999"}}, "resource 'ct:999' does not exist in cluster\n"},
	} {
		if r := k.do(root, http.MethodPost, "/cluster/ha/resources", tc.params); r.status != 500 || r.msg != tc.msg {
			t.Errorf("create %v: %d %q, want 500 %q", tc.params, r.status, r.msg, tc.msg)
		}
	}
	k.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"101"}, "max_restart": {"2"}}, nil)
	var list []map[string]any
	k.ok(root, http.MethodGet, "/cluster/ha/resources", nil, &list)
	if len(list) != 1 || list[0]["sid"] != "ct:101" || list[0]["type"] != "ct" || list[0]["max_restart"] != float64(2) || list[0]["state"] != nil {
		t.Errorf("resources = %v, want ct:101 with max_restart 2 and no state (PVE writes no default)", list)
	}
	if r := k.do(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"ct:101"}}); r.msg != "create resource failed: resource ID 'ct:101' already defined\n" {
		t.Errorf("second create: %q", r.msg)
	}

	// The CRM starts it: state started is the default.
	k.waitResource("lxc/101", haResource{Node: "pve1", Status: "running", HAState: "started"})

	// A stop request is a hastop task that only asks; the CRM stops it.
	st := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc/101/status/shutdown", nil)
	if st.Type != "hastop" || !st.has("Requesting HA stop for CT 101") || st.ExitStatus != "OK" {
		t.Errorf("shutdown of an HA CT: %s %q %v, want an OK hastop task", st.Type, st.ExitStatus, st.log)
	}
	k.waitResource("lxc/101", haResource{Node: "pve1", Status: "stopped", HAState: "stopped"})
	var res map[string]any
	k.ok(root, http.MethodGet, "/cluster/ha/resources/ct:101", nil, &res)
	if res["state"] != "stopped" {
		t.Errorf("after hastop the resource's state is %v, want stopped", res["state"])
	}

	r := k.do(root, http.MethodDelete, "/nodes/pve1/lxc/101", nil)
	if want := "unable to remove CT 101 - used in HA resources and purge parameter not set.\n"; r.status != 500 || r.msg != want {
		t.Errorf("destroy without purge: %d %q, want 500 %q", r.status, r.msg, want)
	}
	st = k.runOn("pve1", root, http.MethodDelete, "/nodes/pve1/lxc/101", url.Values{"purge": {"1"}})
	if !st.has("NOTE: removed CT 101 from HA resource configuration.") {
		t.Errorf("destroy with purge: %v", st.log)
	}
	k.ok(root, http.MethodGet, "/cluster/ha/resources", nil, &list)
	if len(list) != 0 {
		t.Errorf("after destroy with purge: resources %v", list)
	}
}

// TestHA_recovery is a node failure: the CRM fences the dead node,
// recovers the CT on shared storage to the other node and starts it
// there (its config moves), while the CT on local storage is moved too
// but cannot start without its volume and ends in error.
func TestHA_recovery(t *testing.T) {
	t.Parallel()
	k := newHAE2E(t, "9.1")
	root := k.root()
	k.haCT("101", "nfs")
	k.haCT("102", "local-lvm")
	for _, sid := range []string{"ct:101", "ct:102"} {
		k.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {sid}}, nil)
	}
	k.waitResource("lxc/101", haResource{Node: "pve1", Status: "running", HAState: "started"})
	k.waitResource("lxc/102", haResource{Node: "pve1", Status: "running", HAState: "started"})

	if r := k.admin(root, "/_corral/node", `{"node":"pve1","online":false,"poweroff":true}`); r.status != 200 {
		t.Fatalf("power off pve1: %d %q", r.status, r.msg)
	}
	k.waitResource("lxc/101", haResource{Node: "pve2", Status: "running", HAState: "started"})
	k.waitResource("lxc/102", haResource{Node: "pve2", Status: "stopped", HAState: "error"})

	var nodes []struct{ Node, HAState string }
	k.ok(root, http.MethodGet, "/cluster/resources", url.Values{"type": {"node"}}, &nodes)
	if want := []struct{ Node, HAState string }{{"pve1", "unknown"}, {"pve2", "online"}}; !slices.Equal(nodes, want) {
		t.Errorf("nodes' hastate = %+v, want %+v", nodes, want)
	}
	log := strings.Join(k.srv.Cluster().HALog(), "\n")
	for _, want := range []string{
		"fencing: acknowledged - got agent lock for node 'pve1'",
		"service 'ct:101': state changed from 'started' to 'fence'",
		"service 'ct:101': state changed from 'fence' to 'recovery'",
		"recover service 'ct:101' from fenced node 'pve1' to node 'pve2'",
		"recovery policy for service ct:102 failed, entering error state. Failed nodes: pve2, pve2",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("HA log lacks %q:\n%s", want, log)
		}
	}
	// The task list's status is the exit status of a finished task.
	type listed struct{ Type, Status string }
	var tasks []listed
	k.ok(root, http.MethodGet, "/nodes/pve2/tasks", url.Values{"vmid": {"102"}, "limit": {"50"}}, &tasks)
	if !slices.Contains(tasks, listed{"vzstart", "no such logical volume pve/vm-102-disk-0"}) {
		t.Errorf("no failed vzstart of 102 on pve2 in %+v", tasks)
	}
	var status []map[string]any
	k.ok(root, http.MethodGet, "/cluster/ha/status/current", nil, &status)
	var got []string
	for _, e := range status {
		if e["type"] == "service" {
			got = append(got, e["status"].(string))
		}
	}
	if want := []string{"ct:101 (pve2, started)", "ct:102 (pve2, error)"}; !slices.Equal(got, want) {
		t.Errorf("status/current services = %q, want %q", got, want)
	}
	// A CT in error refuses requests until it is disabled.
	st := k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc/102/status/start", nil)
	if st.ExitStatus != "command 'ha-manager set ct:102 --state started' failed: exit code 255" || !st.has("service 'ct:102' in error state, must be disabled and fixed first") {
		t.Errorf("start of a CT in error: %q %v", st.ExitStatus, st.log)
	}
}

// TestHA_migrate: a migrate request of an HA CT is a hamigrate task
// that only asks; HA relocates it (shutdown, offline migrate, start).
func TestHA_migrate(t *testing.T) {
	t.Parallel()
	k := newHAE2E(t, "9.1")
	root := k.root()
	k.haCT("101", "nfs")
	k.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"ct:101"}}, nil)
	k.waitResource("lxc/101", haResource{Node: "pve1", Status: "running", HAState: "started"})
	if r := k.do(root, http.MethodPost, "/nodes/pve1/lxc/101/migrate", url.Values{"target": {"pve2"}}); r.msg != "can't migrate running container without --online or --restart\n" {
		t.Errorf("migrate without restart: %q", r.msg)
	}
	st := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc/101/migrate", url.Values{"target": {"pve2"}, "restart": {"1"}})
	if st.Type != "hamigrate" || !st.has("Requesting HA migration for CT 101 to node pve2") {
		t.Errorf("migrate of an HA CT: %s %v", st.Type, st.log)
	}
	k.waitResource("lxc/101", haResource{Node: "pve2", Status: "running", HAState: "started"})
}

// TestHA_persisted: resources, rules and the manager status survive a
// restart of the emulator, and the CRM picks up where it was.
func TestHA_persisted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Dir: dir, TimeScale: zeroScale(), NodeMemory: 32 << 30, Nodes: 2, SharedStorage: []string{model.SharedNFS}}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ka := &e2e{t: t, srv: a, dir: dir, hc: a.HTTPClient()}
	root := ka.root()
	ka.haCT("101", "nfs")
	ka.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"ct:101"}, "max_relocate": {"3"}}, nil)
	// The rule keeps the CT where it is: a strict rule naming another
	// node makes the CRM relocate it (select_service_node), which would
	// race the checks below.
	ka.ok(root, http.MethodPost, "/cluster/ha/rules", url.Values{"rule": {"on-pve1"}, "type": {"node-affinity"}, "resources": {"ct:101"}, "nodes": {"pve1"}, "strict": {"1"}}, nil)
	ka.waitResource("lxc/101", haResource{Node: "pve1", Status: "running", HAState: "started"})
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	k := openE2E(t, opts)
	root = k.root()
	var res map[string]any
	k.ok(root, http.MethodGet, "/cluster/ha/resources/ct:101", nil, &res)
	if res["max_relocate"] != float64(3) {
		t.Errorf("resource after a restart: %v", res)
	}
	var rule map[string]any
	k.ok(root, http.MethodGet, "/cluster/ha/rules/on-pve1", nil, &rule)
	if rule["nodes"] != "pve1" || rule["resources"] != "ct:101" || rule["strict"] != float64(1) {
		t.Errorf("rule after a restart: %v", rule)
	}
	if got := k.haResource("lxc/101").HAState; got != "started" {
		t.Errorf("hastate after a restart: %q", got)
	}
}

// TestHA_createManaged: ha-managed=1 at create adds the HA resource at
// the end of the task (started with start=1), and status/current's ha
// says so; a resource in state ignored still needs purge to destroy.
func TestHA_createManaged(t *testing.T) {
	t.Parallel()
	k := newHAE2E(t, "9.1")
	root := k.root()
	st := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc", url.Values{"vmid": {"101"}, "ostemplate": {model.DefaultTemplate},
		"rootfs": {"nfs:1"}, "start": {"1"}, "ha-managed": {"1"}})
	if st.ExitStatus != "WARNINGS: 1" || !st.has("Add as HA resource") { // the one warning: systemd without nesting
		t.Fatalf("create with ha-managed: %q %v", st.ExitStatus, st.log)
	}
	var res map[string]any
	k.ok(root, http.MethodGet, "/cluster/ha/resources/ct:101", nil, &res)
	if res["state"] != "started" {
		t.Errorf("resource after create: %v", res)
	}
	testenv.WaitFor(t, "status/current to report the CT HA-managed and started", func() bool {
		var cur struct {
			HA map[string]any `json:"ha"`
		}
		k.ok(root, http.MethodGet, "/nodes/pve1/lxc/101/status/current", nil, &cur)
		return cur.HA["managed"] == float64(1) && cur.HA["state"] == "started"
	})
	k.ok(root, http.MethodPut, "/cluster/ha/resources/ct:101", url.Values{"state": {"ignored"}}, nil)
	k.ok(root, http.MethodPost, "/nodes/pve1/lxc/101/status/stop", nil, nil)
	testenv.WaitFor(t, "an ignored resource's CT to stop on a plain stop", func() bool { return k.haResource("lxc/101").Status == "stopped" })
	if r := k.do(root, http.MethodDelete, "/nodes/pve1/lxc/101", nil); r.msg != "unable to remove CT 101 - used in HA resources and purge parameter not set.\n" {
		t.Errorf("destroy of an ignored HA resource without purge: %d %q", r.status, r.msg)
	}
}

// TestHA_ruleMovesService: a strict node-affinity rule added for a
// running service on another node makes HA relocate it there.
func TestHA_ruleMovesService(t *testing.T) {
	t.Parallel()
	k := newHAE2E(t, "9.1")
	root := k.root()
	k.haCT("101", "nfs")
	k.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"ct:101"}}, nil)
	k.waitResource("lxc/101", haResource{Node: "pve1", Status: "running", HAState: "started"})
	if r := k.do(root, http.MethodPost, "/cluster/ha/rules", url.Values{"rule": {"on-pve2"}, "type": {"node-affinity"}, "resources": {"ct:102"}, "nodes": {"pve2"}}); r.msg != "cannot use unmanaged resource(s) ct:102.\n" {
		t.Errorf("rule with an unmanaged resource: %q", r.msg)
	}
	k.ok(root, http.MethodPost, "/cluster/ha/rules", url.Values{"rule": {"on-pve2"}, "type": {"node-affinity"}, "resources": {"ct:101"}, "nodes": {"pve2"}, "strict": {"1"}}, nil)
	k.waitResource("lxc/101", haResource{Node: "pve2", Status: "running", HAState: "started"})
}

// TestHA_recoveryWaitsForPVEsDelays: at time scale 0.05 (PVE's 60 s
// fence delay is 3 s, the 120 s agent lock 6 s) the service is not
// fenced at once, and it is recovered no sooner than the agent lock
// allows (less the second the offline time is rounded to).
func TestHA_recoveryWaitsForPVEsDelays(t *testing.T) {
	t.Parallel()
	scale := 0.05
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: &scale, Nodes: 2, SharedStorage: []string{model.SharedNFS}})
	root := k.root()
	k.haCT("101", "nfs")
	k.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"ct:101"}}, nil)
	k.waitResource("lxc/101", haResource{Node: "pve1", Status: "running", HAState: "started"})
	off := time.Now()
	if r := k.admin(root, "/_corral/node", `{"node":"pve1","online":false,"poweroff":true}`); r.status != 200 {
		t.Fatalf("power off pve1: %d %q", r.status, r.msg)
	}
	if got := k.haResource("lxc/101").HAState; got != "started" {
		t.Errorf("hastate right after the power cut = %q, want started (the fence delay has not passed)", got)
	}
	k.waitResource("lxc/101", haResource{Node: "pve2", Status: "running", HAState: "started"})
	if took, least := time.Since(off), time.Duration(float64(120*time.Second)*scale)-time.Second; took < least {
		t.Errorf("recovered %v after the power cut, before PVE's agent lock lapsed (%v)", took, least)
	}
}

// TestHA_bootLeavesHAResourcesToHA: a powered-off node that boots starts
// its onboot CTs (pve-guests' startall) but not an HA resource's, which
// is HA's to start or not (here disabled, which HA neither fences nor
// starts).
func TestHA_bootLeavesHAResourcesToHA(t *testing.T) {
	t.Parallel()
	k := newHAE2E(t, "9.1")
	root := k.root()
	for _, id := range []string{"101", "102"} {
		k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc", url.Values{"vmid": {id}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"nfs:1"}, "onboot": {"1"}})
	}
	k.ok(root, http.MethodPost, "/cluster/ha/resources", url.Values{"sid": {"ct:102"}, "state": {"disabled"}}, nil)
	cl := k.srv.Cluster()
	if _, err := cl.SetNodePower("pve1", false, model.NodePower{PowerOff: true}); err != nil {
		t.Fatal(err)
	}
	upids, err := cl.SetNodePower("pve1", true, model.NodePower{})
	if err != nil || len(upids) != 1 || !strings.Contains(upids[0], ":vzstart:101:") {
		t.Fatalf("boot of pve1 started %v (%v), want only CT 101's vzstart", upids, err)
	}
}
