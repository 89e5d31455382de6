package sim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
)

// poolMembers reads a pool's member ids through the query form.
func (k *e2e) poolMembers(version, poolid, typ string) []string {
	k.t.Helper()
	q := url.Values{"poolid": {poolid}}
	if typ != "" {
		q.Set("type", typ)
	}
	r := k.do(k.root(), http.MethodGet, "/pools", q)
	if r.status != 200 {
		k.t.Fatalf("GET /pools?poolid=%s: %d %q %v", poolid, r.status, r.msg, r.errs)
	}
	checkReturns(k.t, version, "GET", "/pools", r.data)
	var out []struct {
		PoolID  string `json:"poolid"`
		Members []struct {
			ID string `json:"id"`
		} `json:"members"`
	}
	k.decode(r.data, &out)
	if len(out) != 1 || out[0].PoolID != poolid {
		k.t.Fatalf("GET /pools?poolid=%s answered %s", poolid, r.data)
	}
	ids := []string{}
	for _, m := range out[0].Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// Issue 33: GET /pools answers [] on a fresh state, as PVE does (it was
// 501, and Ansible's inventory came back empty); pools are created,
// nested, listed, updated and deleted with Pool.pm's checks and messages.
func TestPools_lifecycle(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		r := k.do(root, http.MethodGet, "/pools", nil)
		if r.status != 200 || string(r.data) != "[]" {
			t.Fatalf("GET /pools on a fresh state: %d %s %q, PVE answers []", r.status, r.data, r.msg)
		}
		k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"prod"}, "comment": {"production"}}, nil)
		k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"prod/web"}}, nil)
		for _, c := range []struct{ id, msg string }{
			{"prod", "create pool failed: pool 'prod' already exists\n"},
			{"9lives", "create pool failed: pool name must start with a letter\n"},
			{"prod/1", "create pool failed: pool name must start with a letter\n"},
			{"dev/web", "create pool failed: parent 'dev' of pool 'dev/web' does not exist\n"},
		} {
			want(t, "create "+c.id, k.do(root, http.MethodPost, "/pools", url.Values{"poolid": {c.id}}), 500, c.msg, nil)
		}
		want(t, "too deep", k.do(root, http.MethodPost, "/pools", url.Values{"poolid": {"a/b/c/d"}}), 400, "Parameter verification failed.\n",
			map[string]string{"poolid": "invalid format - pool name 'a/b/c/d' nested too deeply (max levels = 3)\n"})
		r = k.do(root, http.MethodGet, "/pools", nil)
		checkReturns(t, v, "GET", "/pools", r.data)
		if got := string(r.data); got != `[{"comment":"production","poolid":"prod"},{"poolid":"prod/web"}]` {
			t.Errorf("GET /pools = %s", got)
		}

		k.create(root, "101", url.Values{"pool": {"prod"}})
		if got := k.poolMembers(v, "prod", ""); len(got) != 1 || got[0] != "lxc/101" {
			t.Errorf("members of prod after a create with pool=prod: %v", got)
		}
		want(t, "create in a missing pool", k.do(root, http.MethodPost, "/nodes/pve/lxc", url.Values{"vmid": {"102"},
			"ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}, "pool": {"nope"}}),
			403, "Permission check failed (pool 'nope' does not exist)\n", nil)

		want(t, "move without allow-move", k.do(root, http.MethodPut, "/pools", url.Values{"poolid": {"prod/web"}, "vms": {"101"}}),
			500, "update pools failed: VM 101 belongs already to pool 'prod' and 'allow-move' is not set\n", nil)
		k.ok(root, http.MethodPut, "/pools", url.Values{"poolid": {"prod/web"}, "vms": {"101"}, "allow-move": {"1"}, "storage": {"local-lvm"}}, nil)
		if got := k.poolMembers(v, "prod/web", ""); len(got) != 2 || got[0] != "lxc/101" || got[1] != "storage/pve/local-lvm" {
			t.Errorf("members of prod/web: %v", got)
		}
		if got := k.poolMembers(v, "prod/web", "storage"); len(got) != 1 || got[0] != "storage/pve/local-lvm" {
			t.Errorf("storage members of prod/web: %v", got)
		}
		if got := k.poolMembers(v, "prod", ""); len(got) != 0 {
			t.Errorf("prod after the move: %v", got)
		}
		want(t, "type without poolid", k.do(root, http.MethodGet, "/pools", url.Values{"type": {"lxc"}}), 400, "Parameter verification failed.\n",
			map[string]string{"poolid": requiresMsg(v, "type")})
		want(t, "already a member", k.do(root, http.MethodPut, "/pools/prod~web", url.Values{"storage": {"local-lvm"}}),
			400, "Parameter verification failed.\n", map[string]string{"poolid": "invalid format - pool name 'prod~web' contains invalid characters\n"})
		want(t, "storage twice", k.do(root, http.MethodPut, "/pools", url.Values{"poolid": {"prod/web"}, "storage": {"local-lvm"}}),
			500, "update pools failed: Storage 'local-lvm' is already a pool member\n", nil)

		// read_pool returns the index's entry as it is: poolid too,
		// which its returns schema does not declare.
		var one map[string]any
		r = k.do(root, http.MethodGet, "/pools/prod", nil)
		k.decode(r.data, &one)
		if one["comment"] != "production" || one["poolid"] != "prod" {
			t.Errorf("GET /pools/prod = %s", r.data)
		}
		delete(one, "poolid")
		rest, _ := json.Marshal(one)
		checkReturns(t, v, "GET", "/pools/{poolid}", rest)

		want(t, "delete a parent", k.do(root, http.MethodDelete, "/pools/prod", nil), 500, "delete pool failed: pool 'prod' is not empty (contains pool 'prod/web')\n", nil)
		want(t, "delete with a CT", k.do(root, http.MethodDelete, "/pools", url.Values{"poolid": {"prod/web"}}), 500, "delete pool failed: pool 'prod/web' is not empty (contains VM 101)\n", nil)
		k.mustOK(root, http.MethodDelete, "/nodes/pve/lxc/101", nil)
		want(t, "delete with a storage", k.do(root, http.MethodDelete, "/pools", url.Values{"poolid": {"prod/web"}}), 500, "delete pool failed: pool 'prod/web' is not empty (contains storage 'local-lvm')\n", nil)
		want(t, "remove a non-member", k.do(root, http.MethodPut, "/pools", url.Values{"poolid": {"prod/web"}, "vms": {"101"}, "delete": {"1"}}),
			500, "update pools failed: VM 101 is not a pool member\n", nil)
		k.ok(root, http.MethodPut, "/pools", url.Values{"poolid": {"prod/web"}, "storage": {"local-lvm"}, "delete": {"1"}}, nil)
		k.ok(root, http.MethodDelete, "/pools", url.Values{"poolid": {"prod/web"}}, nil)
		k.ok(root, http.MethodDelete, "/pools/prod", nil, nil)
		want(t, "gone", k.do(root, http.MethodGet, "/pools/prod", nil), 500, "pool 'prod' does not exist\n", nil)
	})
}

// requiresMsg is check_object's message for a property whose "requires"
// is missing, in the release's wording.
func requiresMsg(version, prop string) string {
	if version == "8.4" {
		return "missing property - '" + prop + "' requires this property"
	}
	return "missing property required by '" + prop + "'"
}

// A role on /pool/<pool> reaches the pool's guests and storages
// (RPCEnvironment compute_api_permission), not propagated below them;
// the pool list shows only pools with Pool.Audit; PUT needs
// Pool.Allocate on the pool and Permissions.Modify or VM.Allocate on each
// guest it adds; creating with pool= needs VM.Allocate on the pool.
func TestPools_permissions(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"team"}}, nil)
	k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"other"}}, nil)
	k.create(root, "101", nil)
	_, dev := k.newUserToken("dev@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/pool/team"}, "roles": {"PVEVMAdmin,PVEPoolAdmin"}, "users": {"dev@pve"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/storage"}, "roles": {"PVEDatastoreUser"}, "users": {"dev@pve"}}, nil)

	want(t, "config outside the pool", k.do(dev, http.MethodGet, "/nodes/pve/lxc/101/config", nil), 403, "Permission check failed (/vms/101, VM.Audit)\n", nil)
	var list []map[string]any
	k.ok(dev, http.MethodGet, "/pools", nil, &list)
	if len(list) != 1 || list[0]["poolid"] != "team" {
		t.Errorf("dev's pool list: %v", list)
	}
	want(t, "add a guest without rights on it", k.do(dev, http.MethodPut, "/pools", url.Values{"poolid": {"team"}, "vms": {"101"}}),
		500, "update pools failed: Permission check failed (/vms/101, Permissions.Modify|VM.Allocate)\n", nil)
	want(t, "another pool", k.do(dev, http.MethodPut, "/pools", url.Values{"poolid": {"other"}, "comment": {"x"}}),
		403, "Permission check failed (/pool/other, Pool.Allocate)\n", nil)

	k.ok(root, http.MethodPut, "/pools", url.Values{"poolid": {"team"}, "vms": {"101"}}, nil)
	if r := k.do(dev, http.MethodGet, "/nodes/pve/lxc/101/config", nil); r.status != 200 {
		t.Errorf("config of a pool member: %d %q", r.status, r.msg)
	}
	// The pool's roles on a member are never propagated: nothing below it.
	var perms map[string]map[string]int
	k.ok(dev, http.MethodGet, "/access/permissions", url.Values{"path": {"/vms/101"}}, &perms)
	if perms["/vms/101"]["VM.Allocate"] != 0 {
		t.Errorf("/vms/101 privileges from the pool: %v, want VM.Allocate not propagated", perms["/vms/101"])
	}
	k.ok(dev, http.MethodGet, "/access/permissions", nil, &perms)
	if _, ok := perms["/vms/101"]; !ok {
		t.Errorf("effective permissions lack the pool member /vms/101: %v", perms)
	}

	// Create into the pool: VM.Allocate on /pool/team is enough.
	k.create(dev, "102", url.Values{"pool": {"team"}})
	want(t, "create outside the pool", k.do(dev, http.MethodPost, "/nodes/pve/lxc", url.Values{"vmid": {"103"},
		"ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}, "rootfs": {"local-lvm:1"}}),
		403, "Permission check failed\n", nil)

	// NoAccess on the pool beats the guest's own ACL roles.
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/101"}, "roles": {"PVEAuditor"}, "users": {"dev@pve"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/pool/team"}, "roles": {"NoAccess"}, "users": {"dev@pve"}}, nil)
	want(t, "NoAccess on the pool", k.do(dev, http.MethodGet, "/nodes/pve/lxc/101/config", nil), 403, "Permission check failed (/vms/101, VM.Audit)\n", nil)
}

// /cluster/resources lists each pool the caller may audit as
// {id:"/pool/<p>", pool, type:"pool"} before the guests, with its running
// members' figures, and a guest's pool only with Pool.Audit on it
// (pve-manager API2/Cluster.pm resources); a pool's members have no pool
// field (extract_vm_stats).
func TestPools_clusterResources(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"web"}}, nil)
	k.ok(root, http.MethodPost, "/pools", url.Values{"poolid": {"idle"}}, nil)
	k.create(root, "101", url.Values{"pool": {"web"}, "start": {"1"}})
	var res []map[string]any
	k.ok(root, http.MethodGet, "/cluster/resources", nil, &res)
	if len(res) < 3 || res[0]["id"] != "/pool/idle" || res[1]["id"] != "/pool/web" || res[1]["type"] != "pool" || res[1]["pool"] != "web" {
		t.Fatalf("first resources: %v", res[:min(3, len(res))])
	}
	// Figures come only from members with an uptime: none a moment
	// after the start, as in PVE.
	if _, ok := res[0]["mem"]; ok {
		t.Errorf("pool figures of a pool without members: %v", res[0])
	}
	for _, r := range res {
		if r["id"] == "lxc/101" && r["pool"] != "web" {
			t.Errorf("lxc/101 = %v, want pool web", r)
		}
	}
	res = nil
	k.ok(root, http.MethodGet, "/cluster/resources", url.Values{"type": {"vm"}}, &res)
	if len(res) != 1 || res[0]["pool"] != "web" {
		t.Errorf("type=vm: %v", res)
	}
	var pool []map[string]any
	k.ok(root, http.MethodGet, "/pools", url.Values{"poolid": {"web"}}, &pool)
	if m := pool[0]["members"].([]any)[0].(map[string]any); m["pool"] != nil {
		t.Errorf("a member has a pool field: %v", m)
	}

	aud := k.auditor("aud@pve", "/vms")
	res = nil
	k.ok(aud, http.MethodGet, "/cluster/resources", nil, &res)
	for _, r := range res {
		if r["type"] == "pool" || r["pool"] != nil {
			t.Errorf("without Pool.Audit: %v", r)
		}
	}
}
