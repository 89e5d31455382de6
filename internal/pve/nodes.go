package pve

import (
	"context"
	"fmt"
	"net/http"
)

// Nodes returns GET /nodes.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
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
