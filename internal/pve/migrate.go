package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// MigrateOptions tune Migrate. Target is required; zero fields leave
// PVE's defaults.
type MigrateOptions struct {
	// Target is the node to move the CT to.
	Target string
	// Restart shuts a running CT down (waiting Timeout seconds, default
	// 180) and starts it on the target. PVE does not kill a CT that does
	// not stop in time: the task fails "container did not stop".
	Restart bool
	Timeout int
	// TargetStorage maps source storages to target storages:
	// "src:dst,src2:dst2", a single "dst" for all, or "1" for the
	// identity. Shared volumes ignore it.
	TargetStorage string
	// BWLimit caps the copy in KiB/s; 0 leaves the configured limit.
	BWLimit int
}

// Migrate sends POST /nodes/{node}/lxc/{vmid}/migrate (VM.Migrate on
// /vms/{vmid}) and returns the UPID of the vzmigrate task on the source
// node. Only offline migration exists for containers: a running CT needs
// Restart. Ownership, snapshot, lock and target-reachability problems
// are not request errors: the task ends "migration aborted" (nothing
// moved; copies already made stay on the target) or "migration problems"
// (the CT is on the target, but e.g. a source volume could not be
// freed), with the reason only in the task log (behaviour.md (i.2)).
func (c *Client) Migrate(ctx context.Context, node string, vmid int, opts MigrateOptions) (string, error) {
	q := url.Values{"target": {opts.Target}}
	if opts.Restart {
		q.Set("restart", "1")
	}
	if opts.Timeout > 0 {
		q.Set("timeout", strconv.Itoa(opts.Timeout))
	}
	if opts.TargetStorage != "" {
		q.Set("target-storage", opts.TargetStorage)
	}
	if opts.BWLimit > 0 {
		q.Set("bwlimit", strconv.Itoa(opts.BWLimit))
	}
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/lxc/%d/migrate", node, vmid), q)
	if err != nil {
		return "", fmt.Errorf("migrate ct %d from %s to %s: %w", vmid, node, opts.Target, err)
	}
	return upid, nil
}

// MigratePrecondition is GET …/migrate (PVE 9 only).
type MigratePrecondition struct {
	Running      Bool01   `json:"running"`
	AllowedNodes []string `json:"allowed-nodes"`
	// NotAllowedNodes maps a node to why it is not allowed (HA rules).
	NotAllowedNodes map[string]any `json:"not-allowed-nodes"`
}

// MigratePrecondition returns GET /nodes/{node}/lxc/{vmid}/migrate: every
// other cluster node is allowed unless HA rules block it (no online or
// storage check). PVE 8.4 lacks the endpoint and answers 501.
func (c *Client) MigratePrecondition(ctx context.Context, node string, vmid int) (*MigratePrecondition, error) {
	var out MigratePrecondition
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/lxc/%d/migrate", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("ct %d migrate precondition: %w", vmid, err)
	}
	return &out, nil
}
