package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Methods for /nodes/{node}/lxc. Those returning a string return the UPID
// of the task PVE forked; pass it to WaitTask. A non-nil error from them
// means the request itself failed and no task was started (behaviour.md §0).

// ListContainers returns GET /nodes/{node}/lxc, in PVE's (unsorted) order.
func (c *Client) ListContainers(ctx context.Context, node string) ([]Container, error) {
	var out []Container
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/lxc", node), nil, &out); err != nil {
		return nil, fmt.Errorf("list cts on %s: %w", node, err)
	}
	return out, nil
}

// ContainerStatus returns GET /nodes/{node}/lxc/{vmid}/status/current.
func (c *Client) ContainerStatus(ctx context.Context, node string, vmid int) (*ContainerStatus, error) {
	var out ContainerStatus
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/lxc/%d/status/current", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("ct %d status: %w", vmid, err)
	}
	return &out, nil
}

// ContainerConfig returns GET /nodes/{node}/lxc/{vmid}/config. With
// current=false PVE merges pending changes into the values; with
// current=true it returns what is in effect now.
func (c *Client) ContainerConfig(ctx context.Context, node string, vmid int, current bool) (*ContainerConfig, error) {
	var q url.Values
	if current {
		q = url.Values{"current": {"1"}}
	}
	var out ContainerConfig
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/lxc/%d/config", node, vmid), q, &out); err != nil {
		return nil, fmt.Errorf("ct %d config: %w", vmid, err)
	}
	return &out, nil
}

// Pending returns GET /nodes/{node}/lxc/{vmid}/pending: each key with its
// current value and the change waiting for a restart.
func (c *Client) Pending(ctx context.Context, node string, vmid int) ([]PendingEntry, error) {
	var out []PendingEntry
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/lxc/%d/pending", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("ct %d pending: %w", vmid, err)
	}
	return out, nil
}

// UpdateContainerConfig sends PUT /nodes/{node}/lxc/{vmid}/config. It is
// synchronous: PVE allocates and hot-plugs inside the request and answers
// null, not a UPID (fixtures/put-config-returns-null.json). Set
// u.Digest to fail with ErrModified on a concurrent change.
func (c *Client) UpdateContainerConfig(ctx context.Context, node string, vmid int, u *ConfigUpdate) error {
	if _, err := c.call(ctx, http.MethodPut, pathf("/nodes/%s/lxc/%d/config", node, vmid), u.Encode(), nil); err != nil {
		return fmt.Errorf("update ct %d config: %w", vmid, err)
	}
	return nil
}

// CreateContainer sends POST /nodes/{node}/lxc (a restore is
// RestoreContainer) and returns the task's UPID.
func (c *Client) CreateContainer(ctx context.Context, node string, cc *ContainerCreate) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/lxc", node), cc.Encode())
	if err != nil {
		return "", fmt.Errorf("create ct %d: %w", cc.VMID, err)
	}
	return upid, nil
}

// StartContainer sends POST …/status/start.
func (c *Client) StartContainer(ctx context.Context, node string, vmid int) (string, error) {
	return c.power(ctx, node, vmid, "start", nil)
}

// StopContainer sends POST …/status/stop: an immediate stop, like pulling
// the plug.
func (c *Client) StopContainer(ctx context.Context, node string, vmid int) (string, error) {
	return c.power(ctx, node, vmid, "stop", nil)
}

// ShutdownOptions tune ShutdownContainer; zero fields use PVE's defaults
// (timeout 60s, no forced stop).
type ShutdownOptions struct {
	Timeout   int  // seconds to wait for a clean shutdown
	ForceStop bool // stop hard once Timeout has passed
}

// ShutdownContainer sends POST …/status/shutdown: a clean shutdown.
func (c *Client) ShutdownContainer(ctx context.Context, node string, vmid int, opts ShutdownOptions) (string, error) {
	q := url.Values{}
	if opts.Timeout > 0 {
		q.Set("timeout", strconv.Itoa(opts.Timeout))
	}
	if opts.ForceStop {
		q.Set("forceStop", "1")
	}
	return c.power(ctx, node, vmid, "shutdown", q)
}

// RebootContainer sends POST …/status/reboot.
func (c *Client) RebootContainer(ctx context.Context, node string, vmid int) (string, error) {
	return c.power(ctx, node, vmid, "reboot", nil)
}

func (c *Client) power(ctx context.Context, node string, vmid int, action string, params url.Values) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/lxc/%d/status/%s", node, vmid, action), params)
	if err != nil {
		return "", fmt.Errorf("%s ct %d: %w", action, vmid, err)
	}
	return upid, nil
}

// DestroyOptions tune DestroyContainer.
type DestroyOptions struct {
	// Force destroys a running CT (it is stopped first).
	Force bool
	// Purge also removes the CT from backup jobs, replication and HA.
	Purge bool
	// DestroyUnreferencedDisks also deletes volumes of the CT's VMID that
	// its config does not reference; nil leaves PVE's default.
	DestroyUnreferencedDisks *bool
}

// DestroyContainer sends DELETE /nodes/{node}/lxc/{vmid}. It destroys only
// volumes named for this VMID (behaviour.md §a); a protected CT fails
// synchronously with "can't remove CT <vmid> - protection mode enabled".
func (c *Client) DestroyContainer(ctx context.Context, node string, vmid int, opts DestroyOptions) (string, error) {
	q := url.Values{}
	if opts.Force {
		q.Set("force", "1")
	}
	if opts.Purge {
		q.Set("purge", "1")
	}
	if opts.DestroyUnreferencedDisks != nil {
		q.Set("destroy-unreferenced-disks", bit(*opts.DestroyUnreferencedDisks))
	}
	upid, err := c.startTask(ctx, http.MethodDelete, pathf("/nodes/%s/lxc/%d", node, vmid), q)
	if err != nil {
		return "", fmt.Errorf("destroy ct %d: %w", vmid, err)
	}
	return upid, nil
}

// ResizeContainer sends PUT …/resize for disk (rootfs or mpN) to size
// ("10G", or "+2G" to grow by). Disks only grow; a volume owned by another
// CT must be resized through its owner (behaviour.md §f).
func (c *Client) ResizeContainer(ctx context.Context, node string, vmid int, disk, size string) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPut, pathf("/nodes/%s/lxc/%d/resize", node, vmid), url.Values{"disk": {disk}, "size": {size}})
	if err != nil {
		return "", fmt.Errorf("resize ct %d %s: %w", vmid, disk, err)
	}
	return upid, nil
}

// MoveVolume sends POST …/move_volume (behaviour.md §d).
func (c *Client) MoveVolume(ctx context.Context, node string, vmid int, m *VolumeMove) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/lxc/%d/move_volume", node, vmid), m.Encode())
	if err != nil {
		return "", fmt.Errorf("move ct %d volume %s: %w", vmid, m.Volume, err)
	}
	return upid, nil
}

// Interfaces returns GET …/interfaces: the running CT's network devices
// and addresses.
func (c *Client) Interfaces(ctx context.Context, node string, vmid int) ([]Interface, error) {
	var out []Interface
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/lxc/%d/interfaces", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("ct %d interfaces: %w", vmid, err)
	}
	return out, nil
}

// startTask sends a request that forks a task and returns its UPID.
func (c *Client) startTask(ctx context.Context, method, escPath string, params url.Values) (string, error) {
	var upid string
	if _, err := c.call(ctx, method, escPath, params, &upid); err != nil {
		return "", err
	}
	if upid == "" {
		return "", fmt.Errorf("%s %s: %w", method, displayPath(escPath), ErrNoUPID)
	}
	return upid, nil
}
