package apply_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/testenv"
)

// runLocked is a first apply as `corral apply` runs it: observe, plan,
// lock (on a node without a keeper: the keeper's create carries the
// lease, lockclaim.go), plan again under the lock without waiting for
// that keeper, apply, release. With kill > 0 it dies at that request
// (killer). ttl is the lease's life: a killed run's lease must run out
// before the next run may take it over, as this process, its holder, is
// still alive. It returns the requests made, the release's included.
func (r *rig) runLocked(ph phase, kill int64, ttl time.Duration) (int64, error) {
	ctx, cancel, k, c := killable(r.t, r.srv, kill)
	defer cancel()
	apps := loadApps(r.t, ph)
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return k.count.Load(), err
	}
	p, err := plan.Make(apps, obs)
	if err != nil {
		return k.count.Load(), err
	}
	opts := apply.LockOptions{Command: "apply", Wait: 10 * time.Second, TTL: ttl, Beside: true}
	for _, c := range p.Changes {
		if c.Desired != nil && opts.Template == "" {
			opts.Template, opts.RootStorage = c.Desired.Template, c.Desired.RootStorage
		}
	}
	ex := &apply.Executor{Client: c}
	l, err := ex.Lock(ctx, obs, p.Nodes(), opts)
	if err != nil {
		return k.count.Load(), err
	}
	lctx := l.Context(ctx)
	if obs, err = apply.Observe(lctx, c); err == nil {
		if p, err = plan.Make(apps, obs); err == nil {
			err = ex.Apply(lctx, p, obs)
		}
	}
	l.Release()
	return k.count.Load(), err
}

// TestFirstApplyUnderTheLockCrashAtEveryAPICall: the first apply on a node
// without a keeper, lock included, killed at every API call (a sample;
// CORRAL_SWEEP=full: all): while the keeper that carries the lease is
// being created, while the app's container is created beside it, while
// the volumes are made and attached, at the release. The next apply
// converges with one container, one keeper, the adopted volume's data,
// no volume leaked and none but the killed run's dead lease left.
func TestFirstApplyUnderTheLockCrashAtEveryAPICall(t *testing.T) {
	t.Parallel()
	frozen := newRig(t).freeze()
	clean := thaw(t, frozen)
	n, err := clean.runLocked(cycle[0], 0, time.Minute)
	if err != nil {
		t.Fatalf("clean first apply: %v", err)
	}
	clean.converged(cycle[0], nil)
	t.Logf("requests of a first apply under the lock: %d", n)
	for _, kill := range testenv.KillPoints(t, n) {
		t.Run(fmt.Sprintf("kill-at-%d", kill), func(t *testing.T) {
			t.Parallel()
			r := thaw(t, frozen)
			const killedTTL = 300 * time.Millisecond
			if _, err := r.runLocked(cycle[0], kill, killedTTL); err == nil && kill < n {
				t.Logf("finished despite the kill at request %d", kill)
			}
			killed := time.Now()
			for try := 0; ; try++ {
				_, err := r.runLocked(cycle[0], 0, time.Minute)
				if err == nil {
					break
				}
				if try == 1 {
					t.Fatalf("re-run after the kill: %v", err)
				}
			}
			r.converged(cycle[0], nil)
			ks := r.observe().Keepers["pve"]
			if len(ks) != 1 {
				t.Fatalf("%d keepers after the re-run, want 1", len(ks))
			}
			// A run killed at its release leaves its lease, which runs
			// out (a re-run with nothing to do takes no lock); the
			// re-run's own (a minute) must be gone.
			if l := ks[0].Lease; l != nil && l.Until.After(killed.Add(killedTTL+time.Second)) {
				t.Errorf("the re-run's lease left in keeper %d: %+v until %s", ks[0].VMID, l, l.Until)
			}
		})
	}
}
