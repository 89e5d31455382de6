package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/corralhq/corral/internal/testutil/refdata"
)

// jsonKind names a JSON value's type as the wire shows it.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// sameShape compares an object from the emulator with PVE's: the same
// keys (except the ones named optional, which may be absent on either
// side) and, key by key, the same JSON types, recursively for objects.
func sameShape(t *testing.T, where string, got, want map[string]any, optional ...string) {
	t.Helper()
	for k, wv := range want {
		gv, ok := got[k]
		if !ok {
			if !slices.Contains(optional, k) {
				t.Errorf("%s: key %q missing (PVE sends %s)", where, k, jsonKind(wv))
			}
			continue
		}
		if jsonKind(gv) != jsonKind(wv) {
			t.Errorf("%s: %q is %s %v, PVE sends %s %v", where, k, jsonKind(gv), gv, jsonKind(wv), wv)
			continue
		}
		if gm, ok := gv.(map[string]any); ok {
			sameShape(t, where+"."+k, gm, wv.(map[string]any))
		}
	}
	for k, gv := range got {
		if _, ok := want[k]; !ok && !slices.Contains(optional, k) {
			t.Errorf("%s: extra key %q = %v that PVE does not send", where, k, gv)
		}
	}
}

// fixtureData reads a success fixture's "data" (and its top-level keys).
func fixtureData(t *testing.T, name string) (any, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(refdata.Dir(t), "pve-api", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return body["data"], slices.Sorted(maps.Keys(body))
}

// TestResponseShapes rebuilds the situation PVE's recorded replies show
// (a running workload with a pet from keeper 900, a pending change, a
// moved volume) and compares each reply's shape with the recording.
func TestResponseShapes(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	op := k.op()
	k.create(op, "900", url.Values{"mp0": {"local-lvm:1,mp=/pet"}, "tags": {"pet-volumes"}})
	k.create(op, "101", url.Values{"mp1": {"local-lvm:1,mp=/var/cache/app"}, "tags": {"app;web"}, "cores": {"2"},
		"features": {"nesting=1"}, "onboot": {"1"}, "net0": {"name=eth0,bridge=vmbr0,firewall=1,ip=dhcp"}})
	k.ok(op, http.MethodPut, "/nodes/pve/lxc/900/config", url.Values{"delete": {"mp0"}}, nil)
	k.ok(op, http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"mp0": {"local-lvm:vm-900-disk-1,mp=/srv/data,backup=1"}}, nil)
	k.mustOK(op, http.MethodPost, "/nodes/pve/lxc/101/status/start", nil)
	k.ok(op, http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"nameserver": {"10.0.0.53"}, "delete": {"mp0"}}, nil)

	get := func(path string, params url.Values) (any, []string) {
		t.Helper()
		r := k.do(op, http.MethodGet, path, params)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %q", path, r.status, r.msg)
		}
		var v any
		k.decode(r.data, &v)
		return v, slices.Sorted(maps.Keys(r.raw))
	}
	topKeys := func(name string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: top-level keys %v, PVE sends %v", name, got, want)
		}
	}

	t.Run("config", func(t *testing.T) {
		want, wk := fixtureData(t, "lxc-config-101.json")
		got, gk := get("/nodes/pve/lxc/101/config", nil)
		topKeys("config", gk, wk)
		// nameserver is pending here; the fixture's CT has none.
		sameShape(t, "config", got.(map[string]any), want.(map[string]any), "nameserver", "mp0")
	})
	t.Run("pending", func(t *testing.T) {
		want, _ := fixtureData(t, "lxc-pending-101.json")
		got, _ := get("/nodes/pve/lxc/101/pending", nil)
		byKey := func(v any) map[string]map[string]any {
			out := map[string]map[string]any{}
			for _, e := range v.([]any) {
				m := e.(map[string]any)
				out[m["key"].(string)] = m
			}
			return out
		}
		g, w := byKey(got), byKey(want)
		for _, key := range []string{"arch", "cores", "digest", "mp0", "nameserver"} {
			if g[key] == nil {
				t.Errorf("pending lacks %s", key)
				continue
			}
			sameShape(t, "pending "+key, g[key], w[key])
		}
	})
	t.Run("list", func(t *testing.T) {
		want, wk := fixtureData(t, "lxc-list.json")
		got, gk := get("/nodes/pve/lxc", nil)
		topKeys("list", gk, wk)
		pick := func(v any, vmid float64) map[string]any {
			for _, e := range v.([]any) {
				if m := e.(map[string]any); m["vmid"] == vmid {
					return m
				}
			}
			t.Fatalf("vmid %v not listed", vmid)
			return nil
		}
		sameShape(t, "list running", pick(got, 101), pick(want, 101))
		sameShape(t, "list stopped", pick(got, 900), pick(want, 900))
	})
	t.Run("status", func(t *testing.T) {
		want, wk := fixtureData(t, "lxc-status-current-running.json")
		got, gk := get("/nodes/pve/lxc/101/status/current", nil)
		topKeys("status", gk, wk)
		sameShape(t, "status", got.(map[string]any), want.(map[string]any))
	})
	t.Run("task", func(t *testing.T) {
		mv := k.mustOK(op, http.MethodPost, "/nodes/pve/lxc/900/move_volume", url.Values{"volume": {"unused0"}, "target-vmid": {"101"}, "target-volume": {"unused1"}})
		want, wk := fixtureData(t, "task-status-move-volume-ok.json")
		got, gk := get("/nodes/pve/tasks/"+url.PathEscape(mv.UPID)+"/status", nil)
		topKeys("task status", gk, wk)
		sameShape(t, "task status", got.(map[string]any), want.(map[string]any))
		wantLog, lk := fixtureData(t, "task-log.json")
		gotLog, glk := get("/nodes/pve/tasks/"+url.PathEscape(mv.UPID)+"/log", nil)
		topKeys("task log", glk, lk)
		for i, l := range gotLog.([]any) {
			sameShape(t, fmt.Sprintf("log line %d", i), l.(map[string]any), wantLog.([]any)[0].(map[string]any))
		}
	})
	t.Run("storage content", func(t *testing.T) {
		want, wk := fixtureData(t, "storage-content-lvmthin.json")
		got, gk := get("/nodes/pve/storage/local-lvm/content", nil)
		topKeys("content", gk, wk)
		w0 := want.([]any)[0].(map[string]any)
		for _, e := range got.([]any) {
			m := e.(map[string]any)
			sameShape(t, "content "+fmt.Sprint(m["volid"]), m, w0)
		}
	})
	t.Run("permissions", func(t *testing.T) {
		want, _ := fixtureData(t, "access-permissions-token.json")
		got, _ := get("/access/permissions", nil)
		wv := want.(map[string]any)["/vms"].(map[string]any)
		for path, privs := range got.(map[string]any) {
			for p, v := range privs.(map[string]any) {
				if jsonKind(v) != jsonKind(wv["VM.Audit"]) || (v != float64(0) && v != float64(1)) {
					t.Errorf("permissions %s %s = %v", path, p, v)
				}
			}
		}
	})
	t.Run("sync and async writes", func(t *testing.T) {
		for _, c := range []struct {
			fixture, method, path string
			params                url.Values
		}{
			{"put-config-returns-null.json", http.MethodPut, "/nodes/pve/lxc/900/config", url.Values{"description": {"keeper"}}},
			{"post-returns-upid.json", http.MethodPost, "/nodes/pve/lxc/101/status/stop", nil},
		} {
			want, wk := fixtureData(t, c.fixture)
			r := k.do(op, c.method, c.path, c.params)
			gk := slices.Sorted(maps.Keys(r.raw))
			topKeys(c.fixture, gk, wk)
			var got any
			json.Unmarshal(r.data, &got)
			if jsonKind(got) != jsonKind(want) {
				t.Errorf("%s: data %s, PVE sends %s", c.path, r.data, jsonKind(want))
			}
		}
	})
}
