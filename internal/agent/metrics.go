package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the agent's Prometheus metrics, in a registry of its own
// (no global state: tests run several agents in one process).
type metrics struct {
	reg            *prometheus.Registry
	reconciles     *prometheus.CounterVec
	apiErrors      *prometheus.CounterVec
	healthFailures *prometheus.CounterVec
	restarts       *prometheus.CounterVec
	backups        *prometheus.CounterVec
	operations     *prometheus.HistogramVec
	steps          *prometheus.HistogramVec
	gitPulls       *prometheus.CounterVec
}

func newMetrics(a *Agent) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_reconciles_total",
		Help: "Reconcile rounds by result: applied, nothing, skipped (lock held by another corral), stopped, error."}, []string{"result"})
	m.apiErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_api_errors_total",
		Help: "Failed reads of the Proxmox VE API by operation."}, []string{"operation"})
	m.healthFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_health_check_failures_total",
		Help: "Failed health check runs by app."}, []string{"app"})
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_restarts_total",
		Help: "Restarts of unhealthy apps by app and result: ok, error, skipped (lock held)."}, []string{"app", "result"})
	m.backups = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_backups_total",
		Help: "Scheduled backups by app and result: ok, failed, skipped (lock held)."}, []string{"app", "result"})
	m.operations = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "corral_agent_operation_duration_seconds",
		Help:    "Duration of the agent's operations: observe, reconcile, health_check, restart, backup, list_backups.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}}, []string{"operation"})
	m.steps = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "corral_agent_step_duration_seconds",
		Help:    "Duration of the executor's steps (PVE tasks and guest work) by phase.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}}, []string{"phase"})
	m.gitPulls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_git_pulls_total",
		Help: "Pulls of the manifest's Git repository (--git) by result: ok, error."}, []string{"result"})
	m.reg.MustRegister(m.gitPulls, m.reconciles, m.apiErrors, m.healthFailures, m.restarts, m.backups, m.operations, m.steps,
		&stateCollector{a: a}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) gitPull(err error) {
	if err != nil {
		m.gitPulls.WithLabelValues("error").Inc()
		return
	}
	m.gitPulls.WithLabelValues("ok").Inc()
}

func (m *metrics) operation(name string, d time.Duration) {
	m.operations.WithLabelValues(name).Observe(d.Seconds())
}

// Registry is the registry /metrics serves.
func (a *Agent) Registry() *prometheus.Registry { return a.metrics.reg }

// stateCollector reports the agent's view of the apps at scrape time.
type stateCollector struct{ a *Agent }

var (
	descApps        = prometheus.NewDesc("corral_agent_apps", "Apps in the manifest.", nil, nil)
	descUp          = prometheus.NewDesc("corral_agent_app_running", "1 when the app's container runs.", []string{"app", "node"}, nil)
	descDrift       = prometheus.NewDesc("corral_agent_app_drift", "1 when the app differs from the manifest (apply would change it).", []string{"app"}, nil)
	descInSync      = prometheus.NewDesc("corral_agent_in_sync", "1 when the cluster matches the manifest.", nil, nil)
	descHealthy     = prometheus.NewDesc("corral_agent_app_healthy", "1 when every health check of the app passed on its last run (apps with checks only).", []string{"app"}, nil)
	descAppRestarts = prometheus.NewDesc("corral_agent_app_restarts", "Restarts of the app by this agent since it started.", []string{"app"}, nil)
	descBackupOK    = prometheus.NewDesc("corral_agent_backup_last_success", "1 when the app's last scheduled backup succeeded.", []string{"app"}, nil)
	descBackupTime  = prometheus.NewDesc("corral_agent_backup_last_success_timestamp_seconds", "Time of the app's newest good backup (Unix seconds).", []string{"app"}, nil)
	descBackupAge   = prometheus.NewDesc("corral_agent_backup_last_success_age_seconds", "Seconds since the app's newest good backup.", []string{"app"}, nil)
	descLastPlan    = prometheus.NewDesc("corral_agent_last_plan_timestamp_seconds", "Time the cluster was last read and planned (Unix seconds).", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descApps, descUp, descDrift, descInSync, descHealthy, descAppRestarts, descBackupOK, descBackupTime, descBackupAge, descLastPlan} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.a.Status()
	c.a.mu.Lock()
	okTimes := map[string]time.Time{}
	for name, as := range c.a.apps {
		okTimes[name] = as.lastOK
	}
	apps := 0
	if c.a.f != nil {
		apps = len(c.a.f.Apps)
	}
	c.a.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	gauge(descApps, float64(apps))
	if !st.LastPlan.IsZero() {
		gauge(descLastPlan, float64(st.LastPlan.Unix()))
		gauge(descInSync, b(st.InSync))
	}
	for _, v := range st.Apps {
		gauge(descUp, b(v.State == "running"), v.Name, v.Node)
		gauge(descDrift, b(v.Drift != "no-op"), v.Name)
		if v.Health != "" {
			gauge(descHealthy, b(v.Health == "healthy"), v.Name)
		}
		gauge(descAppRestarts, float64(v.Restarts), v.Name)
		if v.LastBackup != nil {
			gauge(descBackupOK, b(v.LastBackup.OK), v.Name)
		}
		if t := okTimes[v.Name]; !t.IsZero() {
			gauge(descBackupTime, float64(t.Unix()), v.Name)
			gauge(descBackupAge, st.Now.Sub(t).Seconds(), v.Name)
		}
	}
}
