package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Event kinds: what the agent did or saw. They are the JSON API's and the
// status page's vocabulary, and a log line's "event" attribute.
const (
	KindManifest  = "manifest"  // the manifest was (re)loaded, or is invalid
	KindDrift     = "drift"     // an app's drift changed (observe mode reports it)
	KindInSync    = "in_sync"   // an app that drifted matches the manifest again
	KindReconcile = "reconcile" // reconcile mode applied the manifest
	KindSkipped   = "skipped"   // work left for a later round: another corral holds the lock
	KindHealth    = "health"    // a health check failed, or passes again
	KindRestart   = "restart"   // an unhealthy app was restarted
	KindBackup    = "backup"    // a scheduled backup ran (or failed)
	KindError     = "error"     // the cluster could not be read or a change failed
	KindLifecycle = "lifecycle" // the agent started or stopped
	KindGit       = "git"       // a pull of the manifest's repository found a new commit, or failed
)

// Event is one thing the agent did or saw.
type Event struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Level   string    `json:"level"` // info, warn or error
	App     string    `json:"app,omitempty"`
	Message string    `json:"message"`
}

// Events keeps the most recent events in memory (the agent keeps no
// state of its own: after a restart the cluster is read again, and the
// events start over) and logs each one as it is added.
type Events struct {
	mu   sync.Mutex
	max  int
	seq  int64
	list []Event // oldest first
	log  *slog.Logger
}

// NewEvents keeps up to max events.
func NewEvents(max int, log *slog.Logger) *Events {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Events{max: max, log: log}
}

// Add records an event and logs it at its level.
func (e *Events) Add(ev Event) Event {
	e.mu.Lock()
	e.seq++
	ev.Seq = e.seq
	e.list = append(e.list, ev)
	if len(e.list) > e.max {
		e.list = append([]Event(nil), e.list[len(e.list)-e.max:]...)
	}
	e.mu.Unlock()
	level := slog.LevelInfo
	switch ev.Level {
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	attrs := []any{"event", ev.Kind}
	if ev.App != "" {
		attrs = append(attrs, "app", ev.App)
	}
	e.log.Log(context.Background(), level, ev.Message, attrs...)
	return ev
}

// List returns the events, newest first.
func (e *Events) List() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Event, 0, len(e.list))
	for i := len(e.list) - 1; i >= 0; i-- {
		out = append(out, e.list[i])
	}
	return out
}
