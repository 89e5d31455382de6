package pve_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/internal/pve"
)

// TestMemoizeSetup: a client that memoizes reads the node list, a node's
// bridges and its full storage list once each; a failed read is read
// again; a filtered storage list and a client that does not memoize read
// every time; a caller's change to an answer does not reach the next.
func TestMemoizeSetup(t *testing.T) {
	var reads atomic.Int32
	var failNext atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		if failNext.Swap(false) {
			writeError(t, w, http.StatusForbidden, "Permission check failed", nil)
			return
		}
		switch r.URL.Path {
		case "/api2/json/nodes":
			writeData(w, []map[string]any{{"node": "pve1", "status": "online"}})
		case "/api2/json/nodes/pve1/network":
			writeData(w, []map[string]any{{"iface": "vmbr0", "type": "bridge"}})
		case "/api2/json/nodes/pve1/storage":
			writeData(w, []map[string]any{{"storage": "local", "content": "vztmpl"}})
		default:
			http.NotFound(w, r)
		}
	})
	plain := newTestClient(t, h)
	memo := newTestClient(t, h)
	memo.MemoizeSetup()
	failNext.Store(true)
	if _, err := memo.Nodes(ctx(t)); err == nil {
		t.Fatal("the failed read answered")
	}
	for range 3 {
		nodes, err := memo.Nodes(ctx(t))
		if err != nil || len(nodes) != 1 {
			t.Fatalf("Nodes = %v, %v", nodes, err)
		}
		nodes[0].Node = "changed by a caller"
		if _, err := memo.Bridges(ctx(t), "pve1"); err != nil {
			t.Fatal(err)
		}
		if _, err := memo.StorageList(ctx(t), "pve1", ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.Load(); n != 4 {
		t.Errorf("memoizing client: %d reads, want 4 (a failed and a good node list, bridges, storages)", n)
	}
	if nodes, _ := memo.Nodes(ctx(t)); nodes[0].Node != "pve1" {
		t.Errorf("a caller's change reached the next answer: %q", nodes[0].Node)
	}
	reads.Store(0)
	memo.StorageList(ctx(t), "pve1", "rootdir")
	memo.StorageList(ctx(t), "pve1", "rootdir")
	plain.Nodes(ctx(t))
	plain.Nodes(ctx(t))
	if n := reads.Load(); n != 4 {
		t.Errorf("filtered storage lists and a plain client: %d reads, want 4 (each read)", n)
	}
}

// TestMemoizedNextIDCountsUp: a memoizing client reads /cluster/nextid
// once, peeks without taking, and hands out distinct ids counting up
// from the answer; a failed read is not kept; a plain client reads
// every time.
func TestMemoizedNextIDCountsUp(t *testing.T) {
	var reads atomic.Int32
	var failNext atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api2/json/cluster/nextid" {
			http.NotFound(w, r)
			return
		}
		reads.Add(1)
		if failNext.Swap(false) {
			writeError(t, w, http.StatusForbidden, "Permission check failed", nil)
			return
		}
		writeData(w, "105")
	})
	memo := newTestClient(t, h)
	memo.MemoizeSetup()
	failNext.Store(true)
	if _, err := memo.NextID(ctx(t)); err == nil {
		t.Fatal("the failed read answered")
	}
	if id, err := memo.PeekNextID(ctx(t)); err != nil || id != 105 {
		t.Fatalf("PeekNextID = %d, %v, want 105", id, err)
	}
	for _, want := range []int{105, 106, 107} {
		if id, err := memo.NextID(ctx(t)); err != nil || id != want {
			t.Fatalf("NextID = %d, %v, want %d", id, err, want)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("memoizing client read nextid %d times, want 2 (the failed read and one more)", n)
	}
	plain := newTestClient(t, h)
	reads.Store(0)
	for range 2 {
		if id, err := plain.NextID(ctx(t)); err != nil || id != 105 {
			t.Fatalf("plain NextID = %d, %v, want 105", id, err)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("plain client read nextid %d times, want 2", n)
	}
}

// TestMemoizedTemplates: a memoizing client lists a storage's templates
// once, until it writes under a storage's path (a download's task adds
// its template after the POST answers): from then on every listing is
// read fresh. Other content listings are never kept.
func TestMemoizedTemplates(t *testing.T) {
	var reads atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api2/json/nodes/pve1/storage/local/content":
			reads.Add(1)
			writeData(w, []map[string]any{{"volid": "local:vztmpl/a.tar.zst", "content": "vztmpl"}})
		case "/api2/json/nodes/pve1/storage/local/download-url":
			writeData(w, "UPID:pve1:1:1:1:download:x:root@pam:")
		default:
			http.NotFound(w, r)
		}
	})
	memo := newTestClient(t, h)
	memo.MemoizeSetup()
	for range 3 {
		if vols, err := memo.StorageContent(ctx(t), "pve1", "local", "vztmpl", 0); err != nil || len(vols) != 1 {
			t.Fatalf("StorageContent = %v, %v", vols, err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("templates listed %d times before a write, want once", n)
	}
	if _, err := memo.StorageContent(ctx(t), "pve1", "local", "", 0); err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("an unfiltered listing was not read (%d reads, want 2)", n)
	}
	if _, err := memo.DownloadURL(ctx(t), "pve1", "local", &pve.Download{Filename: "b.tar.zst", URL: "https://example.invalid/b", Content: "vztmpl"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := memo.StorageContent(ctx(t), "pve1", "local", "vztmpl", 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.Load(); n != 4 {
		t.Errorf("templates after a download: %d reads in all, want 4 (read fresh each time)", n)
	}
}
