package sim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// newClusterE2E is a three-node emulator over HTTPS with instant tasks and
// the given shared storages.
func newClusterE2E(t *testing.T, version string, shared ...string) *e2e {
	t.Helper()
	return openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Nodes: 3, Version: version, SharedStorage: shared})
}

// waitOn polls a task of node until it stops and reads its log.
func (k *e2e) waitOn(node, upid string) e2eTask {
	k.t.Helper()
	var st e2eTask
	testenv.WaitFor(k.t, "task "+upid+" to stop", func() bool {
		st = e2eTask{}
		k.ok(k.root(), http.MethodGet, "/nodes/"+node+"/tasks/"+url.PathEscape(upid)+"/status", nil, &st)
		return st.Status == "stopped"
	})
	var lines []struct {
		T string `json:"t"`
	}
	k.ok(k.root(), http.MethodGet, "/nodes/"+node+"/tasks/"+url.PathEscape(upid)+"/log", url.Values{"limit": {"1000"}}, &lines)
	for _, l := range lines {
		st.log = append(st.log, l.T)
	}
	return st
}

// runOn sends a request that answers a UPID of node and waits for the task.
func (k *e2e) runOn(node string, who e2eCaller, method, path string, params url.Values) e2eTask {
	k.t.Helper()
	var upid string
	k.ok(who, method, path, params, &upid)
	if !strings.HasPrefix(upid, "UPID:"+node+":") {
		k.t.Fatalf("%s %s returned %q, not a UPID of %s", method, path, upid, node)
	}
	return k.waitOn(node, upid)
}

// admin posts a JSON body to a /_corral/ endpoint.
func (k *e2e) admin(who e2eCaller, path, body string) e2eResp {
	k.t.Helper()
	req := k.request(who, http.MethodPost, "/x", nil)
	req.URL.Path = path
	req.Body = nopBody(body)
	req.Header.Set("Content-Type", "application/json")
	return k.send(req)
}

// resourceNode is /cluster/resources' node and status of id.
func (k *e2e) resource(id string) (node, status string) {
	k.t.Helper()
	var rs []struct {
		ID, Node, Status string
	}
	k.ok(k.root(), http.MethodGet, "/cluster/resources", nil, &rs)
	for _, r := range rs {
		if r.ID == id {
			return r.Node, r.Status
		}
	}
	return "", ""
}

// TestMigrate_overHTTPS moves a CT with a marker file from pve1 to pve2
// through the API: the UPID is the source's, the config and the data
// are on pve2 afterwards and /cluster/resources follows.
func TestMigrate_overHTTPS(t *testing.T) {
	t.Parallel()
	k := newClusterE2E(t, "9.1")
	root := k.root()
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc", url.Values{"vmid": {"101"}, "ostemplate": {model.DefaultTemplate},
		"rootfs": {"local-lvm:1"}, "unprivileged": {"1"}, "hostname": {"mover"}})
	dir, err := k.srv.cluster.VolumePath("pve1", "local-lvm:vm-101-disk-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("moved"), 0o644); err != nil {
		t.Fatal(err)
	}

	r := k.do(root, http.MethodPost, "/nodes/pve1/lxc/101/migrate", url.Values{"target": {"pve1"}})
	if r.status != 400 || r.errs["target"] != "target is local node." {
		t.Errorf("target = source: %d %q %v", r.status, r.msg, r.errs)
	}
	// The operator role has VM.Migrate (corral move); without it, 403.
	noMigrate := slices.DeleteFunc(slices.Clone(model.OperatorPrivileges), func(p string) bool { return p == "VM.Migrate" })
	k.ok(k.root(), http.MethodPut, "/access/roles/"+model.OperatorRole, url.Values{"privs": {strings.Join(noMigrate, ",")}}, nil)
	r = k.do(k.op(), http.MethodPost, "/nodes/pve1/lxc/101/migrate", url.Values{"target": {"pve2"}})
	if r.status != 403 || r.msg != "Permission check failed (/vms/101, VM.Migrate)\n" {
		t.Errorf("operator without VM.Migrate: %d %q", r.status, r.msg)
	}
	k.ok(k.root(), http.MethodPut, "/access/roles/"+model.OperatorRole, url.Values{"privs": {strings.Join(model.OperatorPrivileges, ",")}}, nil)

	task := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc/101/migrate", url.Values{"target": {"pve2"}})
	if task.ExitStatus != "OK" || task.Type != "vzmigrate" || task.ID != "101" {
		t.Fatalf("migrate task %s %s/%s:\n%s", task.ExitStatus, task.Type, task.ID, strings.Join(task.log, "\n"))
	}
	if !slices.ContainsFunc(task.log, func(l string) bool {
		return strings.HasSuffix(l, " starting migration of CT 101 to node 'pve2' (127.0.0.2)")
	}) {
		t.Errorf("log:\n%s", strings.Join(task.log, "\n"))
	}
	var conf map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve2/lxc/101/config", nil, &conf)
	if conf["hostname"] != "mover" || conf["lock"] != nil {
		t.Errorf("config on pve2: %v", conf)
	}
	r = k.do(root, http.MethodGet, "/nodes/pve1/lxc/101/config", nil)
	if r.status != 500 || r.msg != "Configuration file 'nodes/pve1/lxc/101.conf' does not exist\n" {
		t.Errorf("config on pve1: %d %q", r.status, r.msg)
	}
	if node, _ := k.resource("lxc/101"); node != "pve2" {
		t.Errorf("/cluster/resources: CT 101 on %q", node)
	}
	dir2, err := k.srv.cluster.VolumePath("pve2", "local-lvm:vm-101-disk-0")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir2, "marker")); string(b) != "moved" {
		t.Errorf("marker on pve2: %q %v", b, err)
	}
	if _, err := k.srv.cluster.VolumePath("pve1", "local-lvm:vm-101-disk-0"); err == nil {
		t.Error("source volume still on pve1")
	}
}

// TestMigrate_precondition: GET …/migrate exists on 9.1 only; 8.4
// answers 501 as for any method it lacks, while POST is there on both.
func TestMigrate_precondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version string
		status  int
	}{{"9.1", 200}, {"8.4", 501}} {
		t.Run(tc.version, func(t *testing.T) {
			k := newClusterE2E(t, tc.version)
			root := k.root()
			k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc", url.Values{"vmid": {"101"}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:1"}})
			r := k.do(root, http.MethodGet, "/nodes/pve2/lxc/101/migrate", nil)
			if r.status != tc.status {
				t.Fatalf("GET migrate: %d %q", r.status, r.msg)
			}
			if tc.status == 501 {
				if r.msg != "Method 'GET /nodes/pve2/lxc/101/migrate' not implemented" {
					t.Errorf("msg %q", r.msg)
				}
			} else if string(r.data) != `{"allowed-nodes":["pve1","pve3"],"not-allowed-nodes":{},"running":0}` {
				t.Errorf("data %s", r.data)
			}
			r = k.do(root, http.MethodPost, "/nodes/pve2/lxc/101/migrate", url.Values{"target": {"pve9"}})
			if r.status != 500 || r.msg != "no such cluster node 'pve9'\n" {
				t.Errorf("POST migrate to pve9: %d %q", r.status, r.msg)
			}
		})
	}
}

// TestMigrate_sharedStorage: a volume allocated through pve1 on the NFS
// storage is listed by every node; a CT that uses it migrates without
// copying it.
func TestMigrate_sharedStorage(t *testing.T) {
	t.Parallel()
	k := newClusterE2E(t, "9.1", model.SharedNFS, model.SharedRBD)
	root := k.root()
	var storages []struct {
		Storage string `json:"storage"`
		Type    string `json:"type"`
		Shared  int    `json:"shared"`
	}
	k.ok(root, http.MethodGet, "/nodes/pve3/storage", nil, &storages)
	got := map[string]string{}
	for _, s := range storages {
		got[s.Storage] = s.Type + "/" + itoa(s.Shared)
	}
	if got["nfs"] != "nfs/1" || got["rbd"] != "rbd/1" || got["local-lvm"] != "lvmthin/0" {
		t.Errorf("storages on pve3: %v", got)
	}
	var volid string
	k.ok(root, http.MethodPost, "/nodes/pve1/storage/nfs/content", url.Values{"vmid": {"900"}, "filename": {"vm-900-disk-0.raw"}, "size": {"1G"}}, &volid)
	if volid != "nfs:900/vm-900-disk-0.raw" {
		t.Fatalf("alloc on nfs: %q", volid)
	}
	for _, node := range []string{"pve1", "pve2", "pve3"} {
		var content []struct {
			Volid string `json:"volid"`
		}
		k.ok(root, http.MethodGet, "/nodes/"+node+"/storage/nfs/content", nil, &content)
		if len(content) != 1 || content[0].Volid != volid {
			t.Errorf("nfs content on %s: %v", node, content)
		}
	}
	k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc", url.Values{"vmid": {"101"}, "ostemplate": {model.DefaultTemplate},
		"rootfs": {"rbd:1"}, "mp0": {volid + ",mp=/pet"}})
	task := k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc/101/migrate", url.Values{"target": {"pve3"}})
	if task.ExitStatus != "OK" {
		t.Fatalf("migrate: %s\n%s", task.ExitStatus, strings.Join(task.log, "\n"))
	}
	for _, want := range []string{" volume 'rbd:vm-101-disk-0' is on shared storage 'rbd'", " volume '" + volid + "' is on shared storage 'nfs'"} {
		if !slices.ContainsFunc(task.log, func(l string) bool { return strings.HasSuffix(l, want) }) {
			t.Errorf("log lacks %q:\n%s", want, strings.Join(task.log, "\n"))
		}
	}
	if slices.ContainsFunc(task.log, func(l string) bool { return strings.Contains(l, "found local volume") }) {
		t.Errorf("shared volumes were treated as local:\n%s", strings.Join(task.log, "\n"))
	}
	var rs []struct {
		ID     string `json:"id"`
		Shared int    `json:"shared"`
	}
	k.ok(root, http.MethodGet, "/cluster/resources", url.Values{"type": {"storage"}}, &rs)
	var ids []string
	for _, r := range rs {
		if strings.HasSuffix(r.ID, "/nfs") {
			ids = append(ids, r.ID)
		}
	}
	if !slices.Equal(ids, []string{"storage/pve1/nfs", "storage/pve2/nfs", "storage/pve3/nfs"}) {
		t.Errorf("nfs entries %v", ids)
	}
}

// TestAdmin_nodeOffline takes pve2 off through /_corral/node: its API
// answers 595, /cluster/resources shows it offline with its CT, and it
// comes back.
func TestAdmin_nodeOffline(t *testing.T) {
	t.Parallel()
	k := newClusterE2E(t, "9.1")
	root := k.root()
	k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc", url.Values{"vmid": {"101"}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:1"}})

	for _, tc := range []struct {
		name   string
		who    e2eCaller
		body   string
		status int
		msg    string
	}{
		{"operator refused", k.op(), `{"node":"pve2","online":false}`, 403, "Permission check failed (the /_corral/ admin API is for root@pam only)\n"},
		{"no online field", root, `{"node":"pve2"}`, 500, "bad node request: want {\"node\":\"pve2\",\"online\":false}\n"},
		{"unknown node", root, `{"node":"pve9","online":false}`, 400, "Parameter verification failed.\n"},
	} {
		if r := k.admin(tc.who, "/_corral/node", tc.body); r.status != tc.status || r.msg != tc.msg {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.msg, tc.status, tc.msg)
		}
	}

	if r := k.admin(root, "/_corral/node", `{"node":"pve2","online":false}`); r.status != 200 {
		t.Fatalf("offline: %d %q", r.status, r.msg)
	}
	r := k.do(root, http.MethodGet, "/nodes/pve2/lxc", nil)
	if r.status != 595 {
		t.Errorf("GET /nodes/pve2/lxc on a dead node: %d %q", r.status, r.msg)
	}
	if _, st := k.resource("node/pve2"); st != "offline" {
		t.Errorf("node/pve2 status %q", st)
	}
	// Time scale 0: the RRD entries expire at once.
	if node, st := k.resource("lxc/101"); node != "pve2" || st != "unknown" {
		t.Errorf("lxc/101 on %q status %q, want pve2 unknown", node, st)
	}
	// A migration to the dead node fails in the task, not the request.
	k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc", url.Values{"vmid": {"102"}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:1"}})
	task := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc/102/migrate", url.Values{"target": {"pve2"}})
	if task.ExitStatus != "migration aborted" || !slices.ContainsFunc(task.log, func(l string) bool {
		return strings.Contains(l, " ERROR: migration aborted (duration ") && strings.HasSuffix(l, "): Can't connect to destination address using public key")
	}) {
		t.Errorf("migrate to a dead node: %s\n%s", task.ExitStatus, strings.Join(task.log, "\n"))
	}

	if r := k.admin(root, "/_corral/node", `{"node":"pve2","online":true}`); r.status != 200 {
		t.Fatalf("online: %d %q", r.status, r.msg)
	}
	var list []json.RawMessage
	k.ok(root, http.MethodGet, "/nodes/pve2/lxc", nil, &list)
	if len(list) != 1 {
		t.Errorf("CTs on pve2 after it came back: %d", len(list))
	}
	if _, st := k.resource("lxc/101"); st != "stopped" {
		t.Errorf("lxc/101 status %q after the node came back", st)
	}
}

// TestAdmin_nodePowerOff: a node that loses power (poweroff) stops its
// guests; while it is down requests for it answer 595, its CTs stay
// configured under it (their VMIDs stay taken cluster-wide); when it comes
// back it boots and starts its CTs with onboot=1, as pve-guests' startall
// does, unless the operator kept them from starting (nostartall).
func TestAdmin_nodePowerOff(t *testing.T) {
	t.Parallel()
	k := newClusterE2E(t, "9.1")
	root := k.root()
	for _, ct := range []struct{ vmid, onboot string }{{"101", "1"}, {"102", "0"}, {"103", "1"}} {
		k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc", url.Values{"vmid": {ct.vmid}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:1"}, "onboot": {ct.onboot}})
	}
	for _, vmid := range []string{"101", "102"} {
		k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc/"+vmid+"/status/start", nil)
	}
	statuses := func() string {
		var out []string
		for _, id := range []string{"101", "102", "103"} {
			_, st := k.resource("lxc/" + id)
			out = append(out, id+"="+st)
		}
		return strings.Join(out, " ")
	}
	for round, tc := range []struct {
		name, back string
		want       string
	}{
		{"pve-guests starts onboot CTs", `{"node":"pve2","online":true}`, "101=running 102=stopped 103=running"},
		{"startall kept from running", `{"node":"pve2","online":true,"nostartall":true}`, "101=stopped 102=stopped 103=stopped"},
	} {
		if r := k.admin(root, "/_corral/node", `{"node":"pve2","online":false,"poweroff":true}`); r.status != 200 {
			t.Fatalf("%s: power off: %d %q", tc.name, r.status, r.msg)
		}
		if r := k.do(root, http.MethodGet, "/nodes/pve2/lxc/101/config", nil); r.status != 595 {
			t.Errorf("%s: GET config of a CT on the dead node: %d %q", tc.name, r.status, r.msg)
		}
		if r := k.do(root, http.MethodPost, "/nodes/pve1/lxc", url.Values{"vmid": {"101"}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:1"}}); r.status != 500 || r.msg != "CT 101 already exists on node 'pve2'\n" {
			t.Errorf("%s: create of a VMID the dead node holds: %d %q", tc.name, r.status, r.msg)
		}
		if node, _ := k.resource("lxc/101"); node != "pve2" {
			t.Errorf("%s: lxc/101 listed on %q while pve2 is down", tc.name, node)
		}
		var back struct {
			Started []string `json:"started"`
		}
		r := k.admin(root, "/_corral/node", tc.back)
		if r.status != 200 {
			t.Fatalf("%s: back: %d %q", tc.name, r.status, r.msg)
		}
		if err := json.Unmarshal(r.data, &back); err != nil {
			t.Fatalf("%s: %v: %s", tc.name, err, r.data)
		}
		for _, upid := range back.Started {
			if st := k.waitOn("pve2", upid); st.ExitStatus != "OK" {
				t.Errorf("%s: boot start %s: %s", tc.name, upid, st.ExitStatus)
			}
		}
		if got := statuses(); got != tc.want {
			t.Errorf("round %d, %s: %s, want %s", round, tc.name, got, tc.want)
		}
	}
	// A network split (no poweroff) leaves the guests as they were.
	k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc/102/status/start", nil)
	k.admin(root, "/_corral/node", `{"node":"pve2","online":false}`)
	k.admin(root, "/_corral/node", `{"node":"pve2","online":true}`)
	if got := statuses(); got != "101=stopped 102=running 103=stopped" {
		t.Errorf("after a split: %s", got)
	}
}
