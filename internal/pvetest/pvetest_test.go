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
