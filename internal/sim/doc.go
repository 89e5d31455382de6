// Package sim serves the emulated Proxmox VE API over HTTPS (or plain
// HTTP, or in-process with no listener). It authenticates callers, checks
// every parameter against the official schema (package schema), evaluates
// the schema's permission checks, and translates each route into a call on
// the cluster model (package model), writing PVE's response envelope.
//
// Test-only controls live under /_corral/ (request log, faults, locks),
// apart from the PVE API under /api2/json/.
package sim
