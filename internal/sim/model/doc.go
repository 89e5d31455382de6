// Package model is the emulated Proxmox VE cluster: nodes, storages and
// their volumes, LXC guests, tasks, locks and access control. It holds the
// state and the rules and knows nothing of HTTP; package sim translates
// requests into calls on a *Cluster and results back into PVE's envelope.
//
// Behaviour follows the real pve-container, pve-storage and
// pve-access-control code as recorded in ../shared/pve-api/behaviour.md;
// comments cite its sections as "behaviour.md §x". Every error a client can
// see is an *Error carrying PVE's status code and exact message.
package model
