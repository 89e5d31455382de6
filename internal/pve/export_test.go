package pve

import (
	"context"
	"time"
)

// FastRetries shrinks c's retry delays so tests of retry behaviour run in
// milliseconds; the schedules' shapes are unchanged.
func FastRetries(c *Client) {
	c.retry.First, c.retry.Max = time.Millisecond, 2*time.Millisecond
}

// PollDelay and Pacer expose WaitTask's schedule to tests.
var PollDelay = pollDelay

type Pacer = pacer

func NewPacer(rate float64, now time.Time) *Pacer { return newPacer(rate, now) }

func (p *Pacer) Reserve(now time.Time) time.Duration { return p.reserve(now) }

const WaitBurst = waitBurst

// SetClock makes c's task waits read the time from now and sleep with
// sleep, so that a test counts a wait's requests without waiting.
func SetClock(c *Client, now func() time.Time, sleep func(context.Context, time.Duration) error) {
	c.clock = clock{now: now, sleep: sleep}
}
