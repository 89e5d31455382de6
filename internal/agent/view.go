package agent

import "time"

// These are what the JSON API serves and the status page shows. The
// command line fills the cluster's part (Observation); the agent adds
// what it learned itself (health, restarts, backups).

// Observation is one read of the cluster, planned against the manifest.
type Observation struct {
	Apps  []AppView  `json:"apps"`
	Nodes []NodeView `json:"nodes"`
	// InSync is false when apply would change something (an app, or a
	// keeper to repair); Status also makes it false while an app is
	// unhealthy (a failing health check).
	InSync bool `json:"in_sync"`
}

// AppView is one app of the manifest.
type AppView struct {
	Name  string `json:"name"`
	Node  string `json:"node,omitempty"`
	VMID  int    `json:"vmid,omitempty"`
	State string `json:"state"` // running, stopped, "not created"
	IP    string `json:"ip,omitempty"`
	// Drift is the plan's action for the app: "no-op" when the cluster
	// matches the manifest.
	Drift        string       `json:"drift"`
	DriftReasons []string     `json:"drift_reasons"`
	Volumes      []VolumeView `json:"volumes"`

	// Health is healthy, unhealthy or unknown (not checked yet, or the
	// container is not running); "" when the app has no health checks.
	Health   string      `json:"health,omitempty"`
	Checks   []CheckView `json:"checks"`
	Restarts int         `json:"restarts"`
	// Schedule is the app's backup.schedule ("" none).
	Schedule   string      `json:"backup_schedule,omitempty"`
	LastBackup *BackupView `json:"last_backup,omitempty"`
}

// VolumeView is one of an app's persistent volumes.
type VolumeView struct {
	Name  string `json:"name"`
	VolID string `json:"volid"`
	Mount string `json:"mount,omitempty"`
	Size  int64  `json:"size"`
}

// CheckView is the last result of one health check.
type CheckView struct {
	Name string `json:"name"`
	// Status is healthy, unhealthy or unknown (not run yet).
	Status   string    `json:"status"`
	Failures int       `json:"consecutive_failures"`
	Error    string    `json:"error,omitempty"`
	LastRun  time.Time `json:"last_run,omitzero"`
}

// BackupView is an app's last scheduled backup (or, after a restart of
// the agent, its newest corral archive).
type BackupView struct {
	Time    time.Time `json:"time"`
	OK      bool      `json:"ok"`
	Archive string    `json:"archive,omitempty"`
	Error   string    `json:"error,omitempty"`
	Pruned  []string  `json:"pruned,omitempty"`
}

// NodeView is one cluster node.
type NodeView struct {
	Name   string `json:"name"`
	Online bool   `json:"online"`
	// Lock names who holds corral's lock on the node, if anyone.
	Lock string `json:"lock,omitempty"`
}

// Status is the whole of GET /api/v1/apps.
type Status struct {
	Mode     string    `json:"mode"`
	Manifest string    `json:"manifest"`
	Project  string    `json:"project"`
	InSync   bool      `json:"in_sync"`
	LastPlan time.Time `json:"last_plan,omitzero"`
	Error    string    `json:"error,omitempty"` // the last read of the cluster failed
	// ManifestError is why the manifest file on disk (with --git: at
	// the commit fetched last) was not read or loaded; the last valid
	// one is in force. It names paths and variables, never a value.
	ManifestError string     `json:"manifest_error,omitempty"`
	Apps          []AppView  `json:"apps"`
	Nodes         []NodeView `json:"nodes"`
	Now           time.Time  `json:"now"`
	// Git is where the manifest comes from with --git (absent without).
	Git *GitView `json:"git,omitempty"`
}
