package pve

import (
	"context"
	"time"

	"github.com/corralhq/corral/internal/wait"
)

// clock is where a task wait reads the time and sleeps: the real one,
// or in tests one whose sleeps return at once, so that a wait's polls
// are counted without waiting for them.
type clock struct {
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

var realClock = clock{now: time.Now, sleep: wait.Sleep}

// since is the time elapsed on k since t.
func (k clock) since(t time.Time) time.Duration { return k.now().Sub(t) }

// minTaskTimeScale is the smallest scale poll delays follow: an instant
// emulator's tasks still take a scheduling moment, and polls 1ms apart
// at first (10ms at most) see them end without spinning.
const minTaskTimeScale = 0.01

// taskTimeScale is Config.TaskTimeScale's value: 1 when unknown.
func taskTimeScale(s *float64) float64 {
	if s == nil || *s >= 1 {
		return 1
	}
	return max(*s, minTaskTimeScale)
}

// scaled is d at the client's task time scale.
func (c *Client) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.scale)
}
