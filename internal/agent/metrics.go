package agent

import (
	"time"

	"github.com/corralhq/corral/internal/metrics"
)

// agentMetrics are the agent's Prometheus metrics, in a registry of its
// own (no global state: tests run several agents in one process).
type agentMetrics struct {
	reg            *metrics.Registry
	reconciles     *metrics.CounterVec
	apiErrors      *metrics.CounterVec
	healthFailures *metrics.CounterVec
	restarts       *metrics.CounterVec
	backups        *metrics.CounterVec
	operations     *metrics.HistogramVec
	steps          *metrics.HistogramVec
	gitPulls       *metrics.CounterVec
}

var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

func newMetrics(a *Agent) *agentMetrics {
	r := metrics.NewRegistry()
	m := &agentMetrics{reg: r}
	m.reconciles = r.Counter("corral_agent_reconciles_total",
		"Reconcile rounds by result: applied, nothing, skipped (lock held by another corral), stopped, error.", "result")
	m.apiErrors = r.Counter("corral_agent_api_errors_total",
		"Failed reads of the Proxmox VE API by operation.", "operation")
	m.healthFailures = r.Counter("corral_agent_health_check_failures_total",
		"Failed health check runs by app.", "app")
	m.restarts = r.Counter("corral_agent_restarts_total",
		"Restarts of unhealthy apps by app and result: ok, error, skipped (lock held).", "app", "result")
	m.backups = r.Counter("corral_agent_backups_total",
		"Scheduled backups by app and result: ok, failed, skipped (lock held).", "app", "result")
	m.operations = r.Histogram("corral_agent_operation_duration_seconds",
		"Duration of the agent's operations: observe, reconcile, health_check, restart, backup, list_backups.", durationBuckets, "operation")
	m.steps = r.Histogram("corral_agent_step_duration_seconds",
		"Duration of the executor's steps (PVE tasks and guest work) by phase.", durationBuckets, "phase")
	m.gitPulls = r.Counter("corral_agent_git_pulls_total",
		"Pulls of the manifest's Git repository (--git) by result: ok, error.", "result")
	newStateGauges(r, a)
	r.AddRuntime()
	return m
}

func (m *agentMetrics) gitPull(err error) {
	if err != nil {
		m.gitPulls.With("error").Inc()
		return
	}
	m.gitPulls.With("ok").Inc()
}

func (m *agentMetrics) operation(name string, d time.Duration) {
	m.operations.With(name).Observe(d.Seconds())
}

// Registry is the registry /metrics serves.
func (a *Agent) Registry() *metrics.Registry { return a.metrics.reg }

// newStateGauges registers the gauges of the agent's view of the apps,
// computed at each scrape.
func newStateGauges(r *metrics.Registry, a *Agent) {
	var (
		apps        = r.GaugeFamily("corral_agent_apps", "Apps in the manifest.")
		up          = r.GaugeFamily("corral_agent_app_running", "1 when the app's container runs.", "app", "node")
		drift       = r.GaugeFamily("corral_agent_app_drift", "1 when the app differs from the manifest (apply would change it).", "app")
		inSync      = r.GaugeFamily("corral_agent_in_sync", "1 when the cluster matches the manifest.")
		healthy     = r.GaugeFamily("corral_agent_app_healthy", "1 when every health check of the app passed on its last run (apps with checks only).", "app")
		appRestarts = r.GaugeFamily("corral_agent_app_restarts", "Restarts of the app by this agent since it started.", "app")
		backupOK    = r.GaugeFamily("corral_agent_backup_last_success", "1 when the app's last scheduled backup succeeded.", "app")
		backupTime  = r.GaugeFamily("corral_agent_backup_last_success_timestamp_seconds", "Time of the app's newest good backup (Unix seconds).", "app")
		backupAge   = r.GaugeFamily("corral_agent_backup_last_success_age_seconds", "Seconds since the app's newest good backup.", "app")
		lastPlan    = r.GaugeFamily("corral_agent_last_plan_timestamp_seconds", "Time the cluster was last read and planned (Unix seconds).")
	)
	r.Collect(func(s *metrics.Scrape) {
		st := a.Status()
		a.mu.Lock()
		okTimes := map[string]time.Time{}
		for name, as := range a.apps {
			okTimes[name] = as.lastOK
		}
		n := 0
		if a.f != nil {
			n = len(a.f.Apps)
		}
		a.mu.Unlock()
		b := func(v bool) float64 {
			if v {
				return 1
			}
			return 0
		}
		s.Set(apps, float64(n))
		if !st.LastPlan.IsZero() {
			s.Set(lastPlan, float64(st.LastPlan.Unix()))
			s.Set(inSync, b(st.InSync))
		}
		for _, v := range st.Apps {
			s.Set(up, b(v.State == "running"), v.Name, v.Node)
			s.Set(drift, b(v.Drift != "no-op"), v.Name)
			if v.Health != "" {
				s.Set(healthy, b(v.Health == "healthy"), v.Name)
			}
			s.Set(appRestarts, float64(v.Restarts), v.Name)
			if v.LastBackup != nil {
				s.Set(backupOK, b(v.LastBackup.OK), v.Name)
			}
			if t := okTimes[v.Name]; !t.IsZero() {
				s.Set(backupTime, float64(t.Unix()), v.Name)
				s.Set(backupAge, st.Now.Sub(t).Seconds(), v.Name)
			}
		}
	})
}
