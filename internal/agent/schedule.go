package agent

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/corralhq/corral/internal/apply"
)

// Window is one period of a backup schedule: from an activation (Start)
// up to, not including, the next one (End).
type Window struct{ Start, End time.Time }

// Contains reports whether t falls in the window.
func (w Window) Contains(t time.Time) bool {
	return !t.Before(w.Start) && t.Before(w.End)
}

// maxLookBack bounds the search for the last activation: a schedule that
// fires less than once in about four years (Feb 29 on a Monday) has no
// window the agent can reason about.
const maxLookBack = 5 * 366 * 24 * time.Hour

// WindowAt returns the window of sched that contains now: the last
// activation at or before now, and the next one after it. It searches
// back from now in doubling steps, since cron schedules only go forward.
//
// An @every schedule fires relative to when it was started, so a restart
// would move its windows; WindowAt aligns them to multiples of the delay
// since the Unix epoch instead, which every restart agrees on.
func WindowAt(sched cron.Schedule, now time.Time) (Window, error) {
	if d, ok := sched.(cron.ConstantDelaySchedule); ok {
		start := now.Truncate(d.Delay)
		return Window{Start: start, End: start.Add(d.Delay)}, nil
	}
	for step := time.Minute; step <= 2*maxLookBack; step *= 2 {
		from := now.Add(-step)
		var last time.Time
		for t := sched.Next(from.Add(-time.Second)); !t.IsZero() && !t.After(now); t = sched.Next(t) {
			last = t
		}
		if !last.IsZero() {
			return Window{Start: last, End: sched.Next(last)}, nil
		}
	}
	return Window{}, fmt.Errorf("schedule: no activation in the %s before %s", maxLookBack, now.Format(time.RFC3339))
}

// TakenIn returns the newest archive corral made of app inside w, if any:
// the scheduled backup of that window is then done, whoever took it (this
// agent before a restart, or a human's corral backup). Archives made some
// other way (pct vzdump, a PVE backup job) do not count, as keep does not
// count them either.
func TakenIn(archives []apply.Archive, app string, w Window) (apply.Archive, bool) {
	var best apply.Archive
	found := false
	for _, a := range archives {
		if a.App != app || !a.Corral || !w.Contains(a.Time) {
			continue
		}
		if !found || a.Time.After(best.Time) {
			best, found = a, true
		}
	}
	return best, found
}
