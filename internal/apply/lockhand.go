package apply

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/internal/pve"
)

// The plan under the lock takes the lock's own listing (issue 30). After
// the lease is written, the lock lists the guests to look for another
// corral's lease in the node's other keepers (otherLease), and the plan
// made right after, under the lock, read the running tasks and listed
// the guests again (its settle wait, guestsSettled), with nothing
// written between. With LockOptions.HandOverListing the lock's scan
// reads every online node's running tasks before each of its listings,
// as the plan's wait does, and when its listing would end that wait too
// (no container whose create holds it up, no power, destroy or move task
// on a container of corral's) it is handed to the first observation
// made with Lock.Context, which takes it instead of a listing of its
// own: it was read under every lease this lock holds (the last node's
// scan comes after every node's lease), after the tasks of every node a
// guest of corral's is on, and nothing was written since. The scan
// still waits only for what it waited for before (creates on its node):
// a listing that would not end the plan's wait is not handed over, and
// the plan waits itself, with the lease renewed meanwhile.

// handedListing is a listing of the lock's scan for the plan under it.
type handedListing struct {
	res   []resource
	nodes []string // whose running tasks were read before res
	taken atomic.Bool
}

// handedKey is the context key of the listing Lock.Context hands over.
type handedKey struct{}

// scanNode is the listing of otherLease: settledOn's, and with
// HandOverListing, on the node locked last (the earlier nodes' scans
// come before a lease the plan needs, and read no tasks), one that may
// be handed to the plan (see above).
func (l *Lock) scanNode(ctx context.Context, c *pve.Client, node string, limit time.Duration) ([]resource, error) {
	l.handed = nil
	online, ok := knownOnline(c)
	if node != l.handNode || len(l.pending) > 0 || !ok {
		return settledOn(ctx, c, node, limit)
	}
	var read []string
	var busyIn func([]resource) []string
	w := settledOnWait(node, limit)
	w.busyNodes = online
	w.busy = func(on []string) (func([]resource) []string, error) {
		in, err := busyTasks(ctx, c, on, false)
		if err != nil {
			return nil, err
		}
		read, busyIn = slices.Clone(on), in
		return func([]resource) []string { return nil }, nil // the scan does not wait for them
	}
	w.watched = func(res []resource) []string { return watchedNodes(ctx, res, online) }
	res, err := w.run(ctx, c)
	if err != nil {
		return nil, err
	}
	if len(busyIn(res)) == 0 && !slices.ContainsFunc(res, holdsAPlan) {
		l.handed = &handedListing{res: slices.Clone(res), nodes: read}
	}
	return res, nil
}

// holdsAPlan reports whether r holds up guestsSettled: a guest still
// being created that shows no tags yet.
func holdsAPlan(r resource) bool {
	return (r.Type == "lxc" || r.Type == "qemu") && r.Lock == "create" && r.Tags == ""
}

// knownOnline are the online nodes of the node list c already read and
// keeps for the run (pve.Client.MemoizeSetup): the list every
// observation of the run takes. ok is false when it has none.
func knownOnline(c *pve.Client) (online []string, ok bool) {
	nodes, ok := c.KnownNodes()
	if !ok {
		return nil, false
	}
	for _, n := range nodes {
		if n.Status == "" || n.Status == "online" {
			online = append(online, n.Node)
		}
	}
	slices.Sort(online)
	return online, true
}

// withHanded is ctx carrying the listing l's scan handed over, if any;
// it is handed once.
func (l *Lock) withHanded(ctx context.Context) context.Context {
	h := l.handed
	l.handed = nil
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, handedKey{}, h)
}

// handedIn is the listing the lock handed over in ctx, for the first
// observation that asks and only when its own wait would have read no
// node's tasks that the lock's scan did not read first.
func handedIn(ctx context.Context, online []string) ([]resource, bool) {
	h, _ := ctx.Value(handedKey{}).(*handedListing)
	if h == nil || !h.taken.CompareAndSwap(false, true) || len(pendingIn(ctx)) > 0 {
		return nil, false
	}
	for _, n := range slices.Concat(firstBusyNodes(ctx, online), watchedNodes(ctx, h.res, online)) {
		if !slices.Contains(h.nodes, n) {
			return nil, false
		}
	}
	return slices.Clone(h.res), true
}
