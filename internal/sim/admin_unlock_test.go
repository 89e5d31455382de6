package sim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// TestAdmin_unlock: POST /_corral/unlock is pct unlock. A CT held in
// lock: create (a failed create's placeholder) refuses root's DELETE until
// it is unlocked, then the normal DELETE removes it; only root may call it.
func TestAdmin_unlock(t *testing.T) {
	t.Parallel()
	k := newClusterE2E(t, "9.1")
	root := k.root()
	k.runOn("pve2", root, http.MethodPost, "/nodes/pve2/lxc", url.Values{"vmid": {"101"}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:1"}})
	if r := k.admin(root, "/_corral/lock", `{"vmid":101,"lock":"create","seconds":600}`); r.status != 200 {
		t.Fatalf("hold lock: %d %q", r.status, r.msg)
	}
	for _, tc := range []struct {
		name   string
		who    e2eCaller
		body   string
		status int
		msg    string
	}{
		{"operator refused", k.op(), `{"vmid":101}`, 403, "Permission check failed (the /_corral/ admin API is for root@pam only)\n"},
		{"no vmid", root, `{}`, 500, "bad unlock request: want {\"vmid\":105}\n"},
		{"unknown CT", root, `{"vmid":999}`, 500, "no CT 999\n"},
	} {
		if r := k.admin(tc.who, "/_corral/unlock", tc.body); r.status != tc.status || r.msg != tc.msg {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.msg, tc.status, tc.msg)
		}
	}
	if r := k.do(root, http.MethodDelete, "/nodes/pve2/lxc/101", nil); r.status == 200 || !strings.Contains(r.msg, "locked (create)") {
		t.Fatalf("DELETE of a CT in lock: create: %d %q, want refused as locked", r.status, r.msg)
	}
	if r := k.admin(root, "/_corral/unlock", `{"vmid":101}`); r.status != 200 {
		t.Fatalf("unlock: %d %q", r.status, r.msg)
	}
	k.runOn("pve2", root, http.MethodDelete, "/nodes/pve2/lxc/101", nil)
	if r := k.do(root, http.MethodGet, "/nodes/pve2/lxc/101/config", nil); r.status == 200 {
		t.Errorf("CT 101 still there after unlock and DELETE")
	}
}
