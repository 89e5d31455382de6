package pve_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/pve"
)

// fakeClock is a clock whose sleeps return at once, moving its time on:
// a wait's schedule is counted, not timed.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
	return nil
}

// timedTask serves a task that runs for d on clk, counting status reads.
type timedTask struct {
	clk   *fakeClock
	end   time.Time
	mu    sync.Mutex
	polls int
	seen  time.Time // clock time of the read that saw it stopped
}

func (f *timedTask) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api2/json/nodes/{node}/tasks/{upid}/status", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.polls++
		st := map[string]any{"upid": testUPID, "node": "pve", "status": "running", "type": "vzcreate", "id": "101", "user": "ctl@pve"}
		if now := f.clk.Now(); !now.Before(f.end) {
			st["status"], st["exitstatus"] = "stopped", "OK"
			if f.seen.IsZero() {
				f.seen = now
			}
		}
		writeData(w, st)
	})
	mux.HandleFunc("GET /api2/json/nodes/{node}/tasks/{upid}/log", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("log read of a task that ended OK with no one asking for its log")
	})
	return mux
}

// unknownTypeUPID is a task of a type with no usual length.
const unknownTypeUPID = "UPID:pve:0003A2F0:0151D001:69F479DC:srvreload:networking:ctl@pve!ctl:"

// A task of a type whose length is not known is polled about once per
// task-second once it has run a while (a pveproxy worker and an
// authentication each on a real node; the peer polls once a second), and
// a short task's end is still seen soon after it happens (issue 30).
func TestWaitTaskPollsAboutOncePerTaskSecond(t *testing.T) {
	for _, tc := range []struct {
		run      time.Duration
		maxPolls int           // status reads, all told
		maxLate  time.Duration // from the task's end to the read that saw it
	}{
		{200 * time.Millisecond, 5, 200 * time.Millisecond},
		{time.Second, 7, 600 * time.Millisecond},
		{3 * time.Second, 9, time.Second},   // vzstart
		{11 * time.Second, 18, time.Second}, // vzcreate
		{60 * time.Second, 67, time.Second},
		{10 * time.Minute, 607, time.Second},
	} {
		t.Run(tc.run.String(), func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1777629600, 0)}
			ft := &timedTask{clk: clk, end: clk.Now().Add(tc.run)}
			c := newTestClient(t, ft.handler(t))
			pve.SetClock(c, clk.Now, clk.Sleep)
			if _, err := c.WaitTask(ctx(t), unknownTypeUPID, pve.WaitOptions{}); err != nil {
				t.Fatalf("WaitTask: %v", err)
			}
			if ft.polls > tc.maxPolls {
				t.Errorf("%d status reads for a task of %v, want at most %d", ft.polls, tc.run, tc.maxPolls)
			}
			if late := ft.seen.Sub(ft.end); late > tc.maxLate {
				t.Errorf("end seen %v after it happened, want at most %v", late, tc.maxLate)
			}
			t.Logf("%v: %d status reads, end seen %v late", tc.run, ft.polls, ft.seen.Sub(ft.end))
		})
	}
}

// A client told its emulator's time scale polls a scaled task as often as
// a real node's task of the real length, and an instant emulator's tasks
// are polled milliseconds apart, not a second.
func TestWaitTaskFollowsAKnownTimeScale(t *testing.T) {
	for _, tc := range []struct {
		scale    float64
		run      time.Duration
		maxPolls int
		maxLate  time.Duration
	}{
		{0.25, 11 * time.Second / 4, 16, time.Second / 4},
		{0, 5 * time.Millisecond, 7, 10 * time.Millisecond},
	} {
		clk := &fakeClock{now: time.Unix(1777629600, 0)}
		ft := &timedTask{clk: clk, end: clk.Now().Add(tc.run)}
		scale := tc.scale
		c := newTestClient(t, ft.handler(t), func(cfg *pve.Config) { cfg.TaskTimeScale = &scale })
		pve.SetClock(c, clk.Now, clk.Sleep)
		if _, err := c.WaitTask(ctx(t), testUPID, pve.WaitOptions{}); err != nil {
			t.Fatalf("WaitTask: %v", err)
		}
		if ft.polls > tc.maxPolls {
			t.Errorf("scale %g: %d status reads for a task of %v, want at most %d", tc.scale, ft.polls, tc.run, tc.maxPolls)
		}
		if late := ft.seen.Sub(ft.end); late > tc.maxLate {
			t.Errorf("scale %g: end seen %v after it happened, want at most %v", tc.scale, late, tc.maxLate)
		}
	}
}

// A task expected to end within four of the longest poll delays (a
// vzshutdown, 4 s) is first read halfway, not also 100 ms after its
// start, and one within two (a vzdestroy, 2 s) first at its expected
// end: a task that fails at once is still seen within two seconds, and
// one that ends on time costs two status reads and one (issue 30: a
// destroy's vzdestroy and vzshutdown made three each when on time).
func TestWaitTaskReadsAShortTaskTwice(t *testing.T) {
	const (
		destroyUPID  = "UPID:pve:0003A2F0:0151D001:69F479DC:vzdestroy:101:ctl@pve!ctl:"
		shutdownUPID = "UPID:pve:0003A2F0:0151D001:69F479DC:vzshutdown:101:ctl@pve!ctl:"
	)
	for _, tc := range []struct {
		upid     string
		run      time.Duration
		maxPolls int
		maxLate  time.Duration
	}{
		{destroyUPID, 2 * time.Second, 1, 100 * time.Millisecond}, // on time
		{destroyUPID, 0, 1, 2100 * time.Millisecond},              // fails or ends at once
		{shutdownUPID, 4 * time.Second, 2, 100 * time.Millisecond},
		{shutdownUPID, 0, 1, 2 * time.Second},
	} {
		clk := &fakeClock{now: time.Unix(1777629600, 0)}
		ft := &timedTask{clk: clk, end: clk.Now().Add(tc.run)}
		scale := 1.0
		c := newTestClient(t, ft.handler(t), func(cfg *pve.Config) { cfg.TaskTimeScale = &scale })
		pve.SetClock(c, clk.Now, clk.Sleep)
		if _, err := c.WaitTask(ctx(t), tc.upid, pve.WaitOptions{}); err != nil {
			t.Fatalf("WaitTask: %v", err)
		}
		if ft.polls > tc.maxPolls {
			t.Errorf("%s of %v: %d status reads, want at most %d", tc.upid, tc.run, ft.polls, tc.maxPolls)
		}
		if late := ft.seen.Sub(ft.end); late > tc.maxLate {
			t.Errorf("%s of %v: end seen %v after it happened, want at most %v", tc.upid, tc.run, late, tc.maxLate)
		}
	}
}
