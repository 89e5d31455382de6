// Package agent is corral agent, the always-on controller: its loop
// (reconcile, health, scheduled backups) and its HTTP server, and its
// installation into a container of its own (Install: the agent's own
// manifest, token, files and start).
//
// This first part holds the schedule arithmetic that makes scheduled
// backups restart-safe: a backup belongs to the schedule window that
// contains its time, so an agent restarted inside a window sees the
// archive already taken and does not take a second one.
package agent
