package apply

import "time"

// Observer receives progress from the executor. The text and JSON views
// of package ui implement it; apply never prints.
type Observer interface {
	// Step is called when a step starts; done is called with its outcome.
	Step(app, phase, detail string) (done func(err error))
	// TaskLog streams a PVE task's log lines while corral waits for it.
	TaskLog(app, upid, line string)
	// Warn reports a PVE "WARNINGS: n" line or a finding that needs a human.
	Warn(app, msg string)
}

// Timing is one phase's total duration, for the summary table.
type Timing struct {
	App     string
	Phase   string
	Elapsed time.Duration
}

// TaskLogWanter is an Observer that says whether it shows PVE task log
// lines: reading them costs requests on every task, so the executor
// streams them only to an observer that shows them (one that does not
// implement it gets them).
type TaskLogWanter interface {
	WantsTaskLogs() bool
}

// wantsTaskLogs reports whether o shows task log lines.
func wantsTaskLogs(o Observer) bool {
	w, ok := o.(TaskLogWanter)
	return !ok || w.WantsTaskLogs()
}

// nopObserver discards events.
type nopObserver struct{}

func (nopObserver) Step(string, string, string) func(error) { return func(error) {} }
func (nopObserver) TaskLog(string, string, string)          {}
func (nopObserver) Warn(string, string)                     {}
func (nopObserver) WantsTaskLogs() bool                     { return false }
