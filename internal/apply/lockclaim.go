package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/wait"
)

// Locking a node that has no keeper yet (issue 30). The lease lives in a
// keeper's Notes, so a node without one used to get its keeper created
// (an 11 s vzcreate) before the lock was held, and only then were the
// apps planned and created: a first apply took a keeper's create longer
// than Proxmox's own create + start. Now the keeper is created with the
// lease already in its Notes (the vzcreate's description) and the lock is
// held from the moment a listing of the node shows that keeper's
// placeholder and no other claim: no keeper and no other container being
// created there. The apps are planned and created while the keeper's
// create still runs (createbeside.go), each app's volumes once it ends.
//
// Why one holder at most. Each corral first makes its claim visible (the
// placeholder PVE writes before the create's POST returns, or the lease
// written into an existing keeper by compare-and-swap) and only then
// reads the others' claims (this listing, or otherLease's). Of two
// corrals the one that made its claim second reads after both claims
// exist, so it sees the first one and does not hold: it falls back. A
// claim stays visible while its holder holds: a placeholder becomes a
// keeper whose Notes hold a lease renewed until release, and a reader
// that finds a placeholder waits for it to become one (otherLease). Two
// claimants that each see the other both fall back, and the fallback is
// the lock of a node that has keepers: each takes its lease out of its
// keeper, the oldest keeper is locked by compare-and-swap, and after
// every take the node's other keepers are read for a live lease
// (otherLease), which is what keeps a keeper that /cluster/nextid gave a
// lower VMID, or a killed claimant's dead lease in the oldest keeper,
// from letting a second corral in beside a holder whose lease lives in a
// younger keeper. A keeper a corral created and did not end up holding
// the lock in is removed under the lock it then holds, if it stayed
// empty: only the holder puts volumes in keepers, so it cannot gain one
// between the check and the destroy.

// pendingKeeper is a keeper whose create Lock started on a node that had
// none, with the lease in its Notes from its first moment; done closes
// when the create ends, err is then its failure.
type pendingKeeper struct {
	node string
	vmid int
	upid string // its create task
	// seenRunning is when the holder last saw the create task running
	// (only renew reads and writes it once Lock returns): the lease holds
	// for the lease's life after the create ends, which is no earlier.
	seenRunning time.Time
	// until is when the lease last written in its Notes runs out (only
	// renew reads and writes it once Lock returns).
	until time.Time
	done  chan struct{}
	err   error
	// taken is set by the first planned keeper create of its node that
	// takes it (adopt); a plan that creates two keepers there creates
	// the second.
	taken atomic.Bool
}

// adopt reports whether this is the first call: the keeper goes to one
// planned create only.
func (pk *pendingKeeper) adopt() bool { return pk.taken.CompareAndSwap(false, true) }

// The lease a keeper's create writes cannot be renewed until the create
// ends (usually 11 s; a real template on slow storage or a loaded node has
// taken over 3 minutes), so it carries its life (plan.Lease.Life): other
// corrals take it as held while the keeper is being created and for a
// life after they find it created, whatever its Until says (othersLive).
// Its holder, meanwhile, renews its own belief instead of the Notes: it
// reads the create task's status every third of a life and gives the lock
// up only when it cannot see that task running for two thirds of one
// (renewPending), and renews the Notes the moment the create ends.

// wait waits for the keeper's create to end.
func (pk *pendingKeeper) wait(ctx context.Context) error {
	select {
	case <-pk.done:
		return pk.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ended reports whether the create has ended.
func (pk *pendingKeeper) ended() bool {
	select {
	case <-pk.done:
		return true
	default:
		return false
	}
}

type pendingKey struct{}

// Context is ctx carrying the keepers l is still creating: a plan made
// under l with it leaves their placeholders out rather than wait for
// them (so it plans the node's keeper), and an Apply with it takes such
// a keeper where its plan creates the node's keeper (ensureKeeper).
func (l *Lock) Context(ctx context.Context) context.Context {
	if l == nil {
		return ctx
	}
	ctx = l.withHanded(ctx) // the lock's last listing, when it can be the plan's (lockhand.go)
	if len(l.pending) == 0 {
		return ctx
	}
	return context.WithValue(ctx, pendingKey{}, maps.Clone(l.pending))
}

// pendingIn is the keepers being created by the lock ctx carries, per node.
func pendingIn(ctx context.Context) map[string]*pendingKeeper {
	m, _ := ctx.Value(pendingKey{}).(map[string]*pendingKeeper)
	return m
}

// withoutOwnClaims is res without the placeholders of the keepers the
// lock in ctx is creating.
func withoutOwnClaims(ctx context.Context, res []resource) []resource {
	own := pendingIn(ctx)
	if len(own) == 0 {
		return res
	}
	return slices.DeleteFunc(slices.Clone(res), func(r resource) bool {
		pk := own[r.Node]
		return pk != nil && pk.vmid == r.VMID && r.Lock == "create"
	})
}

// adoptPending is the keeper the lock is creating, once it is there: the
// plan made under the lock left its placeholder out, so it plans the
// node's keeper, and this is it.
func (ko *keeperOps) adoptPending(ctx context.Context, pk *pendingKeeper) (*keeper, error) {
	if err := pk.wait(ctx); err != nil {
		return nil, fmt.Errorf("%s: keeper: %w", plan.KeeperName, err)
	}
	return &keeper{ops: ko, node: pk.node, vmid: pk.vmid, records: map[plan.VolumeKey]string{}}, nil
}

// claimEmptyNode starts creating node's keeper with l's lease in its
// Notes, and reports whether that claim holds the node's lock.
func (l *Lock) claimEmptyNode(ctx context.Context, ko *keeperOps, node, tmpl, storage string) (*pendingKeeper, bool, error) {
	lease := l.lease
	lease.Until, lease.Life = time.Now().Add(l.ttl), l.ttl
	params := holderParams(tmpl, plan.KeeperName, storage, plan.TagKeeper, plan.KeeperNotes{Lease: &lease}.Render())
	vmid, upid, err := ko.startCT(ctx, node, 0, params)
	if err != nil {
		return nil, false, fmt.Errorf("lock node %s: create its keeper: %w", node, err)
	}
	pk := &pendingKeeper{node: node, vmid: vmid, upid: upid, seenRunning: time.Now(), until: lease.Until, done: make(chan struct{})}
	go func() {
		defer close(pk.done)
		pk.err = ko.step(plan.KeeperName, "keeper", "create on "+node, func() error { return ko.wait(l.bg, plan.KeeperName, upid) })
	}()
	alone, err := aloneOn(ctx, ko.client, node, vmid)
	return pk, alone, err
}

// aloneOn lists the guests until the listing shows vmid (the claim's
// placeholder, or the keeper it became; PVE writes the placeholder before
// the create's POST returns, so this is at once) and reports whether it
// shows no other claim on node: no keeper, and no other container being
// created (which may be another corral's keeper). A listing that never
// shows vmid (its create failed at once) is no hold either.
func aloneOn(ctx context.Context, c *pve.Client, node string, vmid int) (bool, error) {
	for try := 0; try < 5; try++ {
		res, err := c.ClusterResources(ctx, "vm")
		if err != nil {
			return false, fmt.Errorf("lock node %s: list guests: %w", node, err)
		}
		seen := false
		for _, r := range res {
			switch {
			case r.Node != node:
			case r.VMID == vmid:
				seen = true
			case r.Type == "lxc" && r.Lock == "create" || isKeeperResource(r):
				return false, nil
			}
		}
		if seen {
			return true, nil
		}
		if err := wait.Sleep(ctx, 50*time.Millisecond); err != nil {
			return false, err
		}
	}
	return false, nil
}

// isKeeperResource reports whether a listed guest is a keeper.
func isKeeperResource(r resource) bool {
	return r.Type == "lxc" && slices.Contains(plan.ParseTags(r.Tags), plan.TagKeeper)
}

// yieldClaim is the way back from a claim that saw another beside it:
// once its keeper is created, the lease comes out of its Notes and the
// node is locked like one that had keepers, in the oldest one. Ours is
// the spare when another is older: the caller removes it once it holds
// the lock (when it is still empty).
func (l *Lock) yieldClaim(ctx context.Context, ko *keeperOps, obs *plan.Observed, pk *pendingKeeper) (k, spare *keeper, err error) {
	if err := pk.wait(ctx); err != nil {
		return nil, nil, fmt.Errorf("lock node %s: %w", pk.node, err)
	}
	made := &keeper{ops: ko, node: pk.node, vmid: pk.vmid, records: map[plan.VolumeKey]string{}}
	if err := l.clear(ctx, made); err != nil {
		return nil, nil, err
	}
	oldest, err := ko.oldestKeeper(ctx, pk.node)
	if err != nil {
		return nil, nil, err
	}
	if oldest != made.vmid {
		spare = made
	}
	if !slices.ContainsFunc(obs.Keepers[pk.node], func(k *plan.Keeper) bool { return k.VMID == oldest }) {
		obs.Keepers[pk.node] = append(obs.Keepers[pk.node], plan.NewKeeper(oldest, pk.node, map[string]string{}))
	}
	return &keeper{ops: ko, node: pk.node, vmid: oldest}, spare, nil
}

// abandon takes l's lease out of the keeper of a claim that failed on the
// way (the command was stopped, a read failed): once its create ends,
// within its own deadline, as the command may have been stopped.
func (l *Lock) abandon(ctx context.Context, pk *pendingKeeper) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	_ = pk.wait(wctx) // a failed create left no lease; a failed wait may have
	_ = l.clear(ctx, &keeper{ops: l.e.keeperOps(), node: pk.node, vmid: pk.vmid, records: map[plan.VolumeKey]string{}})
}

// clear takes l's lease out of k's Notes, if it is there. It has its own
// short deadline, so that a lease written just before the command was
// stopped (Ctrl-C, an agent's stop) still comes out.
func (l *Lock) clear(ctx context.Context, k *keeper) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return k.change(ctx, "release the lock", func(s *keeperState) (*pve.ConfigUpdate, error) {
		if s.notes.Lease == nil || s.notes.Lease.ID != l.lease.ID {
			return nil, nil
		}
		s.notes.Lease = nil
		return &pve.ConfigUpdate{}, nil
	})
}
