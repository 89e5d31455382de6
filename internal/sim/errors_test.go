package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testutil/refdata"
)

// pveFixture is a recorded PVE error reply: its status line and body.
type pveFixture struct {
	HTTP string                     `json:"_http"`
	Body map[string]json.RawMessage `json:"body"`
}

func loadFixture(t *testing.T, name string) pveFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(refdata.Dir(t), "pve-api", "fixtures", name))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	var f pveFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return f
}

// checkEnvelopeShape compares a reply with a recorded one: the same
// status line, the same top-level keys, and equal data/errors values.
func checkEnvelopeShape(t *testing.T, r e2eResp, f pveFixture) {
	t.Helper()
	if got, want := itoa(r.status)+" "+r.reason, strings.TrimPrefix(f.HTTP, "HTTP/1.1 "); got != want {
		t.Errorf("status line %q, PVE sends %q", got, want)
	}
	gotKeys, wantKeys := slices.Sorted(maps.Keys(r.raw)), slices.Sorted(maps.Keys(f.Body))
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("body keys %v, PVE sends %v", gotKeys, wantKeys)
	}
	for _, k := range []string{"data", "errors", "message"} {
		if canonJSON(r.raw[k]) != canonJSON(f.Body[k]) {
			t.Errorf("%s = %s, PVE sends %s", k, r.raw[k], f.Body[k])
		}
	}
}

// canonJSON re-encodes a JSON value so that equal values compare equal.
func canonJSON(raw json.RawMessage) string {
	if raw == nil {
		return "<missing>"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "<invalid " + string(raw) + ">"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func nopBody(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }

// errorWorld is the emulator the error table runs against: CTs in the
// states the checks need, and a privilege-separated token whose user has
// no role at all.
type errorWorld struct {
	*e2e
	ticket  e2eCaller // root@pam by password, with CSRF
	noRole  e2eCaller // nope@pve!tk: privsep token with the operator role, user without
	running string
}

func newErrorWorld(t *testing.T) *errorWorld {
	k := newE2E(t)
	w := &errorWorld{e2e: k, running: "102"}
	w.ticket = k.rootTicket()
	root := k.root()
	k.create(k.op(), "101", nil)
	k.create(k.op(), "102", nil)
	k.mustOK(k.op(), http.MethodPost, "/nodes/pve/lxc/102/status/start", nil)
	// A privileged CT can only be made by root (Sys.Modify on / on 9.1).
	k.create(w.ticket, "103", url.Values{"unprivileged": {"0"}})
	k.create(k.op(), "104", nil)
	k.create(k.op(), "900", url.Values{"protection": {"1"}})

	full, noRole := k.newUserToken("nope@pve", "tk", true)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/"}, "roles": {"CorralOperator"}, "tokens": {full}}, nil)
	w.noRole = noRole
	return w
}

// TestErrorStrings sends every request behaviour.md names an exact error
// for (among the routes served) and compares status, message and the
// per-parameter errors byte for byte; where PVE's reply was recorded the
// status line and body keys are compared with the fixture too.
func TestErrorStrings(t *testing.T) {
	t.Parallel()
	w := newErrorWorld(t)
	op, root, ticket := w.op(), w.root(), w.ticket
	noCSRF := e2eCaller{ticket: ticket.ticket}
	tmpl := "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"
	v := func(kv ...string) url.Values {
		out := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	type tc struct {
		name    string
		who     e2eCaller
		method  string
		path    string
		params  url.Values
		status  int
		msg     string            // exact message ("" for 200)
		errs    map[string]string // exact per-parameter errors
		fixture string            // recorded PVE reply to compare the shape with
		before  func(t *testing.T)
	}
	cfg := "/nodes/pve/lxc/101/config"
	tests := []tc{
		// §0 basics
		{name: "missing CT", who: op, method: "GET", path: "/nodes/pve/lxc/4242/config",
			status: 500, msg: "Configuration file 'nodes/pve/lxc/4242.conf' does not exist\n", fixture: "error-500-no-such-ct.json"},
		{name: "missing CT status", who: op, method: "GET", path: "/nodes/pve/lxc/4242/status/current",
			status: 500, msg: "Configuration file 'nodes/pve/lxc/4242.conf' does not exist\n"},
		{name: "mp0 without mp", who: op, method: "PUT", path: cfg, params: v("mp0", "local-lvm:1"),
			status: 400, msg: "Parameter verification failed.\n",
			errs:    map[string]string{"mp0": "invalid format - format error\nmp0.mp: property is missing and it is not optional\n"},
			fixture: "error-400-param.json"},
		{name: "type check", who: op, method: "PUT", path: cfg, params: v("cores", "many"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"cores": "type check ('integer') failed - got 'many'"}},
		{name: "enum", who: op, method: "PUT", path: cfg, params: v("ostype", "windows"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"ostype": "value 'windows' does not have a value in the enumeration 'debian, devuan, ubuntu, centos, fedora, opensuse, archlinux, alpine, gentoo, nixos, unmanaged'"}},
		{name: "minimum", who: op, method: "PUT", path: cfg, params: v("memory", "1"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"memory": "value must have a minimum value of 16"}},
		{name: "unknown property", who: op, method: "PUT", path: cfg, params: v("colour", "blue"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"colour": "property is not defined in schema and the schema does not allow additional properties"}},
		{name: "missing required", who: op, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "150"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"ostemplate": "property is missing and it is not optional"}},
		{name: "no options", who: op, method: "PUT", path: cfg, status: 500, msg: "no options specified\n"},
		{name: "delete required", who: op, method: "PUT", path: cfg, params: v("delete", "memory"),
			status: 500, msg: "unable to delete required option 'memory'\n"},
		{name: "delete unknown", who: op, method: "PUT", path: cfg, params: v("delete", "colour"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"delete": "unknown option 'colour'"}},
		{name: "delete and set", who: op, method: "PUT", path: cfg, params: v("delete", "cores", "cores", "2"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"delete": "you can't use '-cores' and -delete cores' at the same time"}},
		{name: "unprivileged read-only", who: op, method: "PUT", path: cfg, params: v("unprivileged", "0"),
			status: 500, msg: "unable to modify read-only option: 'unprivileged'\n"},
		{name: "digest mismatch", who: op, method: "PUT", path: cfg, params: v("cores", "2", "digest", strings.Repeat("0", 40)),
			status: 500, msg: "detected modified configuration - file changed by other user? Try again.\n"},
		{name: "vmid taken", who: op, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "101", "ostemplate", tmpl, "rootfs", "local-lvm:1", "unprivileged", "1"),
			status: 500, msg: "CT 101 already exists on node 'pve'\n"},
		{name: "mp without rootfs", who: op, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "151", "ostemplate", tmpl, "mp0", "local-lvm:1,mp=/data", "unprivileged", "1"),
			status: 500, msg: "mount points configured, but 'rootfs' not set - aborting\n"},
		{name: "skiplock for a token", who: op, method: "POST", path: "/nodes/pve/lxc/101/status/start", params: v("skiplock", "1"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"skiplock": "Only root may use this option."}},

		// power state
		{name: "start running", who: op, method: "POST", path: "/nodes/pve/lxc/102/status/start", status: 500, msg: "CT 102 already running\n"},
		{name: "stop stopped", who: op, method: "POST", path: "/nodes/pve/lxc/101/status/stop", status: 500, msg: "CT 101 not running\n"},
		{name: "shutdown stopped", who: op, method: "POST", path: "/nodes/pve/lxc/101/status/shutdown", status: 500, msg: "CT 101 not running\n"},
		{name: "reboot stopped", who: op, method: "POST", path: "/nodes/pve/lxc/101/status/reboot", status: 500, msg: "VM 101 not running\n"},
		{name: "destroy running", who: op, method: "DELETE", path: "/nodes/pve/lxc/102", status: 500, msg: "unable to destroy CT 102 - container is running\n"},
		{name: "protection", who: op, method: "DELETE", path: "/nodes/pve/lxc/900",
			status: 500, msg: "can't remove CT 900 - protection mode enabled\n", fixture: "error-500-protection.json"},
		{name: "protection drive", who: op, method: "PUT", path: "/nodes/pve/lxc/900/config", params: v("mp0", "local-lvm:1,mp=/data"),
			status: 500, msg: "can't update CT 900 drive 'mp0' - protection mode enabled\n"},

		// §(f) resize
		{name: "shrink", who: op, method: "PUT", path: "/nodes/pve/lxc/101/resize", params: v("disk", "rootfs", "size", "512M"),
			status: 500, msg: "unable to shrink disk size\n"},
		{name: "same size", who: op, method: "PUT", path: "/nodes/pve/lxc/101/resize", params: v("disk", "rootfs", "size", "1G"),
			status: 500, msg: "disk is already at specified size\n"},

		// §(d) move_volume
		{name: "storage and target", who: op, method: "POST", path: "/nodes/pve/lxc/101/move_volume", params: v("volume", "rootfs", "storage", "local-lvm", "target-vmid", "104"),
			status: 500, msg: "either set storage or target-vmid, but not both\n"},
		{name: "neither storage nor target", who: op, method: "POST", path: "/nodes/pve/lxc/101/move_volume", params: v("volume", "rootfs"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{
				"storage":     "both 'storage' and 'target-vmid' missing, either needs to be set",
				"target-vmid": "both 'storage' and 'target-vmid' missing, either needs to be set"}},
		{name: "move rootfs", who: op, method: "POST", path: "/nodes/pve/lxc/101/move_volume", params: v("volume", "rootfs", "target-vmid", "104"),
			status: 500, msg: "Cannot move to/from 'rootfs'\n"},
		{name: "move missing key", who: op, method: "POST", path: "/nodes/pve/lxc/101/move_volume", params: v("volume", "mp7", "target-vmid", "104"),
			status: 500, msg: "volume 'mp7' for container '101' does not exist\n"},
		{name: "move to missing CT", who: op, method: "POST", path: "/nodes/pve/lxc/101/move_volume", params: v("volume", "mp7", "target-vmid", "4242"),
			status: 500, msg: "could not find CT 4242\n"},
		{name: "move running storage", who: op, method: "POST", path: "/nodes/pve/lxc/102/move_volume", params: v("volume", "rootfs", "storage", "local-lvm"),
			status: 500, msg: "cannot move volumes of a running container\n"},

		// storage content types
		{name: "mp on a storage without rootdir", who: op, method: "PUT", path: cfg, params: v("mp3", "local:1,mp=/x"),
			status: 500, msg: "storage 'local' does not allow content type 'rootdir' (Container)\n"},
		{name: "create on a storage without rootdir", who: op, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "156", "ostemplate", tmpl, "rootfs", "local:1", "unprivileged", "1"),
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"storage": "storage 'local' does not support container directories"}},
		{name: "rootfs without storage", who: op, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "157", "ostemplate", tmpl, "rootfs", "1", "unprivileged", "1"),
			status: 500, msg: "Only root can pass arbitrary filesystem paths. at /usr/share/perl5/PVE/Storage.pm line 651.\n"},

		// tasks
		{name: "bad upid", who: op, method: "GET", path: "/nodes/pve/tasks/UPID:nonsense/status",
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"upid": "unable to parse worker upid"}},
		{name: "unknown task", who: op, method: "GET", path: "/nodes/pve/tasks/" + url.PathEscape("UPID:pve:00000001:00000001:00000001:vzstart:101:root@pam:") + "/status",
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"upid": "no such task"}},

		// §(b), §(c): root@pam only, whatever the token
		{name: "bind mount token", who: op, method: "PUT", path: cfg, params: v("mp0", "/srv/data,mp=/data"),
			status: 403, msg: "Permission check failed (mount point type bind is only allowed for root@pam)\n", fixture: "error-403-perm-bindmount.json"},
		{name: "bind mount root token", who: root, method: "PUT", path: cfg, params: v("mp0", "/srv/data,mp=/data"),
			status: 403, msg: "Permission check failed (mount point type bind is only allowed for root@pam)\n"},
		{name: "device mount token", who: op, method: "PUT", path: cfg, params: v("mp0", "/dev/sdb1,mp=/data"),
			status: 403, msg: "Permission check failed (mount point type device is only allowed for root@pam)\n"},
		{name: "bind mount on create", who: op, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "152", "ostemplate", tmpl, "rootfs", "local-lvm:1", "mp0", "/srv,mp=/srv", "unprivileged", "1"),
			status: 403, msg: "Permission check failed (mount point type bind is only allowed for root@pam)\n"},
		{name: "features token", who: op, method: "PUT", path: cfg, params: v("features", "nesting=1,keyctl=1"),
			status: 403, msg: "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)\n"},
		{name: "features root token", who: root, method: "PUT", path: cfg, params: v("features", "keyctl=1"),
			status: 403, msg: "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)\n"},
		{name: "features privileged", who: op, method: "PUT", path: "/nodes/pve/lxc/103/config", params: v("features", "nesting=1"),
			status: 403, msg: "Permission check failed (changing feature flags for privileged container is only allowed for root@pam)\n"},
		{name: "features on create", who: op, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "153", "ostemplate", tmpl, "rootfs", "local-lvm:1", "features", "nesting=1,keyctl=1", "unprivileged", "1"),
			status: 403, msg: "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)\n"},
		{name: "device passthrough", who: op, method: "PUT", path: cfg, params: v("dev0", "/dev/null"),
			status: 403, msg: "Permission check failed (configuring device passthrough is only allowed for root@pam)\n"},
		{name: "hookscript", who: op, method: "PUT", path: cfg, params: v("hookscript", "local:snippets/hook.sh"),
			status: 403, msg: "Permission check failed (changing the hookscript is only allowed for root@pam)\n"},
		{name: "privileged create by operator", who: op, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "154", "ostemplate", tmpl, "rootfs", "local-lvm:1", "unprivileged", "0"),
			status: 403, msg: "Permission check failed (/, Sys.Modify)\n"},
		{name: "privsep token, user without role", who: w.noRole, method: "POST", path: "/nodes/pve/lxc", params: v("vmid", "155", "ostemplate", tmpl, "rootfs", "local-lvm:1", "unprivileged", "1"),
			status: 403, msg: "Permission check failed\n"}, // create_vm: raise_perm_exc() without argument
		{name: "privsep token destroys", who: w.noRole, method: "DELETE", path: "/nodes/pve/lxc/101",
			status: 403, msg: "Permission check failed (/vms/101, VM.Allocate)\n", fixture: "error-403-perm-path.json"},
		{name: "privsep token reads config", who: w.noRole, method: "GET", path: cfg,
			status: 403, msg: "Permission check failed (/vms/101, VM.Audit)\n"},
		{name: "cookie write without CSRF", who: noCSRF, method: "PUT", path: cfg, params: v("cores", "2"),
			status: 401, msg: "Permission denied - invalid csrf token\n"},
		// root@pam by ticket may do what no token can.
		{name: "bind mount root ticket", who: ticket, method: "PUT", path: cfg, params: v("mp0", "/srv/data,mp=/data"), status: 200},
		{name: "features root ticket", who: ticket, method: "PUT", path: cfg, params: v("features", "nesting=1,keyctl=1"), status: 200},
		{name: "features privileged root ticket", who: ticket, method: "PUT", path: "/nodes/pve/lxc/103/config", params: v("features", "nesting=1"), status: 200},
		{name: "same features resent by token", who: op, method: "PUT", path: cfg, params: v("features", "nesting=1,keyctl=1"), status: 200},
		{name: "skiplock root ticket", who: ticket, method: "POST", path: "/nodes/pve/lxc/104/status/start", params: v("skiplock", "1"), status: 200},

		// §(h) locks, held as a backup job would
		{name: "locked config", who: op, method: "PUT", path: "/nodes/pve/lxc/900/config", params: v("cores", "2"),
			status: 500, msg: "CT is locked (backup)\n", fixture: "error-500-locked.json",
			before: func(t *testing.T) { w.holdLock(t, 900, "backup") }},
		{name: "locked destroy", who: op, method: "DELETE", path: "/nodes/pve/lxc/101",
			status: 500, msg: "CT is locked (snapshot)\n",
			before: func(t *testing.T) { w.holdLock(t, 101, "snapshot") }},
		{name: "locked resize", who: op, method: "PUT", path: "/nodes/pve/lxc/101/resize", params: v("disk", "rootfs", "size", "+1G"),
			status: 500, msg: "CT is locked (snapshot)\n"},
		{name: "locked move source", who: op, method: "POST", path: "/nodes/pve/lxc/101/move_volume", params: v("volume", "rootfs", "storage", "local-lvm"),
			status: 500, msg: "CT is locked (snapshot)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			r := w.do(tc.who, tc.method, tc.path, tc.params)
			if r.status != tc.status || r.msg != tc.msg {
				t.Fatalf("%s %s %v:\n got %d %q %v\nwant %d %q %v", tc.method, tc.path, tc.params, r.status, r.msg, r.errs, tc.status, tc.msg, tc.errs)
			}
			if !maps.Equal(r.errs, tc.errs) {
				t.Errorf("errors %q, want %q", r.errs, tc.errs)
			}
			if tc.status == 200 {
				if _, ok := r.raw["data"]; !ok || len(r.raw) != 1 && r.raw["total"] == nil {
					t.Errorf("200 body keys %v, want just data", slices.Collect(maps.Keys(r.raw)))
				}
				if strings.HasPrefix(string(r.data), `"UPID:`) {
					var upid string
					w.decode(r.data, &upid)
					w.wait(tc.who, upid)
				}
				return
			}
			// Every error: data null, message present, reason phrase = first line.
			if string(r.raw["data"]) != "null" {
				t.Errorf("data = %s, want null", r.raw["data"])
			}
			if want := strings.SplitN(tc.msg, "\n", 2)[0]; r.reason != want {
				t.Errorf("reason phrase %q, want %q", r.reason, want)
			}
			if _, has := r.raw["errors"]; has != (tc.errs != nil) {
				t.Errorf("errors key present=%v, want %v", has, tc.errs != nil)
			}
			if tc.fixture != "" {
				f := loadFixture(t, tc.fixture)
				var fmsg string
				json.Unmarshal(f.Body["message"], &fmsg)
				if fmsg == tc.msg {
					checkEnvelopeShape(t, r, f)
				} else {
					t.Errorf("fixture %s has message %q; the table expects %q", tc.fixture, fmsg, tc.msg)
				}
			}
		})
	}
}

// holdLock sets a CT's config lock through the admin API, as a backup job
// holding it would.
func (w *errorWorld) holdLock(t *testing.T, vmid int, lock string) {
	t.Helper()
	req := w.request(w.root(), http.MethodPost, "/x", nil)
	req.URL.Path = "/_corral/lock"
	req.Body = nopBody(`{"vmid":` + itoa(vmid) + `,"lock":"` + lock + `","seconds":60}`)
	req.Header.Set("Content-Type", "application/json")
	r := w.send(req)
	if r.status != 200 {
		t.Fatalf("hold lock: %d %q", r.status, r.msg)
	}
}

// TestTaskErrors: checks PVE runs inside the worker answer 200 with a
// UPID; the task ends with the message as exitstatus and "TASK ERROR:".
func TestTaskErrors(t *testing.T) {
	t.Parallel()
	w := newErrorWorld(t)
	op := w.op()
	w.create(op, "106", url.Values{"mp0": {"local-lvm:1,mp=/q,quota=1"}})
	w.create(op, "107", nil)
	before := w.config("107", false)
	for _, c := range []struct {
		name, method, path string
		params             url.Values
		before             func(t *testing.T)
		exit               string
	}{
		{"start locked", "POST", "/nodes/pve/lxc/101/status/start", nil, func(t *testing.T) { w.holdLock(t, 101, "backup") }, "CT is locked (backup)"},
		{"quota unprivileged", "POST", "/nodes/pve/lxc/106/status/start", nil, nil, "Quotas are not supported by unprivileged containers."},
		{"missing template", "POST", "/nodes/pve/lxc", url.Values{"vmid": {"158"}, "ostemplate": {"local:vztmpl/nope.tar.zst"}, "rootfs": {"local-lvm:1"}, "unprivileged": {"1"}}, nil,
			"unable to create CT 158 - can't find file 'local:vztmpl/nope.tar.zst'"},
		{"move to a storage without rootdir", "POST", "/nodes/pve/lxc/107/move_volume", url.Values{"volume": {"rootfs"}, "storage": {"local"}}, nil,
			"content type 'rootdir' is not available or configured on storage 'local'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.before != nil {
				c.before(t)
			}
			st := w.sub(t).task(op, c.method, c.path, c.params)
			if st.ExitStatus != c.exit {
				t.Errorf("task ended %q, want %q", st.ExitStatus, c.exit)
			}
			if last := st.log[len(st.log)-1]; last != "TASK ERROR: "+c.exit {
				t.Errorf("last log line %q", last)
			}
		})
	}
	// The failed move left CT 107 as it was: no lock, same rootfs, and no
	// stray volume on the target.
	after := w.config("107", false)
	if after["rootfs"] != before["rootfs"] || after["lock"] != nil {
		t.Errorf("after the failed move: %v (before %v)", after, before)
	}
	if r := w.do(op, http.MethodGet, "/nodes/pve/lxc/158/config", nil); r.status != 500 {
		t.Errorf("CT 158 after its failed create: %d %s", r.status, r.data)
	}
}

// TestErrorKindStatus: each domain kind of a *model.Error answers with
// PVE's status, which is also the code the model prints for it in task
// logs (Kind.Code, PerlText); an httpError keeps its own status and
// anything else is a 500.
func TestErrorKindStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{model.Failf("CT 101 is locked (backup)\n"), http.StatusInternalServerError},
		{model.ParamError(map[string]string{"vmid": "bad"}), http.StatusBadRequest},
		{model.PermError("/vms/101, VM.Audit"), http.StatusForbidden},
		{&model.Error{Kind: model.ErrAuth, Message: "authentication failure\n"}, http.StatusUnauthorized},
		{&httpError{status: 595, message: "Connection refused\n"}, 595},
		{io.ErrUnexpectedEOF, http.StatusInternalServerError},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, fmt.Errorf("wrapped: %w", tc.err))
		if rec.Code != tc.want {
			t.Errorf("%v: status %d, want %d", tc.err, rec.Code, tc.want)
		}
		var me *model.Error
		if errors.As(tc.err, &me) && me.Kind.Code() != tc.want {
			t.Errorf("%v: Kind.Code() = %d, the HTTP answer is %d", tc.err, me.Kind.Code(), tc.want)
		}
		var env struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Message == "" {
			t.Errorf("%v: body %q", tc.err, rec.Body)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", model.PermError("")), model.ErrPerm) || errors.Is(model.PermError(""), model.ErrParam) {
		t.Error("errors.Is does not tell the kinds apart")
	}
}
