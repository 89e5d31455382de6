package pve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

func TestParseUPID(t *testing.T) {
	tests := []struct {
		in   string
		want pve.UPID
		ok   bool
	}{
		{"UPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:",
			pve.UPID{Node: "pve", PID: 0x3A1B2, PStart: 0x151C6E4, StartTime: 0x69F479A0, Type: "vzcreate", ID: "101", User: "ctl@pve!ctl"}, true},
		{"UPID:pve:0003A500:0151F200:69F47A54:move_volume:101-mp1>900-unused1:ctl@pve!ctl:",
			pve.UPID{Node: "pve", PID: 0x3A500, PStart: 0x151F200, StartTime: 0x69F47A54, Type: "move_volume", ID: "101-mp1>900-unused1", User: "ctl@pve!ctl"}, true},
		{"UPID:node-2:00001234:123456789:5F000000:vzdump::root@pam:",
			pve.UPID{Node: "node-2", PID: 0x1234, PStart: 0x123456789, StartTime: 0x5F000000, Type: "vzdump", User: "root@pam"}, true},
		{"UPID:pve:0003a1b2:0151c6e4:69f479a0:vzstart:101:root@pam:",
			pve.UPID{Node: "pve", PID: 0x3A1B2, PStart: 0x151C6E4, StartTime: 0x69F479A0, Type: "vzstart", ID: "101", User: "root@pam"}, true},
		{"", pve.UPID{}, false},
		{"UPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl", pve.UPID{}, false},    // no trailing colon
		{"UPID:pve:3A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:", pve.UPID{}, false},      // short pid
		{"UPID:-pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:", pve.UPID{}, false},  // bad node
		{"UPID:pve:0003A1B2:0151C6E4:69F479A0::101:ctl@pve!ctl:", pve.UPID{}, false},           // no type
		{"UPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101::", pve.UPID{}, false},              // no user
		{"UPID:pve:0003A1B2:0151C6E4:69F479A0:vz create:101:ctl@pve!ctl:", pve.UPID{}, false},  // space
		{"UPID:pve:0003A1B2:0151C6E4G:69F479A0:vzcreate:101:ctl@pve!ctl:", pve.UPID{}, false},  // not hex
		{"XUPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:", pve.UPID{}, false},  // prefix
		{"UPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:\n", pve.UPID{}, false}, // trailing newline
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := pve.ParseUPID(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseUPID(%q) err = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if !tt.ok {
				if !errors.Is(err, pve.ErrInvalidUPID) {
					t.Errorf("err = %v, want ErrInvalidUPID", err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseUPID (-want +got):\n%s", diff)
			}
			if got := got.String(); !strings.EqualFold(got, tt.in) {
				t.Errorf("String()=%q, want %q up to case", got, tt.in)
			}
		})
	}
}

// FuzzParseUPID checks that whatever parses prints back to a UPID that
// parses to the same value, and that failures wrap ErrInvalidUPID.
// Seeds: fuzzParseUPIDSeeds and testdata/fuzz/FuzzParseUPID.
func FuzzParseUPID(f *testing.F) {
	for _, s := range fuzzParseUPIDSeeds {
		f.Add(s)
	}
	f.Fuzz(checkParseUPID)
}

var fuzzParseUPIDSeeds = []string{"UPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:"}

// checkParseUPID is FuzzParseUPID's property, shared with its smoke test.
func checkParseUPID(t *testing.T, s string) {
	u, err := pve.ParseUPID(s)
	if err != nil {
		if !errors.Is(err, pve.ErrInvalidUPID) {
			t.Fatalf("ParseUPID(%q) err = %v, want ErrInvalidUPID", s, err)
		}
		return
	}
	again, err := pve.ParseUPID(u.String())
	if err != nil {
		t.Fatalf("ParseUPID(%q).String() = %q does not parse: %v", s, u.String(), err)
	}
	if diff := cmp.Diff(u, again); diff != "" {
		t.Fatalf("round trip of %q (-first +second):\n%s", s, diff)
	}
}

// fakeTask serves one task's status and log like pve-manager Tasks.pm,
// paging the log as pve-common dump_logfile does.
type fakeTask struct {
	t    *testing.T
	upid string

	mu         sync.Mutex
	unknownFor int      // answer 400 "no such task" to the first polls
	running    int      // then report running for this many polls
	exit       string   // then stopped with this exit status
	log        []string // the whole log
	perPoll    int      // while running, lines visible per poll so far (0 = none)
	lostAfter  int      // if > 0, answer "no such task" again from this poll on
	polls      int
	logCalls   int
	logLimits  []string
}

func (f *fakeTask) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api2/json/nodes/{node}/tasks/{upid}/status", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.polls++
		n := f.polls
		if r.PathValue("upid") != f.upid || r.PathValue("node") != "pve" {
			f.t.Errorf("status for %s/%s, want pve/%s", r.PathValue("node"), r.PathValue("upid"), f.upid)
		}
		if n <= f.unknownFor || (f.lostAfter > 0 && n >= f.lostAfter) {
			writeError(f.t, w, 400, "Parameter verification failed.", map[string]string{"upid": "no such task"})
			return
		}
		st := map[string]any{"upid": f.upid, "node": "pve", "status": "running", "type": "vzstart", "id": "101", "user": "ctl@pve", "tokenid": "ctl"}
		if n > f.unknownFor+f.running {
			st["status"], st["exitstatus"] = "stopped", f.exit
		}
		writeData(w, st)
	})
	mux.HandleFunc("GET /api2/json/nodes/{node}/tasks/{upid}/log", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.logCalls++
		f.logLimits = append(f.logLimits, r.URL.Query().Get("start")+"/"+r.URL.Query().Get("limit"))
		visible := f.log
		if n := f.polls - f.unknownFor; n <= f.running {
			visible = f.log[:min(len(f.log), max(0, n)*f.perPoll)]
		}
		start, _ := strconv.Atoi(r.URL.Query().Get("start"))
		limit := 50
		if l := r.URL.Query().Get("limit"); l != "" {
			limit, _ = strconv.Atoi(l)
		}
		var lines []pve.LogLine
		for i := start; i < len(visible) && (limit == 0 || i < start+limit); i++ {
			lines = append(lines, pve.LogLine{N: i + 1, T: visible[i]})
		}
		total := len(visible)
		if total == 0 {
			lines, total = []pve.LogLine{{N: 1, T: "no content"}}, 1
		}
		json.NewEncoder(w).Encode(map[string]any{"data": lines, "total": total})
	})
	return mux
}

const testUPID = "UPID:pve:0003A2F0:0151D001:69F479DC:vzstart:101:ctl@pve!ctl:"

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d", prefix, i+1)
	}
	return out
}

var fast = pve.WaitOptions{Interval: time.Millisecond, MaxInterval: 2 * time.Millisecond}

func TestClient_WaitTask(t *testing.T) {
	longLog := append(numbered("step", 99), "TASK ERROR: CT is locked (backup)")
	warnLog := []string{"starting", "WARN: cannot delete 'mp9' - not set in current configuration!", "middle", "WARN: second warning", "TASK WARNINGS: 2"}
	tests := []struct {
		name     string
		task     *fakeTask
		stream   bool
		warnings []string
		taskErr  *pve.TaskError
		wantErr  string // substring of a non-task error
	}{
		{name: "ok", task: &fakeTask{running: 2, exit: "OK", log: []string{"a", "TASK OK"}}},
		{name: "ok streamed", stream: true, task: &fakeTask{running: 3, exit: "OK", log: []string{"a", "b", "TASK OK"}, perPoll: 1}},
		{name: "warnings", task: &fakeTask{running: 1, exit: "WARNINGS: 2", log: warnLog},
			warnings: []string{"cannot delete 'mp9' - not set in current configuration!", "second warning"}},
		{name: "warnings streamed", stream: true, task: &fakeTask{running: 2, exit: "WARNINGS: 2", log: warnLog, perPoll: 2},
			warnings: []string{"cannot delete 'mp9' - not set in current configuration!", "second warning"}},
		{name: "error with log tail", task: &fakeTask{running: 1, exit: "CT is locked (backup)", log: longLog},
			taskErr: &pve.TaskError{UPID: testUPID, ExitStatus: "CT is locked (backup)", Log: longLog[80:]}},
		{name: "error streamed", stream: true, task: &fakeTask{running: 2, exit: "CT is locked (backup)", log: longLog, perPoll: 30},
			taskErr: &pve.TaskError{UPID: testUPID, ExitStatus: "CT is locked (backup)", Log: longLog[80:]}},
		{name: "short error log", task: &fakeTask{exit: "unable to create CT 101 - no space", log: []string{"TASK ERROR: unable to create CT 101 - no space"}},
			taskErr: &pve.TaskError{UPID: testUPID, ExitStatus: "unable to create CT 101 - no space", Log: []string{"TASK ERROR: unable to create CT 101 - no space"}}},
		{name: "first 400 then found", task: &fakeTask{unknownFor: 3, running: 1, exit: "OK", log: []string{"TASK OK"}}},
		{name: "never found", task: &fakeTask{unknownFor: 1000}, wantErr: "no such task"},
		{name: "lost after seen", task: &fakeTask{running: 100, lostAfter: 3}, wantErr: "no such task"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := tt.task
			ft.t, ft.upid = t, testUPID
			c := newTestClient(t, ft.handler())
			opts := fast
			var streamed []string
			if tt.stream {
				opts.OnLog = func(l string) { streamed = append(streamed, l) }
			}
			res, err := c.WaitTask(ctx(t), testUPID, opts)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			case tt.taskErr != nil:
				var te *pve.TaskError
				if !errors.As(err, &te) {
					t.Fatalf("err = %v (%T), want *TaskError", err, err)
				}
				if diff := cmp.Diff(tt.taskErr, te); diff != "" {
					t.Errorf("TaskError (-want +got):\n%s", diff)
				}
			default:
				if err != nil {
					t.Fatalf("WaitTask: %v", err)
				}
				if got, want := res.Task.Status, "stopped"; got != want {
					t.Errorf("Task.Status=%q, want %q", got, want)
				}
				if diff := cmp.Diff(tt.warnings, res.Warnings); diff != "" {
					t.Errorf("Warnings (-want +got):\n%s", diff)
				}
			}
			if tt.stream {
				if diff := cmp.Diff(ft.log, streamed); diff != "" {
					t.Errorf("streamed log (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// A successful task without OnLog costs no log reads.
func TestClient_WaitTask_okReadsNoLog(t *testing.T) {
	ft := &fakeTask{t: t, upid: testUPID, running: 2, exit: "OK", log: []string{"TASK OK"}}
	c := newTestClient(t, ft.handler())
	if _, err := c.WaitTask(ctx(t), testUPID, fast); err != nil {
		t.Fatalf("WaitTask: %v", err)
	}
	if ft.logCalls != 0 {
		t.Errorf("%d log reads, want 0", ft.logCalls)
	}
}

// A long log is read in pages, each line delivered once and in order, and
// a failed task's tail costs at most two reads however long the log is.
func TestClient_WaitTask_longLog(t *testing.T) {
	log := append(numbered("line", 1733), "TASK ERROR: job errors")
	t.Run("streamed", func(t *testing.T) {
		ft := &fakeTask{t: t, upid: testUPID, running: 4, perPoll: 450, exit: "job errors", log: log}
		c := newTestClient(t, ft.handler())
		var got []string
		opts := fast
		opts.OnLog = func(l string) { got = append(got, l) }
		_, err := c.WaitTask(ctx(t), testUPID, opts)
		var te *pve.TaskError
		if !errors.As(err, &te) {
			t.Fatalf("err = %v, want *TaskError", err)
		}
		if diff := cmp.Diff(log, got); diff != "" {
			t.Errorf("streamed lines (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(log[len(log)-20:], te.Log); diff != "" {
			t.Errorf("TaskError.Log (-want +got):\n%s", diff)
		}
	})
	t.Run("tail only", func(t *testing.T) {
		ft := &fakeTask{t: t, upid: testUPID, running: 1, exit: "job errors", log: log}
		c := newTestClient(t, ft.handler())
		_, err := c.WaitTask(ctx(t), testUPID, fast)
		var te *pve.TaskError
		if !errors.As(err, &te) {
			t.Fatalf("err = %v, want *TaskError", err)
		}
		if diff := cmp.Diff(log[len(log)-20:], te.Log); diff != "" {
			t.Errorf("TaskError.Log (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"0/20", "1714/20"}, ft.logLimits); diff != "" {
			t.Errorf("log reads start/limit (-want +got):\n%s", diff)
		}
	})
	t.Run("warnings over pages", func(t *testing.T) {
		wlog := append(numbered("line", 1200), "WARN: late warning", "TASK WARNINGS: 1")
		ft := &fakeTask{t: t, upid: testUPID, running: 1, exit: "WARNINGS: 1", log: wlog}
		c := newTestClient(t, ft.handler())
		res, err := c.WaitTask(ctx(t), testUPID, fast)
		if err != nil {
			t.Fatalf("WaitTask: %v", err)
		}
		if diff := cmp.Diff([]string{"late warning"}, res.Warnings); diff != "" {
			t.Errorf("Warnings (-want +got):\n%s", diff)
		}
		if got := ft.logCalls; got < 3 {
			t.Errorf("%d log reads for 1202 lines, want at least 3 pages", got)
		}
	})
}

// Cancelling the context ends the wait between polls, even a long one.
func TestClient_WaitTask_contextCancel(t *testing.T) {
	c, cancel := context.WithCancel(t.Context())
	ft := &fakeTask{t: t, upid: testUPID, running: 1 << 30}
	client := newTestClient(t, ft.handler(), func(cfg *pve.Config) {
		cfg.HTTPClient = &http.Client{Transport: cancelAfterResponse{next: cfg.HTTPClient.Transport, cancel: cancel}}
	})
	_, err := client.WaitTask(c, testUPID, pve.WaitOptions{Interval: time.Hour})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if got := ft.polls; got != 1 {
		t.Errorf("%d polls, want 1", got)
	}
}

// The fixtures' own bodies: a move_volume task whose id holds '>' and a
// token user, its log, and a start that died on a lock.
func TestClient_WaitTask_fixtures(t *testing.T) {
	okStatus, logBody := fixture(t, "task-status-move-volume-ok.json"), fixture(t, "task-log.json")
	lockedStatus := fixture(t, "task-status-error-locked.json")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api2/json/nodes/pve/tasks/{upid}/status", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.PathValue("upid"), "vzstart") {
			writeBody(w, lockedStatus)
			return
		}
		writeBody(w, okStatus)
	})
	mux.HandleFunc("GET /api2/json/nodes/pve/tasks/{upid}/log", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.PathValue("upid"), "vzstart") {
			json.NewEncoder(w).Encode(map[string]any{"data": []pve.LogLine{{N: 1, T: "TASK ERROR: CT is locked (backup)"}}, "total": 1})
			return
		}
		writeBody(w, logBody)
	})
	c := newTestClient(t, mux)

	var upid struct{ Data struct{ UPID string } }
	json.Unmarshal(okStatus, &upid)
	var lines []string
	opts := fast
	opts.OnLog = func(l string) { lines = append(lines, l) }
	res, err := c.WaitTask(ctx(t), upid.Data.UPID, opts)
	if err != nil {
		t.Fatalf("WaitTask(move_volume): %v", err)
	}
	if got, want := res.Task.ID, "101-mp1>900-unused1"; got != want {
		t.Errorf("Task.ID=%q, want %q", got, want)
	}
	if got, want := len(lines), 5; got != want || lines[4] != "TASK OK" {
		t.Errorf("streamed %d lines %q, want 5 ending in TASK OK", got, lines)
	}

	json.Unmarshal(lockedStatus, &upid)
	_, err = c.WaitTask(ctx(t), upid.Data.UPID, fast)
	if !pve.IsLocked(err) {
		t.Errorf("err = %v, want a locked TaskError", err)
	}
}

// Each poll delay is half as long again as the one before, up to the
// ceiling.
func TestPollDelay(t *testing.T) {
	ceiling := time.Second
	for _, tc := range []struct{ prev, want time.Duration }{
		{100 * time.Millisecond, 150 * time.Millisecond},
		{150 * time.Millisecond, 225 * time.Millisecond},
		{600 * time.Millisecond, 900 * time.Millisecond},
		{900 * time.Millisecond, ceiling},
		{ceiling, ceiling},
	} {
		if got := pve.PollDelay(tc.prev, ceiling); got != tc.want {
			t.Errorf("pollDelay(%v) = %v, want %v", tc.prev, got, tc.want)
		}
	}
}

// The pacer lets a burst through, then holds a wait to its rate however
// fast it is asked, on a simulated clock.
func TestPacer(t *testing.T) {
	now := time.Unix(1777629600, 0)
	p := pve.NewPacer(10, now)
	sent := 0
	var at []time.Time
	for clock := now; clock.Before(now.Add(10 * time.Second)); {
		clock = clock.Add(p.Reserve(clock)) // the request goes out then
		at = append(at, clock)
		sent++
		clock = clock.Add(time.Millisecond) // asked again at once
	}
	if max := pve.WaitBurst + 10*10 + 1; sent > max {
		t.Errorf("%d requests in 10s at 10/s with a burst of %d, want at most %d", sent, pve.WaitBurst, max)
	}
	if sent < 10*10 {
		t.Errorf("%d requests in 10s, want the rate (100) used", sent)
	}
	// The first ones go out at once, one ms apart.
	if d := at[pve.WaitBurst-1].Sub(at[0]); d > pve.WaitBurst*time.Millisecond {
		t.Errorf("the burst took %v", d)
	}
	// After the burst, never two requests closer than 1/rate.
	for i := pve.WaitBurst + 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < 99*time.Millisecond {
			t.Fatalf("requests %d and %d %v apart after the burst", i-1, i, d)
		}
	}
}

// Log asks for the whole log of a task that ended OK: read once, after
// it stopped, and returned.
func TestClient_WaitTask_logAsked(t *testing.T) {
	log := []string{"INFO: starting new backup job", "INFO: backup mode: stop", "TASK OK"}
	ft := &fakeTask{t: t, upid: testUPID, running: 3, exit: "OK", log: log, perPoll: 1}
	c := newTestClient(t, ft.handler())
	opts := fast
	opts.Log = true
	res, err := c.WaitTask(ctx(t), testUPID, opts)
	if err != nil {
		t.Fatalf("WaitTask: %v", err)
	}
	if diff := cmp.Diff(log, res.Log); diff != "" {
		t.Errorf("Log (-want +got):\n%s", diff)
	}
	if ft.logCalls != 1 {
		t.Errorf("%d log reads, want 1 (after the task stopped)", ft.logCalls)
	}
}
