package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
)

// Nodes returns GET /nodes.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	return memoSlice(ctx, c, "nodes", c.readNodes)
}

func (c *Client) readNodes(ctx context.Context) ([]Node, error) {
	var out []Node
	if err := c.Get(ctx, "/nodes", nil, &out); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// NodeStatus returns GET /nodes/{node}/status.
func (c *Client) NodeStatus(ctx context.Context, node string) (*NodeStatus, error) {
	var out NodeStatus
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/status", node), nil, &out); err != nil {
		return nil, fmt.Errorf("node %s status: %w", node, err)
	}
	return &out, nil
}

// NetworkIface is one row of GET /nodes/{node}/network.
type NetworkIface struct {
	Iface string `json:"iface"`
	Type  string `json:"type"`
}

// Bridges returns the bridges (Linux, OVS and, where SDN is installed,
// vnets) of GET /nodes/{node}/network?type=any_bridge, which is what a
// netN's bridge= may name. Any user may call it, but PVE lists a bridge
// only to callers with SDN.Audit or SDN.Use on it
// (/sdn/zones/localnetwork/<bridge>), so a bridge missing from the answer
// either does not exist or cannot be used by this token.
func (c *Client) Bridges(ctx context.Context, node string) ([]string, error) {
	return memoSlice(ctx, c, "bridges "+node, func(ctx context.Context) ([]string, error) { return c.readBridges(ctx, node) })
}

func (c *Client) readBridges(ctx context.Context, node string) ([]string, error) {
	var rows []NetworkIface
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/network", node), url.Values{"type": {"any_bridge"}}, &rows); err != nil {
		return nil, fmt.Errorf("list bridges on %s: %w", node, err)
	}
	out := []string{}
	for _, r := range rows {
		if r.Iface != "" {
			out = append(out, r.Iface)
		}
	}
	sort.Strings(out)
	return out, nil
}
