package model

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// accessControl is the Cluster's access-control surface: every call takes
// the cluster mutex around the Access state (which has no lock of its
// own) and persists what it changes. The HTTP layer uses only these.
// Cluster embeds it, so its methods are the Cluster's (c.Check, c.Login).
type accessControl struct {
	c *Cluster
}

// VerifyToken authenticates an API token (see Access.VerifyToken).
func (ac *accessControl) VerifyToken(fullTokenID, secret string) (Auth, error) {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.Access.VerifyToken(fullTokenID, secret)
}

// VerifyTicket authenticates a PVEAuthCookie ticket.
func (ac *accessControl) VerifyTicket(ticket string) (Auth, error) {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.Access.VerifyTicket(ticket, c.now())
}

// VerifyCSRF checks the CSRFPreventionToken a ticket-authenticated write
// must carry.
func (ac *accessControl) VerifyCSRF(userid, token string) bool {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.Access.VerifyCSRF(userid, token, c.now())
}

// Login is POST /access/ticket: a password login that returns a ticket and
// its CSRF token.
func (ac *accessControl) Login(userid, password string) (ticket, csrf string, err error) {
	c := ac.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.st.Access.VerifyPassword(userid, password); err != nil {
		return "", "", err
	}
	ticket, csrf = c.st.Access.NewTicket(userid, c.now())
	return ticket, csrf, nil
}

// Check is RPCEnvironment check / check_any (see Access.Check).
func (ac *accessControl) Check(auth Auth, path string, privs []string, any bool) error {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.Access.Check(auth, path, privs, any)
}

// CheckPermModify is RPCEnvironment check_perm_modify, the schema's
// "perm-modify" check: Permissions.Modify on path, or for /vms/<id>,
// /storage/<id> and /pool/<id> VM.Allocate, Datastore.Allocate or
// Pool.Allocate instead (403 names them all, joined by "|").
func (ac *accessControl) CheckPermModify(auth Auth, path string) error {
	c := ac.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Access.checkPermModify(auth, path)
}

// HasPriv reports whether auth holds priv on path.
func (ac *accessControl) HasPriv(auth Auth, path, priv string) bool {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.Access.HasPriv(auth, path, priv)
}

// HasAnyPriv reports whether auth holds any privilege on path, the filter
// PVE applies to lists such as /cluster/resources and /storage.
func (ac *accessControl) HasAnyPriv(auth Auth, path string) bool {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.st.Access.Permissions(auth.ID(), path)) > 0
}

// EffectivePermissions is GET /access/permissions: the privileges of userid
// (default: the caller) on path (default: every interesting path).
func (ac *accessControl) EffectivePermissions(auth Auth, userid, path string) (map[string]map[string]int, error) {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.st.Access.CheckReadPermissions(auth, userid); err != nil {
		return nil, err
	}
	if userid == "" {
		userid = auth.ID()
	}
	return c.st.Access.EffectivePermissions(userid, path), nil
}

// canAuditAccess reports whether auth may list every user and ACL entry
// (Sys.Audit or User.Modify on /access, as PVE's index filters).
func (ac *accessControl) canAuditAccess(auth Auth, path string) bool {
	c := ac.c
	privs := c.st.Access.Permissions(auth.ID(), path)
	return privs["Sys.Audit"] || privs["User.Modify"] || privs["Permissions.Modify"]
}

// Users is GET /access/users: every user for an auditor, else the caller's
// own entry. full adds the tokens.
func (ac *accessControl) Users(auth Auth, full bool) []map[string]any {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	a := c.st.Access
	all := c.canAuditAccess(auth, "/access/groups")
	var out []map[string]any
	for _, id := range slices.Sorted(maps.Keys(a.Users)) {
		if !all && id != auth.UserID {
			continue
		}
		u := a.Users[id]
		realm := id[strings.LastIndexByte(id, '@')+1:]
		e := map[string]any{
			"userid": id, "enable": boolInt(u.Enable), "expire": u.Expire,
			"groups": strings.Join(u.Groups, ","), "realm-type": realm,
		}
		for k, v := range map[string]string{"comment": u.Comment, "email": u.Email, "firstname": u.Firstname, "lastname": u.Lastname} {
			if v != "" {
				e[k] = v
			}
		}
		if full {
			e["tokens"] = tokenList(u)
		}
		out = append(out, e)
	}
	if out == nil {
		out = []map[string]any{}
	}
	return out
}

// AddUser is POST /access/users; params are its optional fields.
func (ac *accessControl) AddUser(userid, password string, params map[string]string) error {
	c := ac.c
	opts := UserOptions{
		Comment: params["comment"], Email: params["email"],
		Firstname: params["firstname"], Lastname: params["lastname"],
	}
	if v, ok := params["enable"]; ok && (v == "0" || v == "") {
		opts.Disable = true
	}
	if v := params["expire"]; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return ParamError(map[string]string{"expire": "type check ('integer') failed - got '" + v + "'"})
		}
		opts.Expire = n
	}
	if g := params["groups"]; g != "" {
		opts.Groups = strings.FieldsFunc(g, func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.st.Access.AddUser(userid, password, opts); err != nil {
		return err
	}
	c.markCore()
	return c.saveLocked()
}

// Tokens is GET /access/users/{userid}/token.
func (ac *accessControl) Tokens(userid string) ([]map[string]any, error) {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	u := c.st.Access.Users[userid]
	if u == nil {
		return nil, Failf("no such user ('%s')\n", userid)
	}
	return tokenList(u), nil
}

// TokenInfo is GET /access/users/{userid}/token/{tokenid}.
func (ac *accessControl) TokenInfo(userid, tokenid string) (map[string]any, error) {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, err := c.st.Access.lookupToken(userid, tokenid)
	if err != nil {
		return nil, err
	}
	return tokenInfo(t), nil
}

// AddToken is POST /access/users/{userid}/token/{tokenid}. The secret is
// returned once and kept only as a hash.
func (ac *accessControl) AddToken(userid, tokenid string, privsep bool, comment string, expire int) (fullID, secret string, info map[string]any, err error) {
	c := ac.c
	c.mu.Lock()
	defer c.mu.Unlock()
	secret, err = c.st.Access.AddToken(userid, tokenid, privsep)
	if err != nil {
		return "", "", nil, err
	}
	t := c.st.Access.Users[userid].Tokens[tokenid]
	t.Comment, t.Expire = comment, int64(expire)
	c.markCore()
	if err := c.saveLocked(); err != nil {
		return "", "", nil, err
	}
	return userid + "!" + tokenid, secret, tokenInfo(t), nil
}

// DeleteToken is DELETE /access/users/{userid}/token/{tokenid}.
func (ac *accessControl) DeleteToken(userid, tokenid string) error {
	c := ac.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.st.Access.DeleteToken(userid, tokenid); err != nil {
		return err
	}
	c.markCore()
	return c.saveLocked()
}

// Roles is GET /access/roles.
func (ac *accessControl) Roles() []map[string]any {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []map[string]any
	for _, id := range slices.Sorted(maps.Keys(c.st.Access.Roles)) {
		r := c.st.Access.Roles[id]
		out = append(out, map[string]any{
			"roleid":  id,
			"privs":   strings.Join(slices.Sorted(maps.Keys(r.Privs)), ","),
			"special": boolInt(r.Special),
		})
	}
	return out
}

// AddRole is POST /access/roles.
func (ac *accessControl) AddRole(id string, privs []string) error {
	c := ac.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.st.Access.AddRole(id, privs); err != nil {
		return err
	}
	c.markCore()
	return c.saveLocked()
}

// roleToChangeLocked returns role id for an update or a delete (verb),
// refusing a missing or built-in role with "<verb> role failed: …".
func (ac *accessControl) roleToChangeLocked(id, verb string) (*Role, error) {
	c := ac.c
	op := verb + " role failed"
	r := c.st.Access.Roles[id]
	if r == nil {
		return nil, accessLockedFail(op, "role '"+id+"' does not exist\n")
	}
	if r.Special {
		return nil, accessLockedFail(op, "cannot "+verb+" auto-generated role '"+id+"'\n")
	}
	return r, nil
}

// UpdateRole is PUT /access/roles/{roleid}: replace the privileges, or with
// appendPrivs add to them. Built-in roles cannot change.
func (ac *accessControl) UpdateRole(id string, privs []string, appendPrivs bool) error {
	c := ac.c
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.roleToChangeLocked(id, "update")
	if err != nil {
		return err
	}
	for _, p := range privs {
		if !roleValidPriv(c.st.Access.Version, p) {
			return ParamError(map[string]string{"privs": "invalid format - invalid privilege '" + p + "'\n"})
		}
	}
	if !appendPrivs {
		r.Privs = map[string]bool{}
	}
	for _, p := range privs {
		r.Privs[p] = true
	}
	c.markCore()
	return c.saveLocked()
}

// DeleteRole is DELETE /access/roles/{roleid}; ACL entries naming the role
// go with it.
func (ac *accessControl) DeleteRole(id string) error {
	c := ac.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.roleToChangeLocked(id, "delete"); err != nil {
		return err
	}
	delete(c.st.Access.Roles, id)
	c.st.Access.ACL = slices.DeleteFunc(c.st.Access.ACL, func(e ACLEntry) bool { return e.RoleID == id })
	c.markCore()
	return c.saveLocked()
}

// ACL is GET /access/acl: the entries on paths where auth may audit or
// change permissions.
func (ac *accessControl) ACL(auth Auth) []map[string]any {
	c := ac.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := []map[string]any{}
	for _, e := range c.st.Access.ACL {
		if !auth.IsRoot() && !c.canAuditAccess(auth, e.Path) {
			continue
		}
		out = append(out, map[string]any{
			"path": e.Path, "type": e.Type, "ugid": e.UGID, "roleid": e.RoleID, "propagate": boolInt(e.Propagate),
		})
	}
	return out
}

// UpdateACL is PUT /access/acl performed by auth (see Access.UpdateACL).
func (ac *accessControl) UpdateACL(auth Auth, u ACLUpdate) error {
	c := ac.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.st.Access.UpdateACL(auth, u); err != nil {
		return err
	}
	c.markCore()
	return c.saveLocked()
}

func tokenInfo(t *Token) map[string]any {
	m := map[string]any{"privsep": boolInt(t.Privsep), "expire": t.Expire}
	if t.Comment != "" {
		m["comment"] = t.Comment
	}
	return m
}

func tokenList(u *User) []map[string]any {
	out := []map[string]any{}
	for _, id := range slices.Sorted(maps.Keys(u.Tokens)) {
		m := tokenInfo(u.Tokens[id])
		m["tokenid"] = id
		out = append(out, m)
	}
	return out
}
