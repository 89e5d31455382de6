package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// Item 2 and the config digest: an empty description writes no '#' line,
// so GET config and /pending have no description key; description lines
// are encode_text'd in the file; the digest GET config returns is the
// SHA-1 of the file PVE writes (write_pct_config), and a PUT with another
// digest fails as assert_if_modified does.
func TestFidelity_descriptionAndDigest(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		op := k.op()
		k.create(op, "101", url.Values{"description": {"hello"}, "searchdomain": {"example.org"}})
		cfg := "/nodes/pve/lxc/101/config"
		k.ok(op, http.MethodPut, cfg, url.Values{"description": {""}}, nil)
		conf := k.config("101", false)
		if d, ok := conf["description"]; ok {
			t.Errorf("GET config after description= has description %q; PVE has none", d)
		}
		var pending []map[string]any
		k.ok(op, http.MethodGet, "/nodes/pve/lxc/101/pending", nil, &pending)
		for _, row := range pending {
			if row["key"] == "description" {
				t.Errorf("GET pending after description= has %v", row)
			}
		}

		desc := "db: 50%\n\nsecond\n\n"
		k.ok(op, http.MethodPut, cfg, url.Values{"description": {desc}}, nil)
		conf = k.config("101", false)
		if conf["description"] != "db: 50%\n\nsecond\n" {
			t.Errorf("description read back %q", conf["description"])
		}
		// The file PVE writes: the description's lines with ':' and '%'
		// encoded, then every key sorted.
		var file strings.Builder
		file.WriteString("#db%3A 50%25\n#\n#second\n")
		for _, key := range keysOf(conf) {
			if key != "description" && key != "digest" {
				fmt.Fprintf(&file, "%s: %v\n", key, conf[key])
			}
		}
		if got := sha1Hex(file.String()); conf["digest"] != got {
			text, _ := k.srv.Cluster().ConfigText(101)
			t.Errorf("digest %v, want SHA-1 %s of\n%s\nthe emulator's file:\n%s", conf["digest"], got, file.String(), text)
		}

		// A pending change: its section lists "delete" among its keys.
		k.mustOK(op, http.MethodPost, "/nodes/pve/lxc/101/status/start", nil)
		k.ok(op, http.MethodPut, cfg, url.Values{"delete": {"searchdomain"}, "ostype": {"ubuntu"}}, nil)
		text, _ := k.srv.Cluster().ConfigText(101)
		if !strings.HasSuffix(text, "\n[pve:pending]\ndelete: searchdomain\nostype: ubuntu\n") {
			t.Errorf("config file with pending changes:\n%s", text)
		}
		conf = k.config("101", false)
		if conf["digest"] != sha1Hex(text) {
			t.Errorf("digest %v is not the SHA-1 of the file", conf["digest"])
		}

		// Compare-and-swap on the digest.
		old := conf["digest"].(string)
		k.ok(op, http.MethodPut, cfg, url.Values{"cores": {"2"}, "digest": {old}}, nil)
		want(t, "PUT with a stale digest", k.do(op, http.MethodPut, cfg, url.Values{"cores": {"3"}, "digest": {old}}),
			500, "detected modified configuration - file changed by other user? Try again.\n", nil)
		if got := k.config("101", false)["cores"]; got != float64(2) {
			t.Errorf("a refused PUT changed cores to %v", got)
		}
	})
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Item 3: GET /nodes/{node}/query-url-metadata HEADs the URL: the
// catalogue's templates answer with their file name, size and type; what
// cannot be fetched is a 500 "invalid server response".
func TestFidelity_queryURLMetadata(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		root := k.root()
		const tmpl = "debian-13-standard_13.1-2_amd64.tar.zst"
		u := "http://download.proxmox.com/images/system/" + tmpl
		var meta map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/query-url-metadata", url.Values{"url": {u}}, &meta)
		if meta["filename"] != tmpl || meta["mimetype"] != "application/octet-stream" || keysOf(meta)[2] != "size" {
			t.Fatalf("metadata %v", meta)
		}
		// The size is what download-url then stores.
		k.mustOK(root, http.MethodPost, "/nodes/pve/storage/local/download-url", url.Values{"url": {u}, "content": {"vztmpl"}, "filename": {tmpl}})
		var content []map[string]any
		k.ok(root, http.MethodGet, "/nodes/pve/storage/local/content", url.Values{"content": {"vztmpl"}}, &content)
		found := false
		for _, c := range content {
			if c["volid"] == "local:vztmpl/"+tmpl {
				found = true
				if c["size"] != meta["size"] {
					t.Errorf("downloaded size %v, metadata said %v", c["size"], meta["size"])
				}
			}
		}
		if !found {
			t.Errorf("download-url did not store %s: %v", tmpl, content)
		}

		q := func(u string) e2eResp {
			return k.do(root, http.MethodGet, "/nodes/pve/query-url-metadata", url.Values{"url": {u}})
		}
		want(t, "unresolvable host", q("https://mirror.example.invalid/x.iso"), 500,
			"invalid server response: '500 Can't connect to mirror.example.invalid:443 (Temporary failure in name resolution)'\n", nil)
		want(t, "missing file", q("http://download.proxmox.com/images/system/nope.tar.zst"), 500,
			"invalid server response: '404 Not Found'\n", nil)
		want(t, "not a URL", q("ftp://x"), 400, "Parameter verification failed.\n",
			map[string]string{"url": "value does not match the regex pattern"})
		// Sys.Audit without Sys.Modify on / (the operator) is not enough.
		want(t, "operator", k.do(k.op(), http.MethodGet, "/nodes/pve/query-url-metadata", url.Values{"url": {u}}),
			403, "Permission check failed\n", nil)
	})
}

// Item 5: GET .../interfaces has get_interfaces' "ip-addresses" and
// "hardware-address" per interface, and "inet"/"inet6" as the last
// address of each family (lo has ::1).
func TestFidelity_interfaces(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		k.create(k.op(), "201", url.Values{"net0": {"name=eth0,bridge=vmbr0,ip=dhcp,hwaddr=BC:24:11:AA:BB:CC"}})
		k.mustOK(k.op(), http.MethodPost, "/nodes/pve/lxc/201/status/start", nil)
		r := k.do(k.op(), http.MethodGet, "/nodes/pve/lxc/201/interfaces", nil)
		wantJSON := `[{"hardware-address":"00:00:00:00:00:00","hwaddr":"00:00:00:00:00:00","inet":"127.0.0.1/8","inet6":"::1/128",` +
			`"ip-addresses":[{"ip-address":"127.0.0.1","ip-address-type":"inet","prefix":8},{"ip-address":"::1","ip-address-type":"inet6","prefix":128}],"name":"lo"},` +
			`{"hardware-address":"bc:24:11:aa:bb:cc","hwaddr":"bc:24:11:aa:bb:cc","inet":"127.1.0.201/8",` +
			`"ip-addresses":[{"ip-address":"127.1.0.201","ip-address-type":"inet","prefix":8}],"name":"eth0"}]`
		if r.status != 200 || canonJSON(r.data) != canonJSON([]byte(wantJSON)) {
			t.Errorf("interfaces: %d %s\nwant %s", r.status, r.data, wantJSON)
		}
		k.mustOK(k.op(), http.MethodPost, "/nodes/pve/lxc/201/status/stop", nil)
		if r := k.do(k.op(), http.MethodGet, "/nodes/pve/lxc/201/interfaces", nil); r.status != 200 || string(r.data) != "null" {
			t.Errorf("interfaces of a stopped CT: %d %s", r.status, r.data)
		}
	})
}

// Item 6: tags are stored as get_unique_tags makes them.
func TestFidelity_tags(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		op := k.op()
		k.create(op, "101", url.Values{"tags": {"Zeta;alpha;alpha"}})
		if got := k.config("101", false)["tags"]; got != "alpha;zeta" {
			t.Errorf("created with Zeta;alpha;alpha: tags %v", got)
		}
		k.ok(op, http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"tags": {"web,DB prod;db"}}, nil)
		if got := k.config("101", false)["tags"]; got != "db;prod;web" {
			t.Errorf("PUT web,DB prod;db: tags %v", got)
		}
		var list []map[string]any
		k.ok(op, http.MethodGet, "/nodes/pve/lxc", nil, &list)
		if len(list) != 1 || list[0]["tags"] != "db;prod;web" {
			t.Errorf("lxc list tags: %v", list)
		}
		want(t, "a tag PVE's format refuses", k.do(op, http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"tags": {"ok;-bad"}}),
			400, "Parameter verification failed.\n", map[string]string{"tags": "invalid format - invalid characters in tag\n"})
	})
}

// Item 12, 15 and 17 (create): a pool that does not exist is
// check_pool_exist's 403; unique without restore is the schema's
// "requires" error in each release's wording; ha-managed needs
// Sys.Console on / first.
func TestFidelity_createChecks(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, version string) {
		base := url.Values{"vmid": {"120"}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}, "rootfs": {"local-lvm:1"}}
		with := func(kv ...string) url.Values {
			p := url.Values{}
			for key, v := range base {
				p[key] = v
			}
			for i := 0; i+1 < len(kv); i += 2 {
				p.Set(kv[i], kv[i+1])
			}
			return p
		}
		want(t, "missing pool", k.do(k.op(), http.MethodPost, "/nodes/pve/lxc", with("pool", "nope")),
			403, "Permission check failed (pool 'nope' does not exist)\n", nil)
		want(t, "missing pool on restore", k.do(k.op(), http.MethodPost, "/nodes/pve/lxc", with("pool", "nope", "restore", "1", "ostemplate", "local:backup/vzdump-lxc-1-2026_01_01-00_00_00.tar.zst")),
			403, "Permission check failed (pool 'nope' does not exist)\n", nil)
		requires := map[string]string{"9.1": "missing property required by 'unique'", "8.4": "missing property - 'unique' requires this property"}[version]
		want(t, "unique without restore", k.do(k.op(), http.MethodPost, "/nodes/pve/lxc", with("unique", "1")),
			400, "Parameter verification failed.\n", map[string]string{"restore": requires})
		if version == "9.1" { // ha-managed is new in PVE 9
			want(t, "ha-managed without Sys.Console", k.do(k.op(), http.MethodPost, "/nodes/pve/lxc", with("ha-managed", "1")),
				403, "Permission check failed (/, Sys.Console)\n", nil)
			want(t, "ha-managed restore without Sys.Console", k.do(k.op(), http.MethodPost, "/nodes/pve/lxc", with("ha-managed", "1", "restore", "1")),
				403, "Permission check failed (/, Sys.Console)\n", nil)
		}
	})
}

// Item 16: vmstatus reports the pressure* values only from PVE 9 on.
func TestFidelity_pressure(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, version string) {
		k.create(k.op(), "101", nil)
		k.mustOK(k.op(), http.MethodPost, "/nodes/pve/lxc/101/status/start", nil)
		var st map[string]any
		k.ok(k.op(), http.MethodGet, "/nodes/pve/lxc/101/status/current", nil, &st)
		var list []map[string]any
		k.ok(k.op(), http.MethodGet, "/nodes/pve/lxc", nil, &list)
		for what, m := range map[string]map[string]any{"status/current": st, "lxc list": list[0]} {
			_, has := m["pressurememorysome"]
			if has != (version == "9.1") {
				t.Errorf("%s on %s: pressurememorysome present %v (%v)", what, version, has, keysOf(m))
			}
		}
	})
}

// Item 17 (config): timezone must be "host", "UTC" or a zone of zone.tab;
// a hookscript (root@pam only) must be an executable snippet.
func TestFidelity_timezoneAndHookscript(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		k.create(k.op(), "101", nil)
		cfg := "/nodes/pve/lxc/101/config"
		want(t, "unknown time zone", k.do(k.op(), http.MethodPut, cfg, url.Values{"timezone": {"Mars/Base"}}),
			400, "Parameter verification failed.\n", map[string]string{"timezone": "invalid format - invalid time zone 'Mars/Base'\n"})
		for _, tz := range []string{"Europe/Vienna", "host", "UTC"} {
			k.ok(k.op(), http.MethodPut, cfg, url.Values{"timezone": {tz}}, nil)
		}

		root := k.rootTicket()
		hook := "local:snippets/hook.sh"
		want(t, "hookscript by a token", k.do(k.root(), http.MethodPut, cfg, url.Values{"hookscript": {hook}}),
			403, "Permission check failed (changing the hookscript is only allowed for root@pam)\n", nil)
		want(t, "missing hookscript", k.do(root, http.MethodPut, cfg, url.Values{"hookscript": {hook}}),
			500, "script 'local:snippets/hook.sh' does not exist\n", nil)
		want(t, "hookscript outside snippets", k.do(root, http.MethodPut, cfg, url.Values{"hookscript": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}}),
			500, "'local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst' is not in the snippets directory\n", nil)
		path := filepath.Join(k.srv.Cluster().DataDir(), "pve", "local", "snippets", "hook.sh")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		want(t, "hookscript not executable", k.do(root, http.MethodPut, cfg, url.Values{"hookscript": {hook}}),
			500, "script 'local:snippets/hook.sh' is not executable\n", nil)
		if err := os.Chmod(path, 0o755); err != nil {
			t.Fatal(err)
		}
		k.ok(root, http.MethodPut, cfg, url.Values{"hookscript": {hook}}, nil)
		if got := k.config("101", false)["hookscript"]; got != hook {
			t.Errorf("hookscript = %v", got)
		}
	})
}

// An empty value is written as "key: ", which parse_pct_config skips:
// GET config has no such key.
func TestFidelity_emptyValue(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	k.create(k.op(), "101", url.Values{"tags": {"web"}})
	k.ok(k.op(), http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"tags": {""}}, nil)
	if v, ok := k.config("101", false)["tags"]; ok {
		t.Errorf("tags= left tags %q in GET config", v)
	}
}

// Item 14: an exception inside the restore worker is interpolated into
// "unable to restore CT <vmid> - $err", so its "403 " stays, as it does
// for vzdump's own permission check; the task log's last line says it too.
func TestFidelity_restoreTaskPermission(t *testing.T) {
	t.Parallel()
	eachVersion(t, func(t *testing.T, k *e2e, _ string) {
		k.create(k.op(), "101", url.Values{"net0": {"name=eth0,bridge=vmbr0,ip=dhcp"}})
		k.mustOK(k.root(), http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"101"}, "storage": {"local"}, "mode": {"stop"}, "compress": {"zstd"}})
		var content []map[string]any
		k.ok(k.op(), http.MethodGet, "/nodes/pve/storage/local/content", url.Values{"content": {"backup"}}, &content)
		if len(content) != 1 {
			t.Fatalf("backups: %v", content)
		}
		// VM.Backup is enough to restore over the CT, but its NIC needs SDN.Use.
		k.ok(k.root(), http.MethodPost, "/access/roles", url.Values{"roleid": {"Restorer"}, "privs": {"VM.Audit,VM.Backup,Datastore.AllocateSpace,Datastore.Audit"}}, nil)
		_, who := k.newUserToken("restorer@pve", "tok", false)
		k.ok(k.root(), http.MethodPut, "/access/acl", url.Values{"path": {"/"}, "roles": {"Restorer"}, "users": {"restorer@pve"}}, nil)
		task := k.task(who, http.MethodPost, "/nodes/pve/lxc", url.Values{"vmid": {"101"}, "ostemplate": {content[0]["volid"].(string)},
			"restore": {"1"}, "force": {"1"}, "storage": {"local-lvm"}})
		const msg = "unable to restore CT 101 - 403 Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)"
		if task.ExitStatus != msg || !task.has("TASK ERROR: "+msg) {
			t.Errorf("restore without SDN.Use: exitstatus %q, log:\n%s", task.ExitStatus, strings.Join(task.log, "\n"))
		}
	})
}

// PVE 9's env is not a config line of its own: write_pct_config writes
// one lxc.environment.runtime line per variable after the other keys,
// and the digest hashes that file.
func TestFidelity_envInConfigFile(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	k.create(k.op(), "101", nil)
	k.ok(k.root(), http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"env": {"A=1\x00B=two words"}}, nil)
	text, _ := k.srv.Cluster().ConfigText(101)
	if !strings.HasSuffix(text, "unprivileged: 1\nlxc.environment.runtime: A=1\nlxc.environment.runtime: B=two words\n") {
		t.Errorf("config file:\n%s", text)
	}
	conf := k.config("101", false)
	if conf["env"] != "A=1\x00B=two words" || conf["digest"] != sha1Hex(text) {
		t.Errorf("env %q digest %v (file SHA-1 %s)", conf["env"], conf["digest"], sha1Hex(text))
	}
}
