package pve

import (
	"sync"
	"time"
)

// typicalTaskTime is how long a task of each type usually runs on
// Proxmox (the seeds' observed times at time scale 1, which the emulator
// reproduces: internal/sim/model's defaultDurations). A wait that knows
// a task's usual length reads its status halfway and just after the
// usual end instead of every second (issue 30: a vzcreate cost 16 status
// reads, the peer's 11; now 3 when it ends on time).
var typicalTaskTime = map[string]time.Duration{
	"vzcreate":      11 * time.Second,
	"vzrestore":     11 * time.Second,
	"vzclone":       11 * time.Second,
	"vzstart":       3 * time.Second,
	"vzstop":        2 * time.Second,
	"vzshutdown":    4 * time.Second,
	"vzreboot":      6 * time.Second,
	"vzdestroy":     2 * time.Second,
	"vzmigrate":     8 * time.Second,
	"vzdump":        22 * time.Second,
	"vzsnapshot":    2 * time.Second,
	"vzdelsnapshot": time.Second,
	"vzrollback":    3 * time.Second,
	"download":      4 * time.Second,
	"aptemplate":    4 * time.Second,
}

// taskTimes is what a client expects of each task type: the typical
// time, or what the last task of that type it waited for took (learned
// at run time: a node that creates in 4 s is not read at 5.5 s each
// time). Safe for concurrent use.
type taskTimes struct {
	mu      sync.Mutex
	learned map[string]time.Duration
}

// expect is the time a task of typ is expected to run at scale, 0 when
// its type has no usual length (it is then polled as before: soon, then
// less and less often, up to once a second).
func (t *taskTimes) expect(typ string, scale float64) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.learned[typ]; ok {
		return d
	}
	return time.Duration(float64(typicalTaskTime[typ]) * scale)
}

// learn records that a task of typ, expected to run expected, was seen
// stopped at seen after its wait began, and last seen running at
// running. Seen between the expected end and the read just after it, it
// ended where expected and teaches nothing. Seen sooner, it ended
// between the two reads: the next task of its type is expected halfway
// between them (a second wait then sees it on time or just late, and
// learns its time). Seen later, the next is expected at seen. Either is
// bounded by an eighth and twice the typical time (a task that waited
// for a lock held by another is not how long the type runs).
func (t *taskTimes) learn(typ string, running, seen, expected, margin time.Duration, scale float64) {
	typical := time.Duration(float64(typicalTaskTime[typ]) * scale)
	if typical <= 0 || expected <= 0 || (seen >= expected && seen <= expected+margin) {
		return
	}
	d := seen
	if seen < expected {
		d = running + (seen-running)/2
	}
	d = min(max(d, typical/8), 2*typical)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.learned == nil {
		t.learned = map[string]time.Duration{}
	}
	t.learned[typ] = d
}

// pollSchedule says when a wait reads a task's status next. A task of
// unknown length is read at once, then soon, then less and less often
// (pollDelay); one whose length is expected is read 100 ms after its
// start (not for a short one: schedule), then halfway, then just after its expected end, and from then on as a task of unknown length that has
// just started. A task that ends early is seen at most half its expected
// time late; one that ends on time at once; a late one within a second.
type pollSchedule struct {
	expect  time.Duration // 0: unknown
	margin  time.Duration // past the expected end
	first   time.Duration // the first delay of the unknown schedule
	ceiling time.Duration // the longest delay once overdue
	logCap  time.Duration // the longest delay while a log is shown; 0 none
	prev    time.Duration // the last delay of the unknown schedule
	reads   int           // reads so far
	// late is the delay before the first read: first, for a task whose
	// length is expected (its POST has just returned; a task that fails
	// at once, or an emulator's that runs faster than it said, is still
	// seen soon), or halfway for one expected to end within four of the
	// longest delays, its expected end for one within two (schedule);
	// none for one whose length is not known.
	late time.Duration
	// maxSlack bounds slack; slack is how long before the next read a
	// list read of the node may have begun to answer it instead
	// (taskbatch.go): 0 for a read that must be the task's own (the
	// reads soon after the start, the one aimed at the expected end).
	maxSlack, slack time.Duration
}

// next is the delay before the next read, elapsed after the wait began.
func (s *pollSchedule) next(elapsed time.Duration) time.Duration {
	s.reads++
	s.slack = 0
	if s.expect > 0 && elapsed < s.expect {
		target := s.expect + s.margin
		if elapsed < s.expect/2 {
			target = s.expect / 2
		}
		d := target - elapsed
		if s.logCap > 0 {
			d = min(d, s.logCap)
		}
		if target < s.expect {
			s.slack = s.shareable(d)
		}
		return d
	}
	if s.prev == 0 {
		s.prev = s.first
	} else {
		s.prev = pollDelay(s.prev, s.ceiling)
	}
	if s.logCap > 0 {
		return min(s.prev, s.logCap)
	}
	s.slack = s.shareable(s.prev)
	return s.prev
}

// shareable is the slack of a read after a delay of d: a quarter of it,
// at most maxSlack, and none after a delay under maxSlack (short delays
// come early in a wait, where a list read would mostly replace the
// task's own read rather than share it).
func (s *pollSchedule) shareable(d time.Duration) time.Duration {
	if d < s.maxSlack {
		return 0
	}
	return min(d/4, s.maxSlack)
}
