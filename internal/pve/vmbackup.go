package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// A VM's restores (POST /nodes/{node}/qemu with archive=) and snapshots
// (/nodes/{node}/qemu/{vmid}/snapshot), for kind: vm apps (issue 34). A
// VM's backup is the same vzdump request as a container's (Backup).

// VMRestoreOptions tune RestoreVM.
type VMRestoreOptions struct {
	// Storage receives every restored disk; "" keeps each disk's
	// archived storage.
	Storage string
	// Unique gives every NIC a new MAC and the VM a new SMBIOS UUID
	// (qemu-server's unique=1), so the copy can run beside the original.
	Unique bool
	// Config overrides keys of the archived config (name, tags,
	// description, ipconfig0 …), in PVE's spelling; drive keys are
	// refused by PVE ("option conflicts with option 'archive'").
	Config map[string]string
}

// RestoreVM sends POST /nodes/{node}/qemu with archive and returns the
// UPID of task qmrestore. The VM is left stopped.
func (c *Client) RestoreVM(ctx context.Context, node string, vmid int, archive string, opts VMRestoreOptions) (string, error) {
	q := url.Values{"vmid": {strconv.Itoa(vmid)}, "archive": {archive}}
	for k, v := range opts.Config {
		q.Set(k, v)
	}
	if opts.Storage != "" {
		q.Set("storage", opts.Storage)
	}
	if opts.Unique {
		q.Set("unique", "1")
	}
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/qemu", node), q)
	if err != nil {
		return "", fmt.Errorf("restore vm %d from %s: %w", vmid, archive, err)
	}
	return upid, nil
}

// CreateVMSnapshot sends POST …/qemu/{vmid}/snapshot and returns the UPID
// of task qmsnapshot. The snapshot holds the disks and the config, not
// the RAM (vmstate is not sent): a rollback to it boots the VM afresh,
// as after a power cut, which is what PVE's own default is. A running
// VM with the guest agent has its filesystems frozen meanwhile.
func (c *Client) CreateVMSnapshot(ctx context.Context, node string, vmid int, name, description string) (string, error) {
	q := url.Values{"snapname": {name}}
	if description != "" {
		q.Set("description", description)
	}
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/qemu/%d/snapshot", node, vmid), q)
	if err != nil {
		return "", fmt.Errorf("snapshot vm %d as %s: %w", vmid, name, err)
	}
	return upid, nil
}

// DeleteVMSnapshot sends DELETE …/qemu/{vmid}/snapshot/{snapname} and
// returns the UPID of task qmdelsnapshot.
func (c *Client) DeleteVMSnapshot(ctx context.Context, node string, vmid int, name string) (string, error) {
	upid, err := c.startTask(ctx, http.MethodDelete, pathf("/nodes/%s/qemu/%d/snapshot/%s", node, vmid, name), nil)
	if err != nil {
		return "", fmt.Errorf("delete snapshot %s of vm %d: %w", name, vmid, err)
	}
	return upid, nil
}

// RollbackVMSnapshot sends POST …/qemu/{vmid}/snapshot/{snapname}/rollback
// and returns the UPID of task qmrollback. A running VM is stopped first;
// with start it is started again afterwards.
func (c *Client) RollbackVMSnapshot(ctx context.Context, node string, vmid int, name string, start bool) (string, error) {
	var q url.Values
	if start {
		q = url.Values{"start": {"1"}}
	}
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/qemu/%d/snapshot/%s/rollback", node, vmid, name), q)
	if err != nil {
		return "", fmt.Errorf("roll vm %d back to %s: %w", vmid, name, err)
	}
	return upid, nil
}

// VMSnapshots returns GET /nodes/{node}/qemu/{vmid}/snapshot: a VM's
// snapshots keep the disks they cover, so a free reads them as it reads
// a container's (apply's snapshot references).
func (c *Client) VMSnapshots(ctx context.Context, node string, vmid int) ([]Snapshot, error) {
	var out []Snapshot
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/qemu/%d/snapshot", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("vm %d snapshots: %w", vmid, err)
	}
	return out, nil
}

// VMSnapshotConfig returns GET …/qemu/{vmid}/snapshot/{snapname}/config:
// the config the snapshot holds, its drives among the Values.
func (c *Client) VMSnapshotConfig(ctx context.Context, node string, vmid int, name string) (*ContainerConfig, error) {
	var out ContainerConfig
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/qemu/%d/snapshot/%s/config", node, vmid, name), nil, &out); err != nil {
		return nil, fmt.Errorf("config of snapshot %s of vm %d: %w", name, vmid, err)
	}
	return &out, nil
}
