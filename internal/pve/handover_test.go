package pve_test

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// TestHandOverReads: while on, an answer is kept for the one read after
// it that asks the same, and later reads of that key are fresh; a write
// drops what was kept and ends the hand-over; off, every read is fresh.
func TestHandOverReads(t *testing.T) {
	var reads atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api2/json/cluster/resources":
			reads.Add(1)
			writeData(w, []map[string]any{{"id": "lxc/100", "type": "lxc", "vmid": 100, "node": "pve1"}})
		case "/api2/json/nodes/pve1/lxc/100/config":
			writeData(w, nil)
		default:
			http.NotFound(w, r)
		}
	})
	c := newTestClient(t, h)
	list := func() {
		t.Helper()
		if res, err := c.ClusterResources(ctx(t), "vm"); err != nil || len(res) != 1 {
			t.Fatalf("ClusterResources = %v, %v", res, err)
		}
	}
	want := func(n int32, why string) {
		t.Helper()
		if got := reads.Load(); got != n {
			t.Fatalf("%s: %d reads, want %d", why, got, n)
		}
	}
	list()
	list()
	want(2, "hand-over off")
	c.HandOverReads(true)
	list()
	list()
	want(3, "the second read takes the first's answer")
	list()
	list()
	want(5, "a key handed over is read fresh after")
	c.HandOverReads(true)
	list()
	if err := c.Put(ctx(t), "/nodes/pve1/lxc/100/config", nil, nil); err != nil {
		t.Fatal(err)
	}
	list()
	want(7, "a write drops the kept answer")
	list()
	want(8, "a write ends the hand-over")
	c.HandOverReads(true)
	list()
	c.HandOverReads(false)
	list()
	want(10, "HandOverReads(false) drops the kept answer")
}
