package sim

import (
	"net/http"
	"net/url"
	"testing"
)

// Issue 33 (Ansible's proxmox_storage_info answered 501): GET /storage
// lists storage.cfg as api_storage_config renders it, filtered by type=
// and by Datastore.Audit or AllocateSpace on each storage; GET
// /storage/{storage} needs Datastore.Allocate on it.
func TestStorageConfig(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	var all []map[string]any
	k.ok(root, http.MethodGet, "/storage", nil, &all)
	if len(all) != 2 || all[0]["storage"] != "local" || all[1]["storage"] != "local-lvm" {
		t.Fatalf("GET /storage: %v", all)
	}
	local, lvm := all[0], all[1]
	if local["type"] != "dir" || local["path"] != "/var/lib/vz" || local["content"] != "backup,iso,vztmpl" {
		t.Errorf("local: %v", local)
	}
	if lvm["type"] != "lvmthin" || lvm["vgname"] != "pve" || lvm["thinpool"] != "data" || lvm["content"] != "images,rootdir" {
		t.Errorf("local-lvm: %v", lvm)
	}
	if d, _ := local["digest"].(string); len(d) != 40 || d != lvm["digest"] {
		t.Errorf("digests %v and %v, want the one file's SHA-1", local["digest"], lvm["digest"])
	}
	var one map[string]any
	k.ok(root, http.MethodGet, "/storage", url.Values{"type": {"lvmthin"}}, &all)
	k.ok(root, http.MethodGet, "/storage/local-lvm", nil, &one)
	if len(all) != 1 || all[0]["storage"] != "local-lvm" || one["thinpool"] != "data" || one["digest"] != lvm["digest"] {
		t.Errorf("type=lvmthin: %v; GET /storage/local-lvm: %v", all, one)
	}
	want(t, "an unknown storage", k.do(root, http.MethodGet, "/storage/nosuch", nil), 500, "storage 'nosuch' does not exist\n", nil)

	// An auditor of local-lvm alone sees it, and may not read its config.
	aud := k.auditor("aud@pve", "/storage/local-lvm")
	k.ok(aud, http.MethodGet, "/storage", nil, &all)
	if len(all) != 1 || all[0]["storage"] != "local-lvm" {
		t.Errorf("an auditor of local-lvm lists %v", all)
	}
	if r := k.do(aud, http.MethodGet, "/storage/local-lvm", nil); r.status != 403 {
		t.Errorf("an auditor reads local-lvm's config: %d %s", r.status, r.msg)
	}
}

// Issue 33 (Ansible's proxmox_domain_info answered 501): the realms of a
// default install, pam and pve; one realm's config with its plugin (pam)
// and the file's digest needs Realm.Allocate or Sys.Audit on
// /access/realm.
func TestAccessDomains(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	var list []map[string]any
	k.ok(root, http.MethodGet, "/access/domains", nil, &list)
	if len(list) != 2 || list[0]["realm"] != "pam" || list[0]["type"] != "pam" || list[1]["realm"] != "pve" ||
		list[1]["comment"] != "Proxmox VE authentication server" {
		t.Fatalf("GET /access/domains: %v", list)
	}
	var pam map[string]any
	k.ok(root, http.MethodGet, "/access/domains/pam", nil, &pam)
	if got := keysOf(pam); len(got) != 4 || pam["plugin"] != "PVE::Auth::PAM" || pam["comment"] != "Linux PAM standard authentication" {
		t.Errorf("GET /access/domains/pam: %v", pam)
	}
	want(t, "an unknown realm", k.do(root, http.MethodGet, "/access/domains/ldap1", nil), 500, "domain 'ldap1' does not exist\n", nil)
	vm := k.auditor("vmaud@pve", "/vms")
	k.ok(vm, http.MethodGet, "/access/domains", nil, &list)
	if len(list) != 2 {
		t.Errorf("anyone lists the realms: %v", list)
	}
	if r := k.do(vm, http.MethodGet, "/access/domains/pve", nil); r.status != 403 {
		t.Errorf("an auditor of /vms reads realm pve: %d %s", r.status, r.msg)
	}
}
