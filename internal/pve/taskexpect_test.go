package pve_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/pve"
)

const (
	createUPID = "UPID:pve:0003A2F0:0151D001:69F479DC:vzcreate:101:ctl@pve!ctl:"
	startUPID  = "UPID:pve:0003A2F0:0151D001:69F479DC:vzstart:101:ctl@pve!ctl:"
)

// A task whose type has a usual length (vzcreate 11 s, vzstart 3 s on
// Proxmox) is read 100 ms after its start, halfway and just after its
// usual end: three reads when it ends on time, where a read a second
// cost 11 for a vzcreate (the peer's rate; issue 30). One that ends sooner is seen at
// most half its usual time late; one that runs over is then read as a
// task just begun, so its end is seen within a second.
func TestWaitTaskReadsAKnownTaskAtItsExpectedEnd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upid     string
		run      time.Duration
		maxPolls int
		maxLate  time.Duration
	}{
		{"vzcreate on time", createUPID, 11 * time.Second, 3, 100 * time.Millisecond},
		{"vzstart on time", startUPID, 3 * time.Second, 3, 100 * time.Millisecond},
		{"vzcreate early", createUPID, 4 * time.Second, 2, 1600 * time.Millisecond},
		{"vzcreate just early", createUPID, 6 * time.Second, 3, 5100 * time.Millisecond},
		{"vzcreate late", createUPID, 20 * time.Second, 16, time.Second},
		{"vzcreate ends at once", createUPID, 50 * time.Millisecond, 1, 50 * time.Millisecond},
		{"vzcreate fails at once", createUPID, 0, 1, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1777629600, 0)}
			ft := &timedTask{clk: clk, end: clk.Now().Add(tc.run)}
			c := newTestClient(t, ft.handler(t))
			pve.SetClock(c, clk.Now, clk.Sleep)
			if _, err := c.WaitTask(ctx(t), tc.upid, pve.WaitOptions{}); err != nil {
				t.Fatalf("WaitTask: %v", err)
			}
			late := ft.seen.Sub(ft.end)
			t.Logf("%d status reads, end seen %v late", ft.polls, late)
			if ft.polls > tc.maxPolls {
				t.Errorf("%d status reads for a task of %v, want at most %d", ft.polls, tc.run, tc.maxPolls)
			}
			if late > tc.maxLate {
				t.Errorf("end seen %v after it happened, want at most %v", late, tc.maxLate)
			}
		})
	}
}

// A client learns how long a type's tasks take on its node: after a
// vzcreate that ended after 4 s (seen 1.5 s late, at the halfway read)
// and one more, the next is seen within a quarter second, in three reads.
func TestWaitTaskLearnsATypesTime(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1777629600, 0)}
	ft := &timedTask{clk: clk}
	c := newTestClient(t, ft.handler(t))
	pve.SetClock(c, clk.Now, clk.Sleep)
	var late []time.Duration
	var polls []int
	for range 4 {
		ft.mu.Lock()
		ft.end, ft.polls, ft.seen = clk.Now().Add(4*time.Second), 0, time.Time{}
		ft.mu.Unlock()
		if _, err := c.WaitTask(ctx(t), createUPID, pve.WaitOptions{}); err != nil {
			t.Fatalf("WaitTask: %v", err)
		}
		late, polls = append(late, ft.seen.Sub(ft.end)), append(polls, ft.polls)
	}
	t.Logf("late %v, reads %v", late, polls)
	if late[0] < time.Second {
		t.Fatalf("the first 4 s vzcreate was seen %v late; the test expects it seen at the halfway read of 11 s", late[0])
	}
	if last := len(late) - 1; late[last] > 250*time.Millisecond || polls[last] > 3 {
		t.Errorf("after %d vzcreates of 4 s the next is seen %v late in %d reads, want at most 250ms late in at most 3", last, late[last], polls[last])
	}
}

// While a task's log is shown, its status (and log) is read at least
// every 2 s, even when the task is expected to run longer.
func TestWaitTaskShowsTheLogEveryTwoSeconds(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1777629600, 0)}
	ft := &timedTask{clk: clk, end: clk.Now().Add(11 * time.Second)}
	var reads []time.Time
	c := newTestClient(t, ft.logHandler(t, clk, &reads))
	pve.SetClock(c, clk.Now, clk.Sleep)
	start := clk.Now()
	if _, err := c.WaitTask(ctx(t), createUPID, pve.WaitOptions{OnLog: func(string) {}}); err != nil {
		t.Fatalf("WaitTask: %v", err)
	}
	prev := start
	for _, r := range reads {
		if gap := r.Sub(prev); gap > 2*time.Second {
			t.Errorf("log read %v after the one before, want at most 2s (reads at %v)", gap, reads)
		}
		prev = r
	}
	if len(reads) > 8 {
		t.Errorf("%d log reads for an 11 s task, want at most 8", len(reads))
	}
}

// logHandler is f's status handler, plus a log of one line per read
// whose read times (on clk) go to reads.
func (f *timedTask) logHandler(t *testing.T, clk *fakeClock, reads *[]time.Time) http.Handler {
	status := f.handler(t).(*http.ServeMux)
	mux := http.NewServeMux()
	mux.Handle("GET /api2/json/nodes/{node}/tasks/{upid}/status", status)
	n := 0
	mux.HandleFunc("GET /api2/json/nodes/{node}/tasks/{upid}/log", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		*reads = append(*reads, clk.Now())
		n++
		lines := make([]pve.LogLine, n)
		for i := range lines {
			lines[i] = pve.LogLine{N: i + 1, T: "progress"}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": lines, "total": n})
	})
	return mux
}
