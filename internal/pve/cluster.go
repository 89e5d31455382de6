package pve

import (
	"context"
	"fmt"
	"net/url"
	"slices"
)

// ClusterResources returns GET /cluster/resources, filtered by typ ("vm",
// "storage", "node", "sdn"; "" for all). It is the one call that lists
// guests of every node.
func (c *Client) ClusterResources(ctx context.Context, typ string) ([]ClusterResource, error) {
	out, err := handedOver(ctx, c, "resources "+typ, func(ctx context.Context) ([]ClusterResource, error) {
		return c.readResources(ctx, typ)
	})
	return slices.Clone(out), err
}

// readResources is one GET /cluster/resources.
func (c *Client) readResources(ctx context.Context, typ string) ([]ClusterResource, error) {
	var q url.Values
	if typ != "" {
		q = url.Values{"type": {typ}}
	}
	var out []ClusterResource
	if err := c.Get(ctx, "/cluster/resources", q, &out); err != nil {
		return nil, fmt.Errorf("cluster resources: %w", err)
	}
	return out, nil
}

// NextID returns GET /cluster/nextid, the lowest free VMID. PVE sends it as
// a string; another client may take it before a create that uses it, which
// then fails with IsAlreadyExists. While c memoizes (MemoizeSetup) it is
// read once and counted up locally after (runMemo.nextIDOnce).
func (c *Client) NextID(ctx context.Context) (int, error) {
	if c.memo != nil {
		return c.memo.nextIDOnce(ctx, c.readNextID, true)
	}
	return c.readNextID(ctx)
}

// PeekNextID is the VMID NextID would hand out now, without taking it:
// for a report (corral doctor's facts), so that a run's first create
// still gets the id the report showed.
func (c *Client) PeekNextID(ctx context.Context) (int, error) {
	if c.memo != nil {
		return c.memo.nextIDOnce(ctx, c.readNextID, false)
	}
	return c.readNextID(ctx)
}

// readNextID is one GET /cluster/nextid.
func (c *Client) readNextID(ctx context.Context) (int, error) {
	var id IntOrString
	if err := c.Get(ctx, "/cluster/nextid", nil, &id); err != nil {
		return 0, fmt.Errorf("next vmid: %w", err)
	}
	return int(id), nil
}

// ClusterStatus returns GET /cluster/status.
func (c *Client) ClusterStatus(ctx context.Context) ([]ClusterStatusEntry, error) {
	var out []ClusterStatusEntry
	if err := c.Get(ctx, "/cluster/status", nil, &out); err != nil {
		return nil, fmt.Errorf("cluster status: %w", err)
	}
	return out, nil
}
