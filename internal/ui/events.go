package ui

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/apply"
)

// Progress is the human view of apply events: one line per step start and
// end with its elapsed time, "still running" lines every Interval while a
// step takes long, and warnings. It writes to stderr.
type Progress struct {
	W        io.Writer
	Interval time.Duration // 0 = 10s
	// TaskLogs shows every PVE task log line (verbose).
	TaskLogs bool

	mu sync.Mutex
}

var _ apply.Observer = (*Progress)(nil)

func (p *Progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.W, format, args...)
}

// Step implements apply.Observer.
func (p *Progress) Step(app, phase, detail string) func(error) {
	start := time.Now()
	p.printf("%s: %s %s...\n", app, phase, detail)
	interval := p.Interval
	if interval == 0 {
		interval = 10 * time.Second
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.printf("%s: still %s... [%s elapsed]\n", app, phase, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func(err error) {
		close(stop)
		el := time.Since(start).Round(10 * time.Millisecond)
		if err != nil {
			p.printf("%s: %s failed after %s\n", app, phase, el)
			return
		}
		p.printf("%s: %s done [%s]\n", app, phase, el)
	}
}

// TaskLog implements apply.Observer.
// Lines from inside the guest (upid "") always show: provisioning output
// is what the user waits for. PVE task logs show with --verbose.
func (p *Progress) TaskLog(app, upid, line string) {
	if p.TaskLogs || upid == "" {
		p.printf("%s:   | %s\n", app, line)
	}
}

// WantsTaskLogs implements apply.TaskLogWanter: PVE task logs are read
// only with --verbose, when they show.
func (p *Progress) WantsTaskLogs() bool { return p.TaskLogs }

// Warn implements apply.Observer.
func (p *Progress) Warn(app, msg string) { p.printf("%s: warning: %s\n", app, msg) }

// JSONEvents writes apply events as JSON lines with a "type" field, for
// scripts (apply -o json).
type JSONEvents struct {
	W  io.Writer
	mu sync.Mutex
}

var _ apply.Observer = (*JSONEvents)(nil)

func (j *JSONEvents) emit(v map[string]any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	v["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(v)
	j.W.Write(append(b, '\n'))
}

// Emit writes one event of the given type with extra fields (the plan, the
// final summary).
func (j *JSONEvents) Emit(typ string, fields map[string]any) {
	v := map[string]any{"type": typ}
	for k, f := range fields {
		v[k] = f
	}
	j.emit(v)
}

// Step implements apply.Observer.
func (j *JSONEvents) Step(app, phase, detail string) func(error) {
	start := time.Now()
	j.emit(map[string]any{"type": "step_start", "app": app, "phase": phase, "detail": detail})
	return func(err error) {
		ev := map[string]any{"type": "step_end", "app": app, "phase": phase, "elapsed_ms": time.Since(start).Milliseconds()}
		if err != nil {
			ev["error"] = err.Error()
		}
		j.emit(ev)
	}
}

// TaskLog implements apply.Observer.
func (j *JSONEvents) TaskLog(app, upid, line string) {
	j.emit(map[string]any{"type": "task_log", "app": app, "upid": upid, "line": line})
}

// Warn implements apply.Observer.
func (j *JSONEvents) Warn(app, msg string) {
	j.emit(map[string]any{"type": "warning", "app": app, "message": msg})
}

// WriteTimings prints the phase timing table (like the seeds' create.sh):
// phases in the order they first ran, summed per app and phase.
func WriteTimings(w io.Writer, ts []apply.Timing, total time.Duration) {
	if len(ts) == 0 {
		return
	}
	type row struct {
		app, phase string
		d          time.Duration
		first      int
	}
	rows := map[string]*row{}
	for i, t := range ts {
		k := t.App + "\x00" + t.Phase
		if rows[k] == nil {
			rows[k] = &row{app: t.App, phase: t.Phase, first: i}
		}
		rows[k].d += t.Elapsed
	}
	list := make([]*row, 0, len(rows))
	for _, r := range rows {
		list = append(list, r)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].first < list[j].first })
	fmt.Fprintf(w, "\n%-24s %-12s %10s\n", "APP", "PHASE", "DURATION")
	fmt.Fprintln(w, strings.Repeat("─", 48))
	for _, r := range list {
		fmt.Fprintf(w, "%-24s %-12s %10s\n", r.app, r.phase, r.d.Round(10*time.Millisecond))
	}
	fmt.Fprintln(w, strings.Repeat("─", 48))
	fmt.Fprintf(w, "%-37s %10s\n", "TOTAL", total.Round(10*time.Millisecond))
}
