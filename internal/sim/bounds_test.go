package sim

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// Issue 27: the emulator checks a request body against size, depth and
// value limits before decoding it, and says which limit fired; the admin
// API reads at most 1 MiB.
func TestRequestBody_bounded(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	for _, tc := range []struct{ name, body, want string }{
		{"deep JSON", `{"description":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`, "nested more than 32 levels"},
		{"many JSON values", `{"tags":[` + strings.Repeat("0,", 20_000) + `0]}`, "more than 10000 values"},
		{"too large", `{"description":"` + strings.Repeat("x", 16<<20) + `"}`, "more than 16777216 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPut, k.srv.URL()+"/api2/json/nodes/pve/lxc/100/config", bytes.NewReader([]byte(tc.body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "PVEAPIToken="+k.srv.Credentials().OperatorToken)
			if r := k.send(req); r.status != 400 || !strings.Contains(r.msg, tc.want) {
				t.Fatalf("%d %q, want 400 with %q", r.status, r.msg, tc.want)
			}
		})
	}
	t.Run("admin body", func(t *testing.T) {
		req := k.request(k.root(), http.MethodPost, "/x", nil)
		req.URL.Path = "/_corral/faults"
		req.Body = nopBody(`{"seed":1,"match":"` + strings.Repeat("x", 2<<20) + `"}`)
		req.Header.Set("Content-Type", "application/json")
		if r := k.send(req); r.status == 200 || !strings.Contains(r.msg, "request body too large") {
			t.Fatalf("%d %q, want the 1 MiB limit", r.status, r.msg)
		}
	})
}
