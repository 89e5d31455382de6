package apply

import (
	"context"
	"fmt"
)

// Releasing the lease in a destroy's last keeper write (issue 30). A
// destroy --delete-volumes ends with its free batches, each a protection
// window on a keeper; the lock's release after them was one more read
// and write of the keeper that holds the lease, usually the same one,
// right after the batch's last write. When that last write is the run's
// last write and its keeper holds the lease, it carries the release:
// the Notes it writes no longer hold the lease. The write is the same
// compare-and-swap on a fresh read as the release's own (it clears only
// this lock's lease, as clear does), it is the last change the run
// makes, and it is atomic: PVE applies the freed volumes' deletes, the
// protection and the Notes together or not at all. If it fails, the
// lease is still there and Release clears it as before; a crash before
// it leaves the lease to run out, as a crash before any release does.
// From the moment such a write is tried, renew leaves that keeper alone:
// a renewal that found the lease gone would take the lock for broken.

// leaseEndKey is the context key of EndLeaseInLastWrite's lock.
type leaseEndKey struct{}

// EndLeaseInLastWrite marks ctx, for Destroy, so that the run's last
// keeper write releases l's lease when its keeper holds it (see above).
func EndLeaseInLastWrite(ctx context.Context, l *Lock) context.Context {
	if l == nil {
		return ctx
	}
	return context.WithValue(ctx, leaseEndKey{}, l)
}

// leaseEndIn is the lock of EndLeaseInLastWrite in ctx, or nil.
func leaseEndIn(ctx context.Context) *Lock {
	l, _ := ctx.Value(leaseEndKey{}).(*Lock)
	return l
}

// keeperID names a keeper for the lock's bookkeeping: the lock and the
// executor hold keepers of their own.
func keeperID(k *keeper) string { return fmt.Sprintf("%s/%d", k.node, k.vmid) }

// holds reports whether k is a keeper whose lease l holds.
func (l *Lock) holds(k *keeper) bool {
	if l == nil {
		return false
	}
	for _, h := range l.held {
		if h.node == k.node && h.vmid == k.vmid {
			return true
		}
	}
	return false
}

// endIn takes l's lease out of s, the fresh read of k for a write that
// ends the run, and reports whether it did; from then on renew leaves k
// alone. Another lease in s (the lock was broken) is left as it is.
func (l *Lock) endIn(k *keeper, s *keeperState) bool {
	if s.notes.Lease == nil || s.notes.Lease.ID != l.lease.ID {
		return false
	}
	l.mu.Lock()
	if l.ending == nil {
		l.ending = map[string]bool{}
	}
	l.ending[keeperID(k)] = true
	l.mu.Unlock()
	s.notes.Lease = nil
	return true
}

// ended records that k's write without the lease was made: Release
// has nothing left to clear there.
func (l *Lock) ended(k *keeper) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released == nil {
		l.released = map[string]bool{}
	}
	l.released[keeperID(k)] = true
}

// isEnding reports whether a write ending the lease on k was tried.
func (l *Lock) isEnding(k *keeper) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ending[keeperID(k)]
}

// isReleased reports whether that write was made.
func (l *Lock) isReleased(k *keeper) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released[keeperID(k)]
}
