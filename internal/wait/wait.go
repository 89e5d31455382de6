// Package wait is the one timed wait corral's packages share: a sleep
// that a cancelled context ends at once (Ctrl-C, SIGTERM, a deadline).
// It imports nothing of corral's, so any package may use it without
// bending the import graph.
package wait

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done, whichever is first, and returns
// ctx's error in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
