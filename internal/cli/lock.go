package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

// lockFlags are the flags of every verb that changes the cluster and so
// takes corral's lock on the nodes it changes (apply/lock.go).
type lockFlags struct {
	timeout time.Duration
}

func (l *lockFlags) add(fs *pflag.FlagSet) {
	fs.DurationVar(&l.timeout, "lock-timeout", 5*time.Minute, "how long to wait while another corral holds the lock on a node this command changes (0: fail at once)")
}

func (l *lockFlags) check() error {
	if l.timeout < 0 {
		return fmt.Errorf("--lock-timeout %s: want 0 or more", l.timeout)
	}
	return nil
}

// held is corral's lock on some nodes, and a context that is cancelled
// when the lock is lost (broken by `corral unlock --force`, or not
// renewed in time), so that nothing changes without the lock.
type held struct {
	lock   *apply.Lock
	ctx    context.Context
	cancel context.CancelFunc
}

// lostOnly is a context that only losing the lock ends, not a Ctrl-C:
// for work that must not be left half done (ending a rescue).
func (h *held) lostOnly() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(h.ctx))
	go func() {
		select {
		case <-h.lock.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// lockNodes takes the lock on nodes for command, saying on stderr whom it
// waits for.
func lockNodes(ctx context.Context, st *streams, ex *apply.Executor, obs *plan.Observed, nodes []string, command string, lf lockFlags, p *plan.Plan) (*held, error) {
	if err := lf.check(); err != nil {
		return nil, err
	}
	// An apply plans again under the lock and creates a node's missing
	// keeper beside its apps (apply/lockclaim.go).
	opts := apply.LockOptions{Command: command, Wait: lf.timeout, OnWait: func(msg string) { ui.WriteLockWait(st.err, msg) }, Beside: command == "apply" && p != nil,
		// A destroy plans again under the lock at once, reading every
		// online node's tasks first: it takes the lock's last listing
		// (apply/lockhand.go; issue 30).
		HandOverListing: command == "destroy"}
	if p != nil {
		for _, c := range p.Changes {
			if c.Desired != nil && opts.Template == "" {
				opts.Template, opts.RootStorage = c.Desired.Template, c.Desired.RootStorage
			}
		}
	}
	// Waiting for another corral's lock is no step: the first Ctrl-C ends
	// the wait at once.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		select {
		case <-stopOf(ctx):
			wcancel()
		case <-wctx.Done():
		}
	}()
	lock, err := ex.Lock(wctx, obs, nodes, opts)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-lock.Lost():
			ui.WriteLockLost(st.err, lock.Err())
			cancel()
		case <-lctx.Done():
		}
	}()
	// The plan made under the lock and its apply know the keepers the
	// lock is still creating (apply/lockclaim.go).
	return &held{lock: lock, ctx: lock.Context(lctx), cancel: cancel}, nil
}

// release gives the lock back (also after Ctrl-C).
func (h *held) release() {
	if h == nil {
		return
	}
	h.cancel()
	h.lock.Release()
}
