package pve

import (
	"context"
	"fmt"
	"net/url"
	"strings"
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

// ACLEntry is one entry of GET /access/acl. Type is user, group or token;
// UGID names the user, group or token (user@realm!name).
type ACLEntry struct {
	Path      string `json:"path"`
	Type      string `json:"type"`
	UGID      string `json:"ugid"`
	RoleID    string `json:"roleid"`
	Propagate Bool01 `json:"propagate"`
}

// Role is one entry of GET /access/roles.
type Role struct {
	RoleID  string `json:"roleid"`
	Privs   string `json:"privs,omitempty"` // comma-separated
	Special Bool01 `json:"special,omitempty"`
}

// PrivList splits Privs.
func (r Role) PrivList() []string {
	return strings.FieldsFunc(r.Privs, func(c rune) bool { return c == ',' || c == ' ' || c == ';' })
}

// ACL returns GET /access/acl. PVE lists only the entries the caller may
// audit (Sys.Audit on /access, or Permissions.Modify on the entry's path),
// so an empty answer may mean "not allowed to see".
func (c *Client) ACL(ctx context.Context) ([]ACLEntry, error) {
	var out []ACLEntry
	if err := c.Get(ctx, "/access/acl", nil, &out); err != nil {
		return nil, fmt.Errorf("acl: %w", err)
	}
	return out, nil
}

// Roles returns GET /access/roles, which any authenticated caller may
// read.
func (c *Client) Roles(ctx context.Context) ([]Role, error) {
	var out []Role
	if err := c.Get(ctx, "/access/roles", nil, &out); err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	return out, nil
}
