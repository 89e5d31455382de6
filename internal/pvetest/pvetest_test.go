package pvetest_test

import (
	"context"
	"sync/atomic"
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

// TestWaitFor returns once the condition holds.
func TestWaitFor(t *testing.T) {
	var n atomic.Int32
	pvetest.WaitFor(t, "the third check", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Errorf("checked %d times, want 3", n.Load())
	}
}
