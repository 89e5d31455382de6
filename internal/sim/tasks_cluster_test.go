package sim

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// Issue 33 (go-proxmox's Cluster.Tasks answered 501): GET /cluster/tasks
// lists the nodes' broadcast tasks, finished ones with saved, endtime and
// status and without pid or pstart, a token's user split off its tokenid;
// Sys.Audit on / sees them all, a token without it none (Cluster.pm
// compares the task's user with the token's full id).
func TestClusterTasks(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.create(root, "101", nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/101/status/start", nil)
	_, alice := k.newUserToken("alice@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/101"}, "roles": {"PVEVMUser"}, "users": {"alice@pve"}}, nil)
	k.mustOK(alice, http.MethodPost, "/nodes/pve/lxc/101/status/stop", nil)

	var rows []map[string]any
	k.ok(root, http.MethodGet, "/cluster/tasks", nil, &rows)
	if len(rows) != 3 {
		t.Fatalf("root sees %d tasks, want vzcreate, vzstart and vzstop: %v", len(rows), rows)
	}
	stop := rows[0] // newest first
	if got, want := keysOf(stop), []string{"endtime", "id", "node", "saved", "starttime", "status", "tokenid", "type", "upid", "user"}; !slices.Equal(got, want) {
		t.Errorf("a finished task's keys %v, want %v", got, want)
	}
	if stop["type"] != "vzstop" || stop["user"] != "alice@pve" || stop["tokenid"] != "tok" || stop["status"] != "OK" || stop["saved"] != "1" {
		t.Errorf("the stop task: %v", stop)
	}
	if rows[2]["type"] != "vzcreate" || rows[2]["user"] != "root@pam" {
		t.Errorf("the oldest task: %v", rows[2])
	}

	// alice's token has no Sys.Audit on / and is not the task's user.
	k.ok(alice, http.MethodGet, "/cluster/tasks", nil, &rows)
	if len(rows) != 0 {
		t.Errorf("alice's token sees %v, PVE shows a token none", rows)
	}
}

// Issue 33 (go-proxmox's Node.Version answered 501): a node's version is
// /version's; an unknown node fails on its parameter.
func TestNodeVersion(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	var v, nv map[string]any
	k.ok(k.root(), http.MethodGet, "/version", nil, &v)
	k.ok(k.auditor("aud@pve", "/vms"), http.MethodGet, "/nodes/pve/version", nil, &nv)
	if len(nv) != 3 || nv["version"] != v["version"] || nv["release"] != v["release"] || nv["repoid"] != v["repoid"] {
		t.Errorf("GET /nodes/pve/version %v, /version %v", nv, v)
	}
	want(t, "an unknown node", k.do(k.root(), http.MethodGet, "/nodes/nosuch/version", nil), 400,
		"Parameter verification failed.\n", map[string]string{"node": "no such cluster node 'nosuch'"})
}
