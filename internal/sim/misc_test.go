package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPVE8Mode: the 8.4 emulator creates a privileged CT when unprivileged
// is not given (pve-container 5.x) and has no keepattrs; 9.1 defaults to
// unprivileged.
func TestPVE8Mode(t *testing.T) {
	t.Parallel()
	tmpl := url.Values{"ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}, "rootfs": {"local-lvm:1"}}
	with := func(kv ...string) url.Values {
		p := url.Values{}
		for key, v := range tmpl {
			p[key] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Set(kv[i], kv[i+1])
		}
		return p
	}
	for _, c := range []struct {
		version, unpriv string
	}{{"8.4", "0"}, {"9.1", "1"}} {
		t.Run(c.version, func(t *testing.T) {
			k := openE2E(t, Options{Dir: t.TempDir(), Version: c.version, TimeScale: zeroScale()})
			tk := k.rootTicket()
			k.mustOK(tk, http.MethodPost, "/nodes/pve/lxc", with("vmid", "170"))
			conf := k.config("170", false)
			got, ok := conf["unprivileged"]
			switch c.unpriv {
			case "1":
				if got != float64(1) {
					t.Errorf("9.1 default: unprivileged = %v", got)
				}
			case "0":
				if ok && got != float64(0) {
					t.Errorf("8.4 default: unprivileged = %v", got)
				}
			}
			r := k.do(k.op(), http.MethodPost, "/nodes/pve/lxc", with("vmid", "171", "unprivileged", "1", "mp0", "local-lvm:1,mp=/d,keepattrs=1"))
			if c.version == "8.4" {
				if r.status != 400 || r.errs["mp0"] != "invalid format - invalid key in comma-separated list property: keepattrs\n" {
					t.Errorf("8.4 keepattrs: %d %q %q", r.status, r.msg, r.errs)
				}
			} else if r.status != 200 {
				t.Errorf("9.1 keepattrs: %d %q %v", r.status, r.msg, r.errs)
			}
		})
	}
}

// TestJSONBody: pveproxy takes JSON bodies too; booleans and numbers
// become PVE's string forms.
func TestJSONBody(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	body, _ := json.Marshal(map[string]any{"vmid": 180, "ostemplate": "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst",
		"rootfs": "local-lvm:1", "unprivileged": true, "memory": 256, "onboot": false})
	req, _ := http.NewRequest(http.MethodPost, k.srv.URL()+"/api2/json/nodes/pve/lxc", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "PVEAPIToken="+k.srv.Credentials().OperatorToken)
	r := k.send(req)
	if r.status != 200 {
		t.Fatalf("JSON create: %d %q %v", r.status, r.msg, r.errs)
	}
	var upid string
	k.decode(r.data, &upid)
	// Without nesting PVE warns about systemd in the template.
	if st := k.wait(k.op(), upid); st.ExitStatus != "OK" && st.ExitStatus != "WARNINGS: 1" {
		t.Fatalf("create ended %q:\n%s", st.ExitStatus, strings.Join(st.log, "\n"))
	}
	conf := k.config("180", false)
	if conf["memory"] != float64(256) || conf["unprivileged"] != float64(1) || conf["onboot"] != float64(0) {
		t.Errorf("config from a JSON body: %v", conf)
	}
	bad, _ := http.NewRequest(http.MethodPut, k.srv.URL()+"/api2/json/nodes/pve/lxc/180/config", bytes.NewReader([]byte("{nope")))
	bad.Header.Set("Content-Type", "application/json")
	bad.Header.Set("Authorization", "PVEAPIToken="+k.srv.Credentials().OperatorToken)
	if r := k.send(bad); r.status != 400 {
		t.Errorf("broken JSON body: %d %q", r.status, r.msg)
	}
}

// TestStorageAndAccess: the storage and access routes' permission rules.
func TestStorageAndAccess(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	op := k.op()
	k.create(op, "190", url.Values{"mp0": {"local-lvm:1,mp=/d"}})
	k.ok(op, http.MethodPut, "/nodes/pve/lxc/190/config", url.Values{"delete": {"mp0"}}, nil)

	// A stranger (a user with a privilege-separated token and no ACL).
	nopeID, nope := k.newUserToken("nope@pve", "tk", true)

	vol := url.PathEscape("local-lvm:vm-190-disk-1")
	if r := k.do(nope, http.MethodDelete, "/nodes/pve/storage/local-lvm/content/"+vol, nil); r.status != 403 {
		t.Errorf("stranger deletes a volume: %d %q", r.status, r.msg)
	}
	var lxcs []any
	k.ok(nope, http.MethodGet, "/nodes/pve/lxc", nil, &lxcs)
	if len(lxcs) != 0 {
		t.Errorf("stranger lists %d CTs; PVE lists only what VM.Audit allows", len(lxcs))
	}
	var perms map[string]map[string]int
	k.ok(nope, http.MethodGet, "/access/permissions", nil, &perms)
	if len(perms) != 0 {
		t.Errorf("stranger's own permissions: %v", perms)
	}
	if r := k.do(nope, http.MethodGet, "/access/permissions", url.Values{"userid": {"corral@pve"}}); r.status != 403 {
		t.Errorf("stranger reads another user's permissions: %d %q", r.status, r.msg)
	}
	k.ok(op, http.MethodGet, "/access/permissions", nil, &perms)
	if perms["/"]["VM.Allocate"] != 1 || perms["/"]["Sys.Modify"] != 0 {
		t.Errorf("operator token permissions: %v", perms)
	}
	if r := k.do(op, http.MethodPut, "/access/acl", url.Values{"path": {"/"}, "roles": {"Administrator"}, "tokens": {nopeID}}); r.status != 403 {
		t.Errorf("operator grants Administrator: %d %q", r.status, r.msg)
	}

	// The operator (Datastore.Allocate) deletes the unused volume: a task.
	st := k.mustOK(op, http.MethodDelete, "/nodes/pve/storage/local-lvm/content/"+vol, nil)
	if st.Type != "imgdel" {
		t.Errorf("delete task type %q", st.Type)
	}
	if left := k.volumeFiles("190"); len(left) != 1 {
		t.Errorf("after deleting disk-1, files for 190: %v (want only the rootfs)", left)
	}
	if r := k.do(op, http.MethodGet, "/nodes/pve/storage/local-lvm/content/"+vol, nil); r.status == 200 {
		t.Errorf("deleted volume still answers: %s", r.data)
	}
}
