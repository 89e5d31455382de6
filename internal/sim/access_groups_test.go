package sim

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// Issue 33 (Ansible's proxmox_group_info answered 501): groups as
// Group.pm serves them: create (twice: PVE's error), list with the
// members as a comma list, read with members, update the comment, users
// join with groups=, delete takes the membership and the group's ACL
// entries along; unknown groups fail with PVE's messages, and the list
// shows a caller only the groups it may see.
func TestAccessGroups(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	k.ok(root, http.MethodPost, "/access/groups", url.Values{"groupid": {"ops"}, "comment": {"operators"}}, nil)
	k.ok(root, http.MethodPost, "/access/groups", url.Values{"groupid": {"dev"}}, nil)
	want(t, "a second ops", k.do(root, http.MethodPost, "/access/groups", url.Values{"groupid": {"ops"}}), 500,
		"create group failed: group 'ops' already exists\n", nil)
	k.ok(root, http.MethodPost, "/access/users", url.Values{"userid": {"ann@pve"}, "groups": {"ops"}}, nil)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms"}, "roles": {"PVEVMUser"}, "groups": {"ops"}}, nil)

	var list []map[string]any
	k.ok(root, http.MethodGet, "/access/groups", nil, &list)
	if len(list) != 2 || list[0]["groupid"] != "dev" || list[0]["users"] != "" || list[1]["groupid"] != "ops" ||
		list[1]["users"] != "ann@pve" || list[1]["comment"] != "operators" {
		t.Errorf("GET /access/groups: %v", list)
	}
	var ops map[string]any
	k.ok(root, http.MethodGet, "/access/groups/ops", nil, &ops)
	if m, _ := ops["members"].([]any); len(m) != 1 || m[0] != "ann@pve" || ops["comment"] != "operators" {
		t.Errorf("GET /access/groups/ops: %v", ops)
	}
	k.ok(root, http.MethodPut, "/access/groups/ops", url.Values{"comment": {"on call"}}, nil)
	k.ok(root, http.MethodGet, "/access/groups/ops", nil, &ops)
	if ops["comment"] != "on call" {
		t.Errorf("after the update: %v", ops)
	}
	want(t, "read nosuch", k.do(root, http.MethodGet, "/access/groups/nosuch", nil), 500, "group 'nosuch' does not exist\n", nil)
	want(t, "update nosuch", k.do(root, http.MethodPut, "/access/groups/nosuch", url.Values{"comment": {"x"}}), 500,
		"update group failed: group 'nosuch' does not exist\n", nil)

	// An auditor of /access/groups/dev sees dev alone.
	aud := k.auditor("aud@pve", "/access/groups/dev")
	k.ok(aud, http.MethodGet, "/access/groups", nil, &list)
	if len(list) != 1 || list[0]["groupid"] != "dev" {
		t.Errorf("an auditor of dev lists %v", list)
	}

	var user map[string]any
	k.ok(root, http.MethodGet, "/access/users/ann@pve", nil, &user)
	if g, _ := user["groups"].([]any); len(g) != 1 || g[0] != "ops" {
		t.Errorf("ann@pve's groups before the delete: %v", user["groups"])
	}
	k.ok(root, http.MethodDelete, "/access/groups/ops", nil, nil)
	want(t, "delete again", k.do(root, http.MethodDelete, "/access/groups/ops", nil), 500,
		"delete group failed: group 'ops' does not exist\n", nil)
	user = nil
	k.ok(root, http.MethodGet, "/access/users/ann@pve", nil, &user)
	if g, ok := user["groups"].([]any); !ok || len(g) != 0 {
		t.Errorf("ann@pve still in %v after ops was deleted", g)
	}
	var acl []map[string]any
	k.ok(root, http.MethodGet, "/access/acl", nil, &acl)
	if slices.ContainsFunc(acl, func(e map[string]any) bool { return e["ugid"] == "ops" }) {
		t.Errorf("ops's ACL entry outlived it: %v", acl)
	}
}
