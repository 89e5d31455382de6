package pve

import (
	"context"
	"time"

	"github.com/corralhq/corral/internal/wait"
)

// RetryPolicy is the one way corral repeats a PVE call: which failures
// are repeated, the delay schedule (First, First*2, … capped at Max) and
// the bound (Attempts tries, or tries until MaxWait has passed). Start from
// a preset and change a field: pve.RetryLocked with MaxWait set, say.
type RetryPolicy struct {
	// Retryable reports whether a failed call may be repeated; nil
	// repeats none.
	Retryable func(error) bool
	// Attempts bounds the tries in all (0: no bound but MaxWait).
	Attempts int
	// MaxWait stops the retries once this has passed since the first try
	// (0: no bound but Attempts). The try under way when it passes is the
	// last; a delay is not cut short.
	MaxWait time.Duration
	First   time.Duration
	Max     time.Duration
}

// Presets.
var (
	// RetryRead repeats a GET after a connection error or a 5xx that is
	// not a definite PVE verdict (a missing CT is a 500 too): four tries,
	// 250 ms, 500 ms, 1 s apart. Client.call decides which failures qualify.
	RetryRead = RetryPolicy{Attempts: 4, First: 250 * time.Millisecond, Max: 2 * time.Second}
	// RetryLocked repeats a call PVE refused because the guest is locked
	// ("CT is locked (…)", or the config-file flock timed out) for up to
	// three minutes, 200 ms to 2 s apart. Only calls that fail that way
	// *before* they change anything may be wrapped: PVE checks the lock
	// before it forks a worker (behaviour.md §h), so a step refused that
	// way has not started. Do not wrap a step that could have half-run.
	RetryLocked = RetryPolicy{Retryable: IsLocked, MaxWait: 3 * time.Minute, First: 200 * time.Millisecond, Max: 2 * time.Second}
)

// Delay is the wait before retry n (0-based): First doubled n times,
// capped at Max.
func (p RetryPolicy) Delay(n int) time.Duration {
	d := p.First
	for range n {
		d *= 2
		if d >= p.Max {
			return p.Max
		}
	}
	return min(d, p.Max)
}

// Do calls fn until it succeeds, fails in a way Retryable does not
// repeat, or the policy's bound is reached, and returns fn's last error;
// when ctx is done during a delay it returns ctx's error.
func (p RetryPolicy) Do(ctx context.Context, fn func() error) error {
	start := time.Now()
	for n := 0; ; n++ {
		err := fn()
		if err == nil || p.Retryable == nil || !p.Retryable(err) {
			return err
		}
		if p.Attempts > 0 && n+1 >= p.Attempts {
			return err
		}
		if p.MaxWait > 0 && time.Since(start) > p.MaxWait {
			return err
		}
		if err := wait.Sleep(ctx, p.Delay(n)); err != nil {
			return err
		}
	}
}
