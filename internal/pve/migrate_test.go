package pve_test

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

// TestClient_Migrate checks the request each option set sends.
func TestClient_Migrate(t *testing.T) {
	tests := []struct {
		name string
		opts pve.MigrateOptions
		want url.Values
	}{
		{"target only", pve.MigrateOptions{Target: "pve2"}, url.Values{"target": {"pve2"}}},
		{"restart with timeout", pve.MigrateOptions{Target: "pve3", Restart: true, Timeout: 30}, url.Values{"target": {"pve3"}, "restart": {"1"}, "timeout": {"30"}}},
		{"storage map and limit", pve.MigrateOptions{Target: "pve2", TargetStorage: "local-lvm:fast", BWLimit: 1024},
			url.Values{"target": {"pve2"}, "target-storage": {"local-lvm:fast"}, "bwlimit": {"1024"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got url.Values
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/api2/json/nodes/pve1/lxc/101/migrate" {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				r.ParseForm()
				got = r.PostForm
				writeData(w, "UPID:pve1:0001E240:00000001:6A000000:vzmigrate:101:ctl@pve!ctl:")
			}))
			upid, err := c.Migrate(ctx(t), "pve1", 101, tc.opts)
			if err != nil || upid != "UPID:pve1:0001E240:00000001:6A000000:vzmigrate:101:ctl@pve!ctl:" {
				t.Fatalf("Migrate = %q, %v", upid, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("form (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClient_Migrate_refused: a synchronous refusal is an *APIError with
// PVE's message and no UPID.
func TestClient_Migrate_refused(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(t, w, 500, "can't migrate running container without --online or --restart\n", nil)
	}))
	upid, err := c.Migrate(ctx(t), "pve1", 101, pve.MigrateOptions{Target: "pve2"})
	var apiErr *pve.APIError
	if upid != "" || !errors.As(err, &apiErr) || apiErr.Status != 500 || apiErr.Message != "can't migrate running container without --online or --restart" {
		t.Fatalf("Migrate = %q, %v", upid, err)
	}
}

func TestClient_MigratePrecondition(t *testing.T) {
	c := cannedServer(t, route{"GET", "/nodes/pve2/lxc/101/migrate", []byte(`{"data":{"allowed-nodes":["pve1","pve3"],"not-allowed-nodes":{},"running":1}}`)})
	p, err := c.MigratePrecondition(ctx(t), "pve2", 101)
	if err != nil || !bool(p.Running) || !cmp.Equal(p.AllowedNodes, []string{"pve1", "pve3"}) || len(p.NotAllowedNodes) != 0 {
		t.Fatalf("MigratePrecondition = %+v, %v", p, err)
	}
}
