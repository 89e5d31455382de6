package pve

import (
	"context"
	"fmt"
)

// Version returns GET /version. Any token may read it, which makes it the
// cheapest check that endpoint, TLS and token all work.
func (c *Client) Version(ctx context.Context) (*Version, error) {
	var v Version
	if err := c.Get(ctx, "/version", nil, &v); err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	return &v, nil
}
