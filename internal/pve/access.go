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
	return handedOver(ctx, c, "permissions "+path+" "+userid, func(ctx context.Context) (Permissions, error) {
		return c.readPermissions(ctx, path, userid)
	})
}

// readPermissions is one GET /access/permissions.
func (c *Client) readPermissions(ctx context.Context, path, userid string) (Permissions, error) {
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

// AddRole creates a custom role (POST /access/roles; Sys.Modify on
// /access).
func (c *Client) AddRole(ctx context.Context, roleid string, privs []string) error {
	q := url.Values{"roleid": {roleid}, "privs": {strings.Join(privs, ",")}}
	if err := c.Post(ctx, "/access/roles", q, nil); err != nil {
		return fmt.Errorf("create role %s: %w", roleid, err)
	}
	return nil
}

// SetRolePrivs replaces a custom role's privileges (PUT
// /access/roles/{roleid}).
func (c *Client) SetRolePrivs(ctx context.Context, roleid string, privs []string) error {
	q := url.Values{"privs": {strings.Join(privs, ",")}}
	if err := c.Put(ctx, "/access/roles/"+roleid, q, nil); err != nil {
		return fmt.Errorf("update role %s: %w", roleid, err)
	}
	return nil
}

// UserEntry is one entry of GET /access/users.
type UserEntry struct {
	UserID string `json:"userid"`
}

// Users returns GET /access/users (only the caller's own entry unless it
// may audit users).
func (c *Client) Users(ctx context.Context) ([]UserEntry, error) {
	var out []UserEntry
	if err := c.Get(ctx, "/access/users", nil, &out); err != nil {
		return nil, fmt.Errorf("users: %w", err)
	}
	return out, nil
}

// AddUser creates a user without a password (POST /access/users): a user
// that only its API tokens log in as.
func (c *Client) AddUser(ctx context.Context, userid, comment string) error {
	q := url.Values{"userid": {userid}}
	if comment != "" {
		q.Set("comment", comment)
	}
	if err := c.Post(ctx, "/access/users", q, nil); err != nil {
		return fmt.Errorf("create user %s: %w", userid, err)
	}
	return nil
}

// TokenEntry is one entry of GET /access/users/{userid}/token.
type TokenEntry struct {
	TokenID string `json:"tokenid"`
}

// Tokens returns GET /access/users/{userid}/token.
func (c *Client) Tokens(ctx context.Context, userid string) ([]TokenEntry, error) {
	var out []TokenEntry
	if err := c.Get(ctx, "/access/users/"+userid+"/token", nil, &out); err != nil {
		return nil, fmt.Errorf("tokens of %s: %w", userid, err)
	}
	return out, nil
}

// AddToken creates a privilege-separated API token and returns its full
// id (user@realm!name) and its secret, which PVE shows this once. The
// secret is a credential: callers must not log or print it.
func (c *Client) AddToken(ctx context.Context, userid, tokenid, comment string) (fullID, secret string, err error) {
	q := url.Values{"privsep": {"1"}}
	if comment != "" {
		q.Set("comment", comment)
	}
	var out struct {
		FullID string `json:"full-tokenid"`
		Value  string `json:"value"`
	}
	if err := c.Post(ctx, "/access/users/"+userid+"/token/"+tokenid, q, &out); err != nil {
		return "", "", fmt.Errorf("create token %s!%s: %w", userid, tokenid, err)
	}
	if out.Value == "" {
		return "", "", fmt.Errorf("create token %s!%s: PVE answered without the secret", userid, tokenid)
	}
	return out.FullID, out.Value, nil
}

// DeleteToken removes an API token (DELETE
// /access/users/{userid}/token/{tokenid}).
func (c *Client) DeleteToken(ctx context.Context, userid, tokenid string) error {
	if err := c.Delete(ctx, "/access/users/"+userid+"/token/"+tokenid, nil, nil); err != nil {
		return fmt.Errorf("delete token %s!%s: %w", userid, tokenid, err)
	}
	return nil
}

// ACLGrant is one PUT /access/acl: roles on path for users and tokens.
type ACLGrant struct {
	Path      string
	Roles     []string
	Users     []string
	Tokens    []string
	Propagate bool
}

// SetACL grants an ACL entry (PUT /access/acl; Permissions.Modify on its
// path). Granting what is already granted changes nothing.
func (c *Client) SetACL(ctx context.Context, g ACLGrant) error {
	prop := "0"
	if g.Propagate {
		prop = "1"
	}
	q := url.Values{"path": {g.Path}, "roles": {strings.Join(g.Roles, ",")}, "propagate": {prop}}
	if len(g.Users) > 0 {
		q.Set("users", strings.Join(g.Users, ","))
	}
	if len(g.Tokens) > 0 {
		q.Set("tokens", strings.Join(g.Tokens, ","))
	}
	if err := c.Put(ctx, "/access/acl", q, nil); err != nil {
		return fmt.Errorf("grant %s on %s: %w", strings.Join(g.Roles, ","), g.Path, err)
	}
	return nil
}
