package pve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/lazyre"
)

// UPID is a decoded task id,
// UPID:<node>:<pid %08X>:<pstart %08X>:<starttime %08X>:<type>:<id>:<user>:
// (pve-common PVE::UPID encode). User is the full token id,
// user@realm!token, for a token's task; ID may be empty or contain '>'
// and '-' ("101-mp1>900-unused1" for move_volume).
type UPID struct {
	Node      string
	PID       uint32
	PStart    uint64
	StartTime int64 // Unix seconds
	Type      string
	ID        string
	User      string
}

// upidRE is PVE's own decoding pattern (PVE::UPID decode): pstart may have
// a ninth hex digit on long-running hosts.
var upidRE = lazyre.New(`^UPID:([a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?):([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8,9}):([0-9A-Fa-f]{8}):([^:\s]+):([^:\s]*):([^:\s]+):$`)

// ParseUPID decodes s. Errors wrap ErrInvalidUPID.
func ParseUPID(s string) (UPID, error) {
	m := upidRE.FindStringSubmatch(s)
	if m == nil {
		return UPID{}, fmt.Errorf("%w: %.120q", ErrInvalidUPID, s)
	}
	pid, _ := strconv.ParseUint(m[2], 16, 32)
	pstart, _ := strconv.ParseUint(m[3], 16, 64)
	start, _ := strconv.ParseInt(m[4], 16, 64)
	return UPID{Node: m[1], PID: uint32(pid), PStart: pstart, StartTime: start, Type: m[5], ID: m[6], User: m[7]}, nil
}

// String encodes u as PVE does, hex in upper case.
func (u UPID) String() string {
	return fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", u.Node, u.PID, u.PStart, u.StartTime, u.Type, u.ID, u.User)
}

// Started is the task's start time.
func (u UPID) Started() time.Time { return time.Unix(u.StartTime, 0) }

// TaskStatus returns GET /nodes/{node}/tasks/{upid}/status; the node is
// read from the UPID.
func (c *Client) TaskStatus(ctx context.Context, upid string) (*Task, error) {
	u, err := ParseUPID(upid)
	if err != nil {
		return nil, err
	}
	var t Task
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/tasks/%s/status", u.Node, upid), nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// TaskLog returns up to limit log lines after the first start lines, and
// the log's total line count. PVE answers an empty log with the single
// line {n:1, t:"no content"}.
func (c *Client) TaskLog(ctx context.Context, upid string, start, limit int) ([]LogLine, int, error) {
	u, err := ParseUPID(upid)
	if err != nil {
		return nil, 0, err
	}
	q := url.Values{"start": {strconv.Itoa(start)}, "limit": {strconv.Itoa(limit)}}
	var lines []LogLine
	total, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/tasks/%s/log", u.Node, upid), q, &lines)
	if err != nil {
		return nil, 0, err
	}
	return lines, total, nil
}

// TaskFilter selects entries of TaskList; zero fields are not sent.
type TaskFilter struct {
	Start, Limit int
	VMID         int
	Type         string // typefilter, e.g. "vzstart"
	Status       string // statusfilter, e.g. "ok,error"
	User         string // userfilter
	Errors       bool   // only failed tasks
	Source       string // "archive" (default), "active" or "all"
	Since, Until int64  // Unix seconds
}

// TaskList returns GET /nodes/{node}/tasks. A token sees only its own tasks
// (behaviour.md "Tasks").
func (c *Client) TaskList(ctx context.Context, node string, f TaskFilter) ([]TaskListEntry, error) {
	q := url.Values{}
	setInt := func(k string, v int64) {
		if v != 0 {
			q.Set(k, strconv.FormatInt(v, 10))
		}
	}
	setStr := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	setInt("start", int64(f.Start))
	setInt("limit", int64(f.Limit))
	setInt("vmid", int64(f.VMID))
	setInt("since", f.Since)
	setInt("until", f.Until)
	setStr("typefilter", f.Type)
	setStr("statusfilter", f.Status)
	setStr("userfilter", f.User)
	setStr("source", f.Source)
	if f.Errors {
		q.Set("errors", "1")
	}
	var out []TaskListEntry
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/tasks", node), q, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// WaitOptions tune WaitTask. The zero value polls like a good citizen:
// a task whose type has a usual length (typicalTaskTime, or what the
// client learned from the last task of its type) is read 100ms after
// its start, halfway through that length and just after it, then as a
// task of unknown length that just began (pollSchedule): three reads
// when it ends on time. A task of unknown length is read at once, 100ms later,
// each later delay 1.5 times the one before, up to one a second
// (pollDelay): a task of T seconds costs about T+7 status reads, and its
// end is seen at most half the time already waited, or 1s, after it
// happens. The log is read
// only when the task failed, ended with warnings, or the caller asks for
// it (OnLog, Log).
type WaitOptions struct {
	// OnLog, if set, receives each new task log line in order while
	// waiting (for progress display), read with a status read at most
	// once a second while the task runs. It runs on the waiting
	// goroutine. Leave it nil when nothing shows the lines: every task
	// then costs log reads.
	OnLog func(line string)
	// Log asks for the whole log in TaskResult.Log, for a caller that
	// takes a value from it; it is read once the task has stopped (or
	// kept from OnLog).
	Log bool
	// Interval is the first poll delay (default 100ms, times the
	// client's Config.TaskTimeScale).
	Interval time.Duration
	// MaxInterval caps the poll delay (default 1s, times the client's
	// Config.TaskTimeScale).
	MaxInterval time.Duration
	// MaxRate bounds the requests per second (status and log reads) of
	// the wait on average, after a burst of 10; default 10.
	MaxRate float64
}

// TaskResult is a task that finished successfully.
type TaskResult struct {
	UPID string
	Task Task // the final status
	// Warnings are the task log's "WARN: " lines, prefix removed, when
	// the exit status was "WARNINGS: n".
	Warnings []string
	// Log is the whole task log when WaitOptions.Log or OnLog asked for it.
	Log []string
}

const (
	// logTailLines is how much of a failed task's log a TaskError keeps.
	logTailLines = 20
	// logPage is the page size for reading long logs.
	logPage = 500
	// unknownTaskPolls bounds how often a new UPID may be "no such task".
	unknownTaskPolls = 10
	// logEvery is how often a running task's log is read for display.
	logEvery = time.Second
	// showLogEvery is the longest delay between status reads (and so
	// log reads) while a task's log is shown: progress lines come at
	// most this late.
	showLogEvery = 2 * time.Second
	// taskMargin is how long after its expected end a task is read: an
	// emulated task ends exactly then, a real one about then.
	taskMargin = 50 * time.Millisecond
	// maxListSlack is the longest a shared list read of a node's tasks
	// may have begun before a wait's read was due (taskbatch.go): the
	// creates of a parallel apply start a VMID apart, about a second
	// for ten, and their halfway reads should meet.
	maxListSlack = time.Second
	// firstPoll and maxPoll are the default first and longest poll
	// delays, for real Proxmox task durations.
	firstPoll = 100 * time.Millisecond
	maxPoll   = time.Second
	// shortTaskCeilings: a task expected within twice this many of the
	// longest delays is first read halfway (schedule).
	shortTaskCeilings = 2
	// waitBurst is how many requests a wait may make before MaxRate
	// paces it.
	waitBurst = 10
)

// pollDelay is the delay after prev before the next status read of a
// task: 1.5 times prev, at most ceiling.
//
// Why this shape: on a real node every status read is a pveproxy worker
// and an authentication, so a long task must cost no more than the peer's
// one read a second (the ceiling), yet most tasks corral waits for are
// short (a config change, a start) and their end should be seen soon.
// Growing each delay by half means the end of a task is seen at most half
// the time already waited after it happened (a 200ms task at 250ms, a 3s
// one at 3.08s), and the reads before the ceiling is reached number about
// seven, whatever the task's length. The previous schedule (1/20 of the
// time waited) saw ends within 5% but made about seven reads per
// task-second (issue 30).
func pollDelay(prev, ceiling time.Duration) time.Duration {
	return min(prev+prev/2, ceiling)
}

// pacer is a token bucket: burst requests at once, then rate a second.
type pacer struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

func newPacer(rate float64, now time.Time) *pacer {
	return &pacer{rate: rate, burst: waitBurst, tokens: waitBurst, last: now}
}

// reserve takes a token for a request at now and returns how long to
// wait before sending it (0 when one was there).
func (p *pacer) reserve(now time.Time) time.Duration {
	if now.After(p.last) {
		p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
		p.last = now
	}
	p.tokens--
	if p.tokens >= 0 {
		return 0
	}
	wait := time.Duration(-p.tokens / p.rate * float64(time.Second))
	// The token is spent at now+wait: account for the refill until then.
	p.tokens, p.last = 0, now.Add(wait)
	return wait
}

// pace waits on k, if need be, for a token to send one request.
func (p *pacer) pace(ctx context.Context, k clock) error {
	if d := p.reserve(k.now()); d > 0 {
		return k.sleep(ctx, d)
	}
	return nil
}

// WaitTask polls the task until it stops and judges its exit status
// (behaviour.md §0): "OK" is success; "WARNINGS: n" is success whose result
// carries the WARN lines of the log; anything else is a *TaskError with the
// last lines of the log. Right after the POST that started it, PVE may
// answer 400 "no such task" for a moment, so that answer is retried until
// the task has been seen once. Every wait selects on ctx.
func (c *Client) WaitTask(ctx context.Context, upid string, opts WaitOptions) (*TaskResult, error) {
	u, err := ParseUPID(upid)
	if err != nil {
		return nil, fmt.Errorf("wait task: %w", err)
	}
	defer c.lists.enter(u.Node)()
	sched := c.schedule(u.Type, opts)
	rate := opts.MaxRate
	if rate <= 0 {
		rate = 10
	}
	p := newPacer(rate, c.clock.now())
	lr := &logReader{c: c, upid: upid, keep: opts.OnLog != nil || opts.Log, pace: p}
	seen, running, unknown := false, false, 0
	var lastRunning time.Duration // when a read last saw it running
	start := c.clock.now()
	var lastLog time.Time
	if err := c.clock.sleep(ctx, sched.late); err != nil {
		return nil, fmt.Errorf("wait task %s: %w", upid, err)
	}
	for {
		if err := p.pace(ctx, c.clock); err != nil {
			return nil, fmt.Errorf("wait task %s: %w", upid, err)
		}
		sent := c.clock.since(start)
		if seen && opts.OnLog == nil && c.runningByList(ctx, u.Node, upid, sched) {
			lastRunning = sent
		} else {
			st, err := c.TaskStatus(ctx, upid)
			switch {
			case err == nil:
				running = running || (!seen && !st.Stopped())
				seen = true
				if !st.Stopped() {
					lastRunning = sent
				}
			case !seen && isNoSuchTask(err) && unknown < unknownTaskPolls:
				unknown++
			default:
				return nil, fmt.Errorf("wait task %s: %w", upid, err)
			}
			// The log is read at most once a second while the task runs
			// (it is for display), and always once it stopped.
			if seen && opts.OnLog != nil && (st.Stopped() || c.clock.since(lastLog) >= logEvery) {
				lastLog = c.clock.now()
				if err := lr.show(ctx, opts.OnLog); err != nil {
					return nil, fmt.Errorf("wait task %s: read log: %w", upid, err)
				}
			}
			if seen && st.Stopped() {
				if running {
					c.times.learn(u.Type, lastRunning, sent, sched.expect, sched.margin, c.scale)
				}
				if opts.Log && opts.OnLog == nil {
					if _, err := lr.read(ctx); err != nil {
						return nil, fmt.Errorf("wait task %s: read log: %w", upid, err)
					}
				}
				return c.finish(ctx, st, lr)
			}
		}
		delay := sched.first
		if seen {
			delay = sched.next(c.clock.since(start))
		}
		if err := c.clock.sleep(ctx, delay); err != nil {
			return nil, fmt.Errorf("wait task %s: %w", upid, err)
		}
	}
}

// runningByList answers a read that only asks whether the task still
// runs from a list read of its node shared with the node's other waits
// (taskbatch.go), when the schedule allows a shared answer; false means
// the task's own status read must answer.
func (c *Client) runningByList(ctx context.Context, node, upid string, sched *pollSchedule) bool {
	if sched.slack <= 0 {
		return false
	}
	running, ok := c.lists.shared(ctx, c, node, upid, c.clock.now().Add(-sched.slack))
	return ok && running
}

// schedule is the poll schedule of a wait for a task of typ: opts'
// delays, or the defaults at the client's time scale and, unless opts
// sets the first delay, the type's expected time.
func (c *Client) schedule(typ string, opts WaitOptions) *pollSchedule {
	s := &pollSchedule{first: opts.Interval, ceiling: opts.MaxInterval, margin: c.scaled(taskMargin), maxSlack: c.scaled(maxListSlack)}
	if s.first <= 0 {
		s.first = c.scaled(firstPoll)
		s.expect = c.times.expect(typ, c.scale)
		if s.first < s.expect/2 {
			s.late = s.first
		}
	}
	if s.ceiling <= 0 {
		s.ceiling = c.scaled(maxPoll)
	}
	s.ceiling = max(s.ceiling, s.first)
	// A task expected to end within four of the longest delays (a
	// vzstart, a vzshutdown) is first read halfway, and one expected
	// within two (a vzdestroy, a vzstop) first at its expected end: a
	// task that fails at once is still seen within two of those delays,
	// and the reads before would only say it runs (issue 30: a destroy's
	// vzdestroy cost three status reads, now one when on time; its
	// vzshutdown three, now two).
	switch {
	case s.late > 0 && s.expect <= shortTaskCeilings*s.ceiling:
		s.late = s.expect + s.margin
	case s.late > 0 && s.expect/2 <= shortTaskCeilings*s.ceiling:
		s.late = s.expect / 2
	}
	if opts.OnLog != nil {
		s.logCap = showLogEvery
	}
	return s
}

// finish judges a stopped task. When streaming, lr already holds the
// whole log; otherwise only what the verdict needs is read.
func (c *Client) finish(ctx context.Context, st *Task, lr *logReader) (*TaskResult, error) {
	upid := lr.upid
	res := &TaskResult{UPID: upid, Task: *st}
	if lr.keep {
		res.Log = lr.all
	}
	switch {
	case st.ExitStatus == "OK":
		return res, nil
	case strings.HasPrefix(st.ExitStatus, "WARNINGS:"):
		lines := lr.all
		if !lr.keep {
			var err error
			if lines, err = lr.read(ctx); err != nil {
				return nil, fmt.Errorf("task %s ended with %s, but its log could not be read: %w", upid, st.ExitStatus, err)
			}
		}
		for _, l := range lines {
			if w, ok := strings.CutPrefix(l, "WARN: "); ok {
				res.Warnings = append(res.Warnings, w)
			}
		}
		// Info: the caller shows the warnings (TaskResult.Warnings) to its
		// user, once, as the app's own lines.
		c.log.InfoContext(ctx, "task finished with warnings", "upid", upid, "exitstatus", st.ExitStatus, "warnings", res.Warnings)
		return res, nil
	}
	te := &TaskError{UPID: upid, ExitStatus: st.ExitStatus, Log: lr.all}
	if te.ExitStatus == "" {
		te.ExitStatus = "unknown"
	}
	if !lr.keep {
		tail, err := c.logTail(ctx, upid, logTailLines)
		if err != nil {
			c.log.DebugContext(ctx, "read failed task's log", "upid", upid, "error", err)
		}
		te.Log = tail
	}
	if len(te.Log) > logTailLines {
		te.Log = te.Log[len(te.Log)-logTailLines:]
	}
	return nil, te
}

// logTail returns the last n lines of a task log: one request when the
// log is short, two when it is not.
func (c *Client) logTail(ctx context.Context, upid string, n int) ([]string, error) {
	page, total, err := c.TaskLog(ctx, upid, 0, n)
	if err != nil {
		return nil, err
	}
	if total > n {
		if page, _, err = c.TaskLog(ctx, upid, total-n, n); err != nil {
			return nil, err
		}
	}
	return logText(page), nil
}

// logReader reads a task log incrementally, page by page.
type logReader struct {
	c    *Client
	upid string
	next int      // lines consumed so far: PVE's "start"
	keep bool     // keep every line in all
	all  []string // lines read so far, when keep
	pace *pacer   // paces the requests, nil for none
}

// read returns the lines after those already read.
func (r *logReader) read(ctx context.Context) ([]string, error) {
	var out []string
	for {
		if r.pace != nil {
			if err := r.pace.pace(ctx, r.c.clock); err != nil {
				return out, err
			}
		}
		page, total, err := r.c.TaskLog(ctx, r.upid, r.next, logPage)
		if err != nil {
			return out, err
		}
		if r.next == 0 && isEmptyLog(page) {
			return out, nil
		}
		var fresh []string
		for _, l := range page {
			if l.N > r.next {
				fresh = append(fresh, l.T)
				r.next = l.N
			}
		}
		out = append(out, fresh...)
		if r.keep {
			r.all = append(r.all, fresh...)
		}
		if len(fresh) == 0 || (total >= 0 && r.next >= total) || (total < 0 && len(page) < logPage) {
			return out, nil
		}
	}
}

// show reads the lines after those already read and passes each to f.
func (r *logReader) show(ctx context.Context, f func(string)) error {
	lines, err := r.read(ctx)
	for _, l := range lines {
		f(l)
	}
	return err
}

// isEmptyLog recognises PVE's placeholder for a log with no lines yet
// (pve-common Tools dump_logfile).
func isEmptyLog(page []LogLine) bool {
	return len(page) == 1 && page[0].N == 1 && page[0].T == "no content"
}

func logText(page []LogLine) []string {
	out := make([]string, 0, len(page))
	for _, l := range page {
		out = append(out, l.T)
	}
	return out
}

// isNoSuchTask recognises 400 {upid: "no such task"} (behaviour.md "Tasks").
func isNoSuchTask(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusBadRequest && strings.Contains(ae.Params["upid"], "no such task")
}
