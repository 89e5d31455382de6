// Package plan decides what corral must change: it compares the desired
// apps (from the manifest) with the observed state of the cluster (read
// from Proxmox VE itself; there is no state file) and returns a Plan.
//
// The planner is pure: no I/O, no clock, no network. A Plan is data that
// package ui renders and package apply executes; apply acts only on the
// Changes it holds.
package plan
