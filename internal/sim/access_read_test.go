package sim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Issue 33: GET /access/users/{userid} and /access/roles/{roleid} are
// served as User.pm read_user and Role.pm read_role answer them (they
// answered 501, so bpg's user and role resources could create but not
// read back), and the user list carries groups and tokens only with
// full=1 (bpg's users data source could not decode "groups":"").
func TestAccess_readUserAndRole(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, v string) {
		root := k.root()
		k.ok(root, http.MethodPost, "/access/users", url.Values{"userid": {"ann@pve"}, "email": {"ann@example.org"}, "enable": {"0"}}, nil)
		k.ok(root, http.MethodPost, "/access/users/ann@pve/token/ci", url.Values{"comment": {"ci"}}, nil)
		k.ok(root, http.MethodPost, "/access/users", url.Values{"userid": {"plain@pve"}}, nil)

		r := k.do(root, http.MethodGet, "/access/users", nil)
		checkReturns(t, v, "GET", "/access/users", r.data)
		var list []map[string]any
		k.decode(r.data, &list)
		for _, u := range list {
			for _, key := range []string{"groups", "tokens"} {
				if _, ok := u[key]; ok {
					t.Errorf("GET /access/users without full: %s has %q (PVE sends it only with full=1)", u["userid"], key)
				}
			}
		}
		r = k.do(root, http.MethodGet, "/access/users", url.Values{"full": {"1"}})
		k.decode(r.data, &list)
		byID := map[string]map[string]any{}
		for _, u := range list {
			byID[u["userid"].(string)] = u
		}
		ann := byID["ann@pve"]
		if ann["groups"] != "" || ann["email"] != "ann@example.org" || ann["enable"] != float64(0) || ann["realm-type"] != "pve" {
			t.Errorf("full entry of ann@pve: %v", ann)
		}
		if toks, _ := ann["tokens"].([]any); len(toks) != 1 || toks[0].(map[string]any)["tokenid"] != "ci" {
			t.Errorf("full entry's tokens: %v", ann["tokens"])
		}
		if tok, ok := byID["plain@pve"]["tokens"]; !ok || tok != nil {
			t.Errorf("plain@pve's full entry tokens = %v (present %v); PVE's user without a token line has tokens null", tok, ok)
		}
		k.decode(k.do(root, http.MethodGet, "/access/users", url.Values{"enabled": {"0"}}).data, &list)
		if len(list) != 1 || list[0]["userid"] != "ann@pve" {
			t.Errorf("enabled=0 lists %v, want only ann@pve", list)
		}

		r = k.do(root, http.MethodGet, "/access/users/ann@pve", nil)
		checkReturns(t, v, "GET", "/access/users/{userid}", r.data)
		var one map[string]any
		k.decode(r.data, &one)
		if g, ok := one["groups"].([]any); !ok || len(g) != 0 || one["email"] != "ann@example.org" {
			t.Errorf("GET /access/users/ann@pve = %s", r.data)
		}
		if tok, _ := one["tokens"].(map[string]any)["ci"].(map[string]any); tok["comment"] != "ci" || tok["privsep"] != float64(1) {
			t.Errorf("read_user tokens = %v", one["tokens"])
		}
		want(t, "missing user", k.do(root, http.MethodGet, "/access/users/ghost@pve", nil), 500, "no such user ('ghost@pve')\n", nil)

		// Sys.Audit alone is enough (userid-group is check_any).
		aud := k.auditor("aud@pve", "/access/groups")
		if r := k.do(aud, http.MethodGet, "/access/users/ann@pve", nil); r.status != 200 {
			t.Errorf("an auditor reads a user: %d %q", r.status, r.msg)
		}
		_, nobody := k.newUserToken("nobody@pve", "tok", false)
		want(t, "nobody reads a user", k.do(nobody, http.MethodGet, "/access/users/ann@pve", nil), 403,
			"Permission check failed (/access/groups, User.Modify|Sys.Audit)\n", nil)

		k.ok(root, http.MethodPost, "/access/roles", url.Values{"roleid": {"Viewer"}, "privs": {"VM.Audit,Sys.Audit"}}, nil)
		r = k.do(nobody, http.MethodGet, "/access/roles/Viewer", nil) // user => 'all'
		checkReturns(t, v, "GET", "/access/roles/{roleid}", r.data)
		if got := string(r.data); got != `{"Sys.Audit":1,"VM.Audit":1}` {
			t.Errorf("GET /access/roles/Viewer = %s", got)
		}
		var admin map[string]int
		k.ok(root, http.MethodGet, "/access/roles/Administrator", nil, &admin)
		var roles []map[string]any
		k.ok(root, http.MethodGet, "/access/roles", nil, &roles)
		for _, ro := range roles {
			if ro["roleid"] == "Administrator" && len(admin) != len(splitList(ro["privs"].(string))) {
				t.Errorf("Administrator: %d privileges by id, %d in the list", len(admin), len(splitList(ro["privs"].(string))))
			}
		}
		if r := k.do(root, http.MethodGet, "/access/roles/NoAccess", nil); r.status != 200 || string(r.data) != "{}" {
			t.Errorf("GET /access/roles/NoAccess = %d %s", r.status, r.data)
		}
		want(t, "missing role", k.do(root, http.MethodGet, "/access/roles/Ghost", nil), 500, "role 'Ghost' does not exist\n", nil)
	})
}

// PUT and DELETE /access/users/{userid} as User.pm update_user and
// delete_user: fields set when given, groups refused when unknown;
// delete takes the user's and its tokens' ACL entries with it and, as in
// PVE, succeeds for a user that does not exist.
func TestAccess_updateAndDeleteUser(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.ok(root, http.MethodPost, "/access/users", url.Values{"userid": {"bob@pve"}, "comment": {"old"}}, nil)
	k.ok(root, http.MethodPost, "/access/users/bob@pve/token/ci", nil, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms"}, "roles": {"PVEAuditor"}, "users": {"bob@pve"}, "tokens": {"bob@pve!ci"}}, nil)
	k.ok(root, http.MethodPut, "/access/users/bob@pve", url.Values{"comment": {"new"}, "email": {"bob@example.org"}, "enable": {"0"}, "expire": {"4102444800"}}, nil)
	var u map[string]any
	k.ok(root, http.MethodGet, "/access/users/bob@pve", nil, &u)
	if u["comment"] != "new" || u["email"] != "bob@example.org" || u["enable"] != float64(0) || u["expire"] != float64(4102444800) {
		t.Errorf("after PUT: %v", u)
	}
	want(t, "unknown group", k.do(root, http.MethodPut, "/access/users/bob@pve", url.Values{"groups": {"ops"}}), 500, "update user failed: no such group 'ops'\n", nil)
	want(t, "missing user", k.do(root, http.MethodPut, "/access/users/ghost@pve", url.Values{"comment": {"x"}}), 500, "update user failed: no such user ('ghost@pve')\n", nil)

	k.ok(root, http.MethodDelete, "/access/users/bob@pve", nil, nil)
	want(t, "deleted", k.do(root, http.MethodGet, "/access/users/bob@pve", nil), 500, "no such user ('bob@pve')\n", nil)
	var acl []map[string]any
	k.ok(root, http.MethodGet, "/access/acl", nil, &acl)
	for _, e := range acl {
		if strings.HasPrefix(e["ugid"].(string), "bob@pve") {
			t.Errorf("ACL entry of the deleted user left: %v", e)
		}
	}
	k.ok(root, http.MethodDelete, "/access/users/ghost@pve", nil, nil)
}
