package apply

import (
	"context"
	"testing"
)

// TestPendingKeeperGoesToOnePlannedCreate: a plan that creates two
// keepers on a node whose keeper the lock is creating takes that keeper
// for the first create only (adopt); two handles of one keeper would each
// count its room, and the node would get one keeper where the plan made
// room for two.
func TestPendingKeeperGoesToOnePlannedCreate(t *testing.T) {
	pk := &pendingKeeper{node: "pve", vmid: 100, done: make(chan struct{})}
	close(pk.done)
	if !pk.adopt() {
		t.Fatal("the first planned create did not take the lock's keeper")
	}
	if pk.adopt() {
		t.Fatal("a second planned create took the lock's keeper too")
	}
}

// TestWithoutOwnClaims: a plan made under the lock leaves out the
// placeholder of the keeper the lock is creating, and nothing else: not
// another guest being created, not that keeper once its create ended.
func TestWithoutOwnClaims(t *testing.T) {
	pk := &pendingKeeper{node: "pve", vmid: 100, done: make(chan struct{})}
	l := &Lock{pending: map[string]*pendingKeeper{"pve": pk}}
	ctx := l.Context(context.Background())
	res := []resource{
		{VMID: 100, Node: "pve", Type: "lxc", Lock: "create"},
		{VMID: 101, Node: "pve", Type: "lxc", Lock: "create"},
		{VMID: 100, Node: "pve2", Type: "lxc", Lock: "create"},
	}
	got := withoutOwnClaims(ctx, res)
	if len(got) != 2 || got[0].VMID != 101 || got[1].Node != "pve2" {
		t.Errorf("withoutOwnClaims = %+v, want 101 on pve and 100 on pve2", got)
	}
	done := []resource{{VMID: 100, Node: "pve", Type: "lxc", Tags: "corral;corral-keeper"}}
	if got := withoutOwnClaims(ctx, done); len(got) != 1 {
		t.Errorf("the created keeper was left out: %+v", got)
	}
	if got := withoutOwnClaims(context.Background(), res); len(got) != 3 {
		t.Errorf("without a lock: %+v, want all", got)
	}
}
