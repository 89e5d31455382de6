package sim

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// Regression tests for the deviations from real PVE that driving the
// emulator with third-party clients found (issue 14). Each asserts PVE's
// exact answer over HTTPS, in both emulated releases where they differ.

// pveVersions are the releases the emulator serves.
var pveVersions = []string{"9.1", "8.4"}

// eachVersion runs f against a fresh emulator of every release.
func eachVersion(t *testing.T, f func(t *testing.T, k *e2e, version string)) {
	for _, v := range pveVersions {
		t.Run(v, func(t *testing.T) {
			f(t, openE2E(t, Options{Dir: t.TempDir(), Version: v, TimeScale: zeroScale()}), v)
		})
	}
}

// want checks one answer's status, message and parameter errors.
func want(t *testing.T, what string, r e2eResp, status int, msg string, errs map[string]string) {
	t.Helper()
	if r.status != status || r.msg != msg || !maps.Equal(r.errs, errs) {
		t.Errorf("%s: %d %q %v, PVE answers %d %q %v", what, r.status, r.msg, r.errs, status, msg, errs)
	}
}

// keysOf returns the sorted keys of a JSON object.
func keysOf(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// auditor makes user id with a privsep=0 token whose only ACL is role
// PVEAuditor on path.
func (k *e2e) auditor(id, path string) e2eCaller {
	k.t.Helper()
	_, who := k.newUserToken(id, "tok", false)
	k.ok(k.root(), http.MethodPut, "/access/acl", url.Values{"path": {path}, "roles": {"PVEAuditor"}, "users": {id}}, nil)
	return who
}

// Item 1 and 9: GET /nodes carries each node's ssl_fingerprint; nodes are
// listed to every caller (in /nodes and /cluster/resources), their figures
// only to one with Sys.Audit on the node (extract_node_stats).
func TestFidelity_nodes(t *testing.T) {
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		vmAuditor := k.auditor("vmaudit@pve", "/vms/4242")
		var nodes []map[string]any
		k.ok(k.root(), http.MethodGet, "/nodes", nil, &nodes)
		if len(nodes) != 1 || nodes[0]["ssl_fingerprint"] != k.srv.Fingerprint() {
			t.Fatalf("GET /nodes = %v, want ssl_fingerprint %s", nodes, k.srv.Fingerprint())
		}
		if got, want := keysOf(nodes[0]), []string{"cpu", "disk", "id", "level", "maxcpu", "maxdisk", "maxmem", "mem", "node", "ssl_fingerprint", "status", "type", "uptime"}; !slices.Equal(got, want) {
			t.Errorf("GET /nodes as root: keys %v, want %v", got, want)
		}
		nodes = nil // Unmarshal would merge into the old maps
		k.ok(vmAuditor, http.MethodGet, "/nodes", nil, &nodes)
		if got, want := keysOf(nodes[0]), []string{"id", "level", "node", "ssl_fingerprint", "status", "type"}; len(nodes) != 1 || !slices.Equal(got, want) {
			t.Errorf("GET /nodes without Sys.Audit: %v, want keys %v", nodes, want)
		}

		var res []map[string]any
		k.ok(vmAuditor, http.MethodGet, "/cluster/resources", url.Values{"type": {"node"}}, &res)
		if len(res) != 1 || res[0]["id"] != "node/pve" || res[0]["status"] != "online" {
			t.Fatalf("/cluster/resources?type=node without Sys.Audit = %v, want node/pve listed", res)
		}
		if got, want := keysOf(res[0]), []string{"cgroup-mode", "id", "level", "node", "status", "type"}; !slices.Equal(got, want) {
			t.Errorf("node entry without Sys.Audit: keys %v, want %v", got, want)
		}
		res = nil
		k.ok(k.root(), http.MethodGet, "/cluster/resources", url.Values{"type": {"node"}}, &res)
		if _, ok := res[0]["maxmem"]; !ok || res[0]["uptime"] == nil {
			t.Errorf("node entry for root lacks its figures: %v", res[0])
		}
	})
}

// Item 7: GET /nodes/{node}/qemu lists the node's VMs: none.
func TestFidelity_qemuList(t *testing.T) {
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		r := k.do(k.op(), http.MethodGet, "/nodes/pve/qemu", nil)
		if r.status != 200 || string(r.data) != "[]" {
			t.Errorf("GET /nodes/pve/qemu: %d %s %q, want 200 []", r.status, r.data, r.msg)
		}
		want(t, "unknown node", k.do(k.op(), http.MethodGet, "/nodes/nope/qemu", nil),
			400, "Parameter verification failed.\n", map[string]string{"node": "no such cluster node 'nope'"})
	})
}

// Item 8: the log of an unknown task is read_task_log's dump_logfile of a
// missing file (200, one line); its status stays 400 "no such task". The
// owner named in the UPID may read it, others need Sys.Audit.
func TestFidelity_unknownTaskLog(t *testing.T) {
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		upid := "UPID:pve:0000BEEF:00C0FFEE:6A000000:vzstart:4242:root@pam!sim:"
		path := "/nodes/pve/tasks/" + url.PathEscape(upid)
		r := k.do(k.root(), http.MethodGet, path+"/log", nil)
		if r.status != 200 || canonJSON(r.data) != `[{"n":1,"t":"unable to open file - No such file or directory"}]` || string(r.raw["total"]) != "1" {
			t.Errorf("log of an unknown task: %d %s total %s %q", r.status, r.data, r.raw["total"], r.msg)
		}
		want(t, "status of an unknown task", k.do(k.root(), http.MethodGet, path+"/status", nil),
			400, "Parameter verification failed.\n", map[string]string{"upid": "no such task"})
		_, stranger := k.newUserToken("stranger@pve", "tok", false)
		want(t, "someone else's unknown task", k.do(stranger, http.MethodGet, path+"/log", nil),
			403, "Permission check failed (/nodes/pve, Sys.Audit)\n", nil)
	})
}

// Item 10: PUT /access/acl's perm-modify check is check_perm_modify:
// VM.Allocate on /vms/<id> (Datastore.Allocate on /storage/<id>) also
// admits the caller, who may then hand out only roles within its own
// privileges; update_acl's refusal is raised inside lock_user_config and
// so arrives as a 500 carrying the stringified parameter exception.
func TestFidelity_aclDelegation(t *testing.T) {
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		root := k.root()
		k.create(k.op(), "150", nil)
		_, deleg := k.newUserToken("deleg@pve", "tok", false)
		k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/150"}, "roles": {"PVEVMAdmin"}, "users": {"deleg@pve"}}, nil)
		k.ok(root, http.MethodPost, "/access/users", url.Values{"userid": {"friend@pve"}}, nil)

		grant := func(path, role string) e2eResp {
			return k.do(deleg, http.MethodPut, "/access/acl", url.Values{"path": {path}, "roles": {role}, "users": {"friend@pve"}})
		}
		if r := grant("/vms/150", "PVEVMUser"); r.status != 200 {
			t.Errorf("delegating PVEVMUser with VM.Allocate: %d %q %v", r.status, r.msg, r.errs)
		}
		r := grant("/vms/150", "Administrator")
		want(t, "delegating more than one holds", r, 500,
			"ACL update failed: 400 Parameter verification failed.\nrole: Cannot add role 'Administrator' - requires 'Permissions.Modify' or superset of privileges.\n", nil)
		if r.reason != "ACL update failed: 400 Parameter verification failed." {
			t.Errorf("reason phrase %q", r.reason)
		}
		want(t, "no VM.Allocate on the path", grant("/vms/151", "PVEVMUser"),
			403, "Permission check failed (/vms/151, Permissions.Modify|VM.Allocate)\n", nil)
		want(t, "storage path", grant("/storage/local", "PVEDatastoreUser"),
			403, "Permission check failed (/storage/local, Permissions.Modify|Datastore.Allocate)\n", nil)
		want(t, "other path", grant("/nodes/pve", "PVEAuditor"),
			403, "Permission check failed (/nodes/pve, Permissions.Modify)\n", nil)
	})
}

// Item 11: pveproxy merges the query string over the body (the query's
// value wins) and refuses a parameter that contradicts the URI's.
func TestFidelity_duplicateParameters(t *testing.T) {
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		k.create(k.op(), "101", nil)
		req := k.request(k.op(), http.MethodPut, "/nodes/pve/lxc/101/config?description=query", url.Values{"description": {"body"}})
		if r := k.send(req); r.status != 200 {
			t.Fatalf("PUT with description in query and body: %d %q %v", r.status, r.msg, r.errs)
		}
		if got := k.config("101", false)["description"]; got != "query\n" {
			t.Errorf("description = %q, want the query's value", got)
		}
		dup := "duplicate parameter (already defined in URI) with conflicting values!"
		want(t, "vmid contradicting the URI", k.do(k.op(), http.MethodGet, "/nodes/pve/lxc/101/config", url.Values{"vmid": {"102"}}),
			400, "Parameter verification failed.\n", map[string]string{"vmid": dup})
		want(t, "node contradicting the URI", k.do(k.op(), http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"node": {"pve2"}, "cores": {"2"}}),
			400, "Parameter verification failed.\n", map[string]string{"node": dup})
		if r := k.do(k.op(), http.MethodGet, "/nodes/pve/lxc/101/config", url.Values{"vmid": {"101"}}); r.status != 200 {
			t.Errorf("vmid equal to the URI's: %d %q", r.status, r.msg)
		}
		// The check comes before the permission check.
		_, nobody := k.newUserToken("nobody@pve", "tok", false)
		want(t, "contradiction without privileges", k.do(nobody, http.MethodGet, "/nodes/pve/lxc/101/config", url.Values{"vmid": {"7"}}),
			400, "Parameter verification failed.\n", map[string]string{"vmid": dup})
	})
}

// Item 13: user.cfg errors read "<op>: <message>" (no cfs-locked prefix
// since PVE 7).
func TestFidelity_userCfgErrors(t *testing.T) {
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		root := k.root()
		want(t, "existing role", k.do(root, http.MethodPost, "/access/roles", url.Values{"roleid": {"Administrator"}}),
			500, "create role failed: role 'Administrator' already exists\n", nil)
		want(t, "existing user", k.do(root, http.MethodPost, "/access/users", url.Values{"userid": {"corral@pve"}}),
			500, "create user failed: user 'corral@pve' already exists\n", nil)
		want(t, "ACL for a missing user", k.do(root, http.MethodPut, "/access/acl", url.Values{"path": {"/"}, "roles": {"PVEAuditor"}, "users": {"ghost@pve"}}),
			500, "ACL update failed: user 'ghost@pve' does not exist\n", nil)
	})
}

// joinLines is a task log as one string, for failure messages.
func joinLines(lines []string) string { return strings.Join(lines, "\n") }
