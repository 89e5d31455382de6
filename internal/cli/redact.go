package cli

import (
	"bytes"
	"errors"
	"io"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/ui"
)

// redactObserver passes the executor's events on with the manifest's
// secret values replaced by their references: a step's detail or error,
// a task or guest log line and a warning can all quote a value read
// through ${env:…} or ${file:…} (a description, a script's output).
type redactObserver struct {
	next apply.Observer
	f    *manifest.File
}

func newRedactObserver(f *manifest.File, next apply.Observer) apply.Observer {
	if f == nil {
		return next
	}
	return redactObserver{next: next, f: f}
}

func (r redactObserver) Step(app, phase, detail string) func(error) {
	done := r.next.Step(app, phase, r.f.Redact(detail))
	return func(err error) { done(redactErr(r.f, err)) }
}

func (r redactObserver) TaskLog(app, upid, line string) { r.next.TaskLog(app, upid, r.f.Redact(line)) }

func (r redactObserver) Warn(app, msg string) { r.next.Warn(app, r.f.Redact(msg)) }

// WantsTaskLogs passes on whether the next observer shows task logs.
func (r redactObserver) WantsTaskLogs() bool {
	w, ok := r.next.(apply.TaskLogWanter)
	return !ok || w.WantsTaskLogs()
}

// redactPlan replaces the manifest's secret values in the text of a plan:
// a config edit shows, say, a description read from ${env:DESC} by its
// reference, on both sides of the edit.
func redactPlan(f *manifest.File, pj *ui.PlanJSON) {
	if f == nil || pj == nil {
		return
	}
	all := func(ss []string) {
		for i := range ss {
			ss[i] = f.Redact(ss[i])
		}
	}
	all(pj.Warnings)
	all(pj.Refused)
	for i := range pj.Keepers {
		all(pj.Keepers[i].Reasons)
	}
	for i := range pj.Changes {
		c := &pj.Changes[i]
		all(c.Reasons)
		for j := range c.Config {
			c.Config[j].Old = f.Redact(c.Config[j].Old)
			c.Config[j].New = f.Redact(c.Config[j].New)
		}
		for j := range c.Volumes {
			c.Volumes[j].Mount = f.Redact(c.Volumes[j].Mount)
		}
	}
}

// redactErr strips the manifest's secret values from an error's text.
func redactErr(f *manifest.File, err error) error {
	if f == nil || err == nil {
		return err
	}
	msg := f.Redact(err.Error())
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// writeRedacted renders through render and writes the text to w with
// f's secret values redacted: a report can quote what the cluster holds
// (a description, a script), which may carry them.
func writeRedacted(w io.Writer, f *manifest.File, render func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return err
	}
	_, err := io.WriteString(w, f.Redact(buf.String()))
	return err
}
