package pve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
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
var upidRE = regexp.MustCompile(`^UPID:([a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?):([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8,9}):([0-9A-Fa-f]{8}):([^:\s]+):([^:\s]*):([^:\s]+):$`)

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

// WaitOptions tune WaitTask. The zero value polls every 50ms at first,
// then every 1/20 of the time waited so far, up to 1s: the end of a task is
// seen at most about 5% after it happens (the overhead target of the
// benchmarks), and a long task is not polled more than once a second.
type WaitOptions struct {
	// OnLog, if set, receives each new task log line in order while
	// waiting (for progress display). It runs on the waiting goroutine.
	OnLog func(line string)
	// Interval is the first poll delay; default 50ms.
	Interval time.Duration
	// MaxInterval caps the poll delay; default 1s.
	MaxInterval time.Duration
}

// TaskResult is a task that finished successfully.
type TaskResult struct {
	UPID string
	Task Task // the final status
	// Warnings are the task log's "WARN: " lines, prefix removed, when
	// the exit status was "WARNINGS: n".
	Warnings []string
}

const (
	// logTailLines is how much of a failed task's log a TaskError keeps.
	logTailLines = 20
	// logPage is the page size for reading long logs.
	logPage = 500
	// unknownTaskPolls bounds how often a new UPID may be "no such task".
	unknownTaskPolls = 10
	// logEvery is how often a running task's log is read for display.
	logEvery = 500 * time.Millisecond
)

// WaitTask polls the task until it stops and judges its exit status
// (behaviour.md §0): "OK" is success; "WARNINGS: n" is success whose result
// carries the WARN lines of the log; anything else is a *TaskError with the
// last lines of the log. Right after the POST that started it, PVE may
// answer 400 "no such task" for a moment, so that answer is retried until
// the task has been seen once. Every wait selects on ctx.
func (c *Client) WaitTask(ctx context.Context, upid string, opts WaitOptions) (*TaskResult, error) {
	if _, err := ParseUPID(upid); err != nil {
		return nil, fmt.Errorf("wait task: %w", err)
	}
	interval, maxInterval := opts.Interval, opts.MaxInterval
	if interval <= 0 {
		interval = 50 * time.Millisecond
	}
	if maxInterval <= 0 {
		maxInterval = time.Second
	}
	maxInterval = max(maxInterval, interval)
	lr := &logReader{c: c, upid: upid, keep: opts.OnLog != nil}
	seen, unknown := false, 0
	start := time.Now()
	first := interval
	var lastLog time.Time
	for {
		st, err := c.TaskStatus(ctx, upid)
		switch {
		case err == nil:
			seen = true
		case !seen && isNoSuchTask(err) && unknown < unknownTaskPolls:
			unknown++
		default:
			return nil, fmt.Errorf("wait task %s: %w", upid, err)
		}
		if seen {
			// The log is read at most twice a second while the task runs
			// (it is for display), and always once it stopped.
			if opts.OnLog != nil && (st.Stopped() || time.Since(lastLog) >= logEvery) {
				lastLog = time.Now()
				lines, err := lr.read(ctx)
				if err != nil {
					return nil, fmt.Errorf("wait task %s: read log: %w", upid, err)
				}
				for _, l := range lines {
					opts.OnLog(l)
				}
			}
			if st.Stopped() {
				return c.finish(ctx, st, lr)
			}
		}
		if err := sleepCtx(ctx, interval); err != nil {
			return nil, fmt.Errorf("wait task %s: %w", upid, err)
		}
		interval = min(max(first, time.Since(start)/20), maxInterval)
	}
}

// finish judges a stopped task. When streaming, lr already holds the
// whole log; otherwise only what the verdict needs is read.
func (c *Client) finish(ctx context.Context, st *Task, lr *logReader) (*TaskResult, error) {
	upid := lr.upid
	res := &TaskResult{UPID: upid, Task: *st}
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
		c.log.WarnContext(ctx, "task finished with warnings", "upid", upid, "exitstatus", st.ExitStatus, "warnings", res.Warnings)
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
}

// read returns the lines after those already read.
func (r *logReader) read(ctx context.Context) ([]string, error) {
	var out []string
	for {
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
