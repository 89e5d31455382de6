// Package apply reads the live state of a Proxmox VE cluster (Observe) and
// carries out a plan.Plan against it (Executor). It is the only package
// that turns corral's intent into API calls.
//
// Every step is safe to interrupt: each one checks the state it needs
// before acting, so running apply again after a crash converges (the
// planner sees what was done and plans only the rest). Volumes are never
// freed except by an explicit destroy --delete-volumes.
package apply
