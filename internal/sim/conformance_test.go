package sim

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testutil/refdata"
)

// apidocMethods reads one of PVE's own API dumps and returns every
// "METHOD /path" it defines.
func apidocMethods(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(refdata.Dir(t), "pve-api", file))
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	type node struct {
		Path     string                     `json:"path"`
		Info     map[string]json.RawMessage `json:"info"`
		Children []node                     `json:"children"`
	}
	var tree []node
	if err := json.Unmarshal(b, &tree); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	out := map[string]bool{}
	var walk func(n node)
	walk = func(n node) {
		for m := range n.Info {
			out[m+" "+n.Path] = true
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, n := range tree {
		walk(n)
	}
	if len(out) < 100 {
		t.Fatalf("%s: only %d methods; not PVE's API dump?", file, len(out))
	}
	return out
}

// TestConformance checks that every served route is a method of PVE's
// schema for the emulated version, that notServed names real endpoints
// that are indeed not served, and that anything else answers 501 as
// pveproxy does for an unknown method.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ version, file string }{{"9.1", "apidoc.json"}, {"8.4", "apidoc-pve8.json"}} {
		t.Run(tc.version, func(t *testing.T) {
			schema := apidocMethods(t, tc.file)
			k := openE2E(t, Options{Dir: t.TempDir(), Version: tc.version, TimeScale: zeroScale()})
			routes := k.srv.Routes()
			slices.Sort(routes)
			for _, r := range routes {
				if !schema[r] {
					t.Errorf("route %s is not in PVE %s's schema (%s)", r, tc.version, tc.file)
				}
			}
			for _, r := range slices.Sorted(maps.Keys(notServed)) {
				why := notServed[r]
				if !schema[r] {
					t.Errorf("notServed names %s, which PVE %s does not have", r, tc.version)
				}
				if slices.Contains(routes, r) {
					t.Errorf("%s is both served and in notServed", r)
				}
				t.Logf("not served: %s (%s)", r, why)
			}
			t.Logf("PVE %s: %d routes served of %d schema methods", tc.version, len(routes), len(schema))

			// Served, unknown and deliberately unserved paths over HTTPS.
			root := k.root()
			for _, c := range []struct {
				method, path string
				status       int
				msg          string
			}{
				{"GET", "/version", 200, ""},
				// pveproxy's 501 message has no trailing newline.
				{"GET", "/nodes/pve/lxc/100/nonsense", 501, "Method 'GET /nodes/pve/lxc/100/nonsense' not implemented"},
				{"GET", "/no/such/thing", 501, "Method 'GET /no/such/thing' not implemented"},
				{"PATCH", "/version", 501, "Method 'PATCH /version' not implemented"},
				{"POST", "/nodes/pve/lxc/100/status/suspend", 501, "Method 'POST /nodes/pve/lxc/100/status/suspend' not implemented"},
				{"POST", "/nodes/pve/qemu/100/status/suspend", 501, "Method 'POST /nodes/pve/qemu/100/status/suspend' not implemented"},
			} {
				r := k.do(root, c.method, c.path, nil)
				if r.status != c.status || r.msg != c.msg {
					t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, r.status, r.msg, c.status, c.msg)
				}
				if c.status != 200 && string(r.raw["data"]) != "null" {
					t.Errorf("%s %s: data %s, want null", c.method, c.path, r.raw["data"])
				}
			}
			var ver struct {
				Version string `json:"version"`
				Release string `json:"release"`
			}
			k.ok(root, http.MethodGet, "/version", nil, &ver)
			if !strings.HasPrefix(ver.Version, tc.version+".") || ver.Release != tc.version {
				t.Errorf("GET /version = %+v in %s mode", ver, tc.version)
			}
		})
	}
}
