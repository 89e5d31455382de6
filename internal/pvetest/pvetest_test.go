package pvetest_test

import (
	"context"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
)

// TestStart: one call gives a running emulator and a client that reaches
// it over HTTPS with the operator token.
func TestStart(t *testing.T) {
	e := pvetest.Start(t, pvetest.Nodes(2))
	nodes, err := e.Client.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Errorf("nodes = %v, want 2", nodes)
	}
}

// TestStart_ownGuestBlock: emulators started side by side get guest
// blocks of their own, never block 1 (which emulators without a
// reservation share), so services in their CTs cannot take each
// other's loopback ports where CTs run in the unisolated view.
func TestStart_ownGuestBlock(t *testing.T) {
	seen := map[int]bool{}
	for range 4 {
		b := pvetest.Start(t).Cluster().GuestBlock()
		if b == 1 || seen[b] {
			t.Fatalf("guest block %d (already taken: %v), want one of its own and not 1", b, seen)
		}
		seen[b] = true
	}
}
