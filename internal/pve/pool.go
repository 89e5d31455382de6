package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Resource pools (pve-manager API2/Pool.pm, PVE 8.1's query form
// /pools?poolid=…). Creating one and adding a guest need Pool.Allocate on
// /pool/{poolid}; adding a guest also VM.Allocate (or Permissions.Modify)
// on /vms/{vmid}. The list shows the pools the caller holds Pool.Audit on.

// PoolEntry is one entry of GET /pools.
type PoolEntry struct {
	PoolID  string `json:"poolid"`
	Comment string `json:"comment,omitempty"`
}

// Pools lists the pools the token may audit.
func (c *Client) Pools(ctx context.Context) ([]PoolEntry, error) {
	var out []PoolEntry
	if _, err := c.call(ctx, http.MethodGet, "/pools", nil, &out); err != nil {
		return nil, fmt.Errorf("pools: %w", err)
	}
	return out, nil
}

// CreatePool sends POST /pools.
func (c *Client) CreatePool(ctx context.Context, id, comment string) error {
	q := url.Values{"poolid": {id}}
	if comment != "" {
		q.Set("comment", comment)
	}
	if _, err := c.call(ctx, http.MethodPost, "/pools", q, nil); err != nil {
		return fmt.Errorf("create pool %s: %w", id, err)
	}
	return nil
}

// AddToPool sends PUT /pools with vms and allow-move: the guest joins
// pool id, leaving the pool it was in.
func (c *Client) AddToPool(ctx context.Context, id string, vmid int) error {
	q := url.Values{"poolid": {id}, "vms": {strconv.Itoa(vmid)}, "allow-move": {"1"}}
	if _, err := c.call(ctx, http.MethodPut, "/pools", q, nil); err != nil {
		return fmt.Errorf("add ct %d to pool %s: %w", vmid, id, err)
	}
	return nil
}
