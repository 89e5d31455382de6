package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// otherLease is a live lease of another corral in a keeper of k's node
// other than k, read after the lease was written into k: the lease in k
// holds the lock only when there is none (lockclaim.go says why). A
// guest still being created on the node may be a keeper created with a
// lease in its Notes, which PVE shows only once the create ends, so
// those are waited for first (up to createWait).
func (l *Lock) otherLease(ctx context.Context, k *keeper, createWait time.Duration) (*plan.Lease, int, error) {
	res, err := l.scanNode(ctx, k.ops.client, k.node, createWait)
	if err != nil {
		return nil, 0, err
	}
	for _, r := range res {
		if r.Node != k.node || r.VMID == k.vmid || !isKeeperResource(r) {
			continue
		}
		cc, err := k.ops.client.ContainerConfig(ctx, r.Node, r.VMID, true)
		if pve.IsNotFound(err) {
			continue // a spare keeper removed meanwhile
		}
		if err != nil {
			return nil, 0, fmt.Errorf("read keeper %d for another corral's lease: %w", r.VMID, err)
		}
		if cur := plan.ParseLease(cc.Values["description"]); l.othersLive(cur, cc.Values) {
			return cur, r.VMID, nil
		}
	}
	return nil, 0, nil
}

// othersLive reports whether cur, the lease in a keeper whose config is
// conf, is a lease of another corral that still holds: not of a process
// of this machine that is gone, and either not run out or written by a
// keeper's create (cur.Life) that its holder could not renew yet: the
// keeper is still being created, or this corral first found it created
// less than a life ago. That keeps a lease as long as its holder's create
// runs, however slow, and gives its holder a life after the create ends
// to renew it; a holder that died loses it a life later.
func (l *Lock) othersLive(cur *plan.Lease, conf map[string]string) bool {
	if cur == nil || cur.ID == l.lease.ID || holderGone(cur.Holder) {
		return false
	}
	now := time.Now()
	if now.Before(cur.Until) {
		return true
	}
	if cur.Life <= 0 {
		return false
	}
	if conf["lock"] == "create" {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	found, ok := l.foundCreated[cur.ID]
	if !ok {
		found = now
		l.foundCreated[cur.ID] = now
	}
	return now.Before(found.Add(cur.Life))
}

// settledOn lists the guests until no container on node is being created
// (a keeper is one; a VM is never a claim), for at most limit (default 3
// minutes).
func settledOn(ctx context.Context, c *pve.Client, node string, limit time.Duration) ([]resource, error) {
	return settledOnWait(node, limit).run(ctx, c)
}

// settledOnWait is settledOn's wait.
func settledOnWait(node string, limit time.Duration) settleWait {
	if limit <= 0 {
		limit = defaultCreateWait
	}
	return settleWait{
		limit: limit,
		holds: func(r resource) bool { return r.Node == node },
		tooLong: func(creating []resource) error {
			var ids []string
			for _, r := range creating {
				ids = append(ids, fmt.Sprint(r.VMID))
			}
			return fmt.Errorf("container(s) %s on node %s are still being created after %s, and one may be another corral's keeper holding the lock: "+
				"wait for their create tasks to end (Datacenter > Tasks) and run again", strings.Join(ids, ", "), node, limit)
		},
	}
}
