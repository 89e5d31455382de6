package pve

import (
	"context"
	"fmt"
	"net/http"
)

// Methods for /nodes/{node}/qemu: corral manages no VMs, but it reads
// their configs to know which volumes they use (a volume must never be
// given to a container while a VM references it).

// VMPending returns GET /nodes/{node}/qemu/{vmid}/pending: each key of the
// VM's config with its current value and the change waiting for a restart.
func (c *Client) VMPending(ctx context.Context, node string, vmid int) ([]PendingEntry, error) {
	var out []PendingEntry
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/qemu/%d/pending", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("vm %d pending: %w", vmid, err)
	}
	return out, nil
}
