package pve

import (
	"context"
	"fmt"
	"net/url"
)

// Permissions returns GET /access/permissions for userid ("" for the
// caller, i.e. this token) on path ("" for all paths). A token may read
// its own permissions; reading others' needs Sys.Audit on /access
// (behaviour.md §0 "Token privileges").
func (c *Client) Permissions(ctx context.Context, path, userid string) (Permissions, error) {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if userid != "" {
		q.Set("userid", userid)
	}
	var out Permissions
	if err := c.Get(ctx, "/access/permissions", q, &out); err != nil {
		return nil, fmt.Errorf("permissions: %w", err)
	}
	return out, nil
}
