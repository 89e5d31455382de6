// Package apply reads the live state of a Proxmox VE cluster (Observe) and
// carries out a plan.Plan against it (Executor). It is the only package
// that turns corral's intent into API calls.
//
// Every step is safe to interrupt: each one checks the state it needs
// before acting, so running apply again after a crash converges (the
// planner sees what was done and plans only the rest). Volumes are never
// freed except by an explicit destroy --delete-volumes.
//
// Executor is the entry point and holds the settings; the work is split
// by concern into small types over one runner (runner.go: named steps,
// task waits, config writes under the lock retry): observation reads the
// cluster (observe.go), keeperOps and keeper own the keepers (keeper.go,
// keepers.go), mover carries out moves and drains (move.go), guests the
// work inside the containers (guestwork.go, health.go), restorer,
// backups and snapshots the archives and snapshots (restore.go,
// backup.go, protect.go).
package apply
