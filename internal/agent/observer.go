package agent

import (
	"time"

	"github.com/corralhq/corral/internal/apply"
)

// Observer is the executor's observer for the agent's changes: each step
// becomes a log line and a sample of corral_agent_step_duration_seconds
// (there is no terminal to draw progress on).
func (a *Agent) Observer() apply.Observer { return stepObserver{a} }

type stepObserver struct{ a *Agent }

func (o stepObserver) Step(app, phase, detail string) func(error) {
	start := time.Now()
	return func(err error) {
		d := time.Since(start)
		o.a.metrics.steps.With(phase).Observe(d.Seconds())
		if err != nil {
			o.a.cfg.Log.Warn("step failed", "app", app, "phase", phase, "detail", detail, "elapsed", d, "error", err)
			return
		}
		o.a.cfg.Log.Info("step done", "app", app, "phase", phase, "detail", detail, "elapsed", d)
	}
}

func (o stepObserver) TaskLog(string, string, string) {}

func (o stepObserver) Warn(app, msg string) {
	o.a.event(KindError, "warn", app, "%s", msg)
}

// WantsTaskLogs: the agent does not stream task logs (each line costs
// requests).
func (o stepObserver) WantsTaskLogs() bool { return false }
