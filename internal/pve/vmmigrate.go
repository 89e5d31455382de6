package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// MigrateVM sends POST /nodes/{node}/qemu/{vmid}/migrate (VM.Migrate on
// /vms/{vmid}) for a stopped VM and returns the UPID of the qmigrate task
// on the source node. Offline, qemu-server copies every local disk the VM
// owns (attached, unused, or named by a snapshot) to the same storage on
// the target and frees the source's copies once the config is there;
// with-local-disks and online are for live migration only. Snapshots on
// a local disk that cannot carry them (LVM-thin) fail the task, with the
// reason in its log ("non-migratable snapshot exists").
func (c *Client) MigrateVM(ctx context.Context, node string, vmid int, target string) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/qemu/%d/migrate", node, vmid), url.Values{"target": {target}})
	if err != nil {
		return "", fmt.Errorf("migrate vm %d from %s to %s: %w", vmid, node, target, err)
	}
	return upid, nil
}
