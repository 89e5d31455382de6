package pve

import (
	"context"
	"fmt"
	"github.com/corralhq/corral/internal/wait"
	"time"
)

// backoff is an exponential delay schedule: first, first*2, … capped at
// max. attempts bounds the tries of a retried request (1 = no retry).
type backoff struct {
	attempts int
	first    time.Duration
	max      time.Duration
}

// delay is the wait before retry n (0-based).
func (b backoff) delay(n int) time.Duration {
	d := b.first
	for range n {
		d *= 2
		if d >= b.max {
			return b.max
		}
	}
	return min(d, b.max)
}

// wait blocks for delay(n) or until ctx is done.
func (b backoff) wait(ctx context.Context, n int) error {
	return wait.Sleep(ctx, b.delay(n))
}

// RetryLocked calls fn until it returns something other than a lock error
// (IsLocked), or until maxWait has passed, or ctx is done; it returns fn's
// last error. Only non-GET requests that fail *before* they change anything
// may be wrapped: PVE checks "CT is locked (…)" and the config-file flock
// before it forks a worker (behaviour.md §h), so a step that failed that
// way has not started. Do not wrap a step that could have half-run.
func (c *Client) RetryLocked(ctx context.Context, maxWait time.Duration, fn func() error) error {
	deadline := time.Now().Add(maxWait)
	for n := 0; ; n++ {
		err := fn()
		if err == nil || !IsLocked(err) {
			return err
		}
		d := c.locked.delay(n)
		if time.Now().Add(d).After(deadline) {
			return fmt.Errorf("%w (still locked after %s)", err, maxWait)
		}
		c.log.InfoContext(ctx, "guest locked, will retry", "error", err, "retry_in", d)
		if werr := wait.Sleep(ctx, d); werr != nil {
			return fmt.Errorf("%w (gave up waiting for the lock: %w)", err, werr)
		}
	}
}
