// Package pve is corral's typed client for the Proxmox VE /api2/json API.
//
// It owns everything between a Go call and PVE's wire format: API-token
// authentication, TLS verification (CA, SHA-256 pinning or insecure),
// form-encoded requests, the {"data": …} envelope, bounded concurrency,
// safe retries, error classification (error.go), the task contract
// (tasks.go: UPIDs, waiting, logs) and PVE's awkward wire types (wire.go,
// propstr.go, config.go).
//
// The client never shares types with the emulator in internal/sim: if both
// used one wire type, a wrong type would look right to both sides.
package pve
