package model

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// accessControl is the Cluster's access-control surface: every call takes
// the State's lock around the Access state (which has no lock of its
// own) and persists what it changes. The HTTP layer uses only these.
// Cluster embeds it, so its methods are the Cluster's (c.Check, c.Login).
//
// It owns no state and reaches the cluster only through these four
// fields, not through the whole Cluster: the users, tokens, roles and
// ACLs are the State's Access, saved with the rest of the State so that
// a change is durable as one journal line.
type accessControl struct {
	// stateMu is the State's lock (Cluster.mu).
	stateMu *stateMutex
	// accessOf is the State's Access; stateMu held.
	accessOf func() *Access
	// saveAccess records a change to the Access and saves it; stateMu
	// held for writing.
	saveAccess func() error
	// clock is the cluster's clock (tickets' times).
	clock func() time.Time
}

// VerifyToken authenticates an API token (see Access.VerifyToken).
func (ac *accessControl) VerifyToken(fullTokenID, secret string) (Auth, error) {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	return ac.accessOf().VerifyToken(fullTokenID, secret)
}

// VerifyTicket authenticates a PVEAuthCookie ticket.
func (ac *accessControl) VerifyTicket(ticket string) (Auth, error) {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	return ac.accessOf().VerifyTicket(ticket, ac.clock())
}

// VerifyCSRF checks the CSRFPreventionToken a ticket-authenticated write
// must carry.
func (ac *accessControl) VerifyCSRF(userid, token string) bool {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	return ac.accessOf().VerifyCSRF(userid, token, ac.clock())
}

// Login is POST /access/ticket: a password login that returns a ticket and
// its CSRF token.
func (ac *accessControl) Login(userid, password string) (ticket, csrf string, err error) {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	if _, err := ac.accessOf().VerifyPassword(userid, password); err != nil {
		return "", "", err
	}
	ticket, csrf = ac.accessOf().NewTicket(userid, ac.clock())
	return ticket, csrf, nil
}

// Check is RPCEnvironment check / check_any (see Access.Check).
func (ac *accessControl) Check(auth Auth, path string, privs []string, any bool) error {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	return ac.accessOf().Check(auth, path, privs, any)
}

// CheckPermModify is RPCEnvironment check_perm_modify, the schema's
// "perm-modify" check: Permissions.Modify on path, or for /vms/<id>,
// /storage/<id> and /pool/<id> VM.Allocate, Datastore.Allocate or
// Pool.Allocate instead (403 names them all, joined by "|").
func (ac *accessControl) CheckPermModify(auth Auth, path string) error {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	return ac.accessOf().checkPermModify(auth, path)
}

// HasPriv reports whether auth holds priv on path.
func (ac *accessControl) HasPriv(auth Auth, path, priv string) bool {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	return ac.accessOf().HasPriv(auth, path, priv)
}

// HasAnyPriv reports whether auth holds any privilege on path, the filter
// PVE applies to lists such as /cluster/resources and /storage.
func (ac *accessControl) HasAnyPriv(auth Auth, path string) bool {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	return len(ac.accessOf().Permissions(auth.ID(), path)) > 0
}

// EffectivePermissions is GET /access/permissions: the privileges of userid
// (default: the caller) on path (default: every interesting path).
func (ac *accessControl) EffectivePermissions(auth Auth, userid, path string) (map[string]map[string]int, error) {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	if err := ac.accessOf().CheckReadPermissions(auth, userid); err != nil {
		return nil, err
	}
	if userid == "" {
		userid = auth.ID()
	}
	return ac.accessOf().EffectivePermissions(userid, path), nil
}

// canAuditAccess reports whether auth may list every user and ACL entry
// (Sys.Audit or User.Modify on /access, as PVE's index filters).
func (ac *accessControl) canAuditAccess(auth Auth, path string) bool {
	privs := ac.accessOf().Permissions(auth.ID(), path)
	return privs["Sys.Audit"] || privs["User.Modify"] || privs["Permissions.Modify"]
}

// Users is GET /access/users (API2/User.pm index): every user for an
// auditor, else the caller's own entry; enabled, when set, keeps only the
// enabled (true) or disabled (false) users. Without full an entry has no
// groups and no tokens; with full, groups is the comma list ("" for
// none) and tokens the list, or null for a user that never had one, as
// extract_user_data copies user.cfg's (undefined) token hash.
func (ac *accessControl) Users(auth Auth, full bool, enabled *bool) []map[string]any {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	a := ac.accessOf()
	all := ac.canAuditAccess(auth, "/access/groups")
	out := []map[string]any{}
	for _, id := range slices.Sorted(maps.Keys(a.Users)) {
		u := a.Users[id]
		if !all && id != auth.UserID || enabled != nil && *enabled != u.Enable {
			continue
		}
		e := userData(u, full)
		if full {
			e["groups"] = strings.Join(u.Groups, ",")
			if len(u.Tokens) > 0 {
				e["tokens"] = tokenList(u)
			}
		}
		e["userid"] = id
		e["realm-type"] = id[strings.LastIndexByte(id, '@')+1:]
		out = append(out, e)
	}
	return out
}

// User is GET /access/users/{userid} (read_user): the user's fields, its
// groups as a list and its tokens by id (null without any). 500 "no such
// user ('<id>')\n".
func (ac *accessControl) User(userid string) (map[string]any, error) {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	u := ac.accessOf().Users[userid]
	if u == nil {
		return nil, Failf("no such user ('%s')\n", userid)
	}
	e := userData(u, true)
	e["groups"] = append([]string{}, u.Groups...)
	if len(u.Tokens) > 0 {
		tokens := map[string]any{}
		for id, t := range u.Tokens {
			tokens[id] = tokenInfo(t)
		}
		e["tokens"] = tokens
	}
	return e, nil
}

// userData is extract_user_data's common part: enable, expire and the
// optional fields that are set. With full, tokens is there and null until
// the caller sets it.
func userData(u *User, full bool) map[string]any {
	e := map[string]any{"enable": boolInt(u.Enable), "expire": u.Expire}
	for k, v := range map[string]string{"comment": u.Comment, "email": u.Email, "firstname": u.Firstname, "lastname": u.Lastname} {
		if v != "" {
			e[k] = v
		}
	}
	if full {
		e["tokens"] = nil
	}
	return e
}

// AddUser is POST /access/users; params are its optional fields.
func (ac *accessControl) AddUser(userid, password string, params map[string]string) error {
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
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	if err := ac.accessOf().AddUser(userid, password, opts); err != nil {
		return err
	}
	return ac.saveAccess()
}

// Tokens is GET /access/users/{userid}/token.
func (ac *accessControl) Tokens(userid string) ([]map[string]any, error) {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	u := ac.accessOf().Users[userid]
	if u == nil {
		return nil, Failf("no such user ('%s')\n", userid)
	}
	return tokenList(u), nil
}

// TokenInfo is GET /access/users/{userid}/token/{tokenid}.
func (ac *accessControl) TokenInfo(userid, tokenid string) (map[string]any, error) {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	t, err := ac.accessOf().lookupToken(userid, tokenid)
	if err != nil {
		return nil, err
	}
	return tokenInfo(t), nil
}

// AddToken is POST /access/users/{userid}/token/{tokenid}. The secret is
// returned once and kept only as a hash.
func (ac *accessControl) AddToken(userid, tokenid string, privsep bool, comment string, expire int) (fullID, secret string, info map[string]any, err error) {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	secret, err = ac.accessOf().AddToken(userid, tokenid, privsep)
	if err != nil {
		return "", "", nil, err
	}
	t := ac.accessOf().Users[userid].Tokens[tokenid]
	t.Comment, t.Expire = comment, int64(expire)
	if err := ac.saveAccess(); err != nil {
		return "", "", nil, err
	}
	return userid + "!" + tokenid, secret, tokenInfo(t), nil
}

// DeleteToken is DELETE /access/users/{userid}/token/{tokenid}.
func (ac *accessControl) DeleteToken(userid, tokenid string) error {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	if err := ac.accessOf().DeleteToken(userid, tokenid); err != nil {
		return err
	}
	return ac.saveAccess()
}

// Roles is GET /access/roles.
func (ac *accessControl) Roles() []map[string]any {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	var out []map[string]any
	for _, id := range slices.Sorted(maps.Keys(ac.accessOf().Roles)) {
		r := ac.accessOf().Roles[id]
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
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	if err := ac.accessOf().AddRole(id, privs); err != nil {
		return err
	}
	return ac.saveAccess()
}

// Role is GET /access/roles/{roleid} (read_role): {privilege: 1}; 500
// "role '<id>' does not exist\n".
func (ac *accessControl) Role(id string) (map[string]int, error) {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	r := ac.accessOf().Roles[id]
	if r == nil {
		return nil, Failf("role '%s' does not exist\n", id)
	}
	out := map[string]int{}
	for p, set := range r.Privs {
		if set {
			out[p] = 1
		}
	}
	return out, nil
}

// roleToChangeLocked returns role id for an update or a delete (verb),
// refusing a missing or built-in role with "<verb> role failed: …".
func (ac *accessControl) roleToChangeLocked(id, verb string) (*Role, error) {
	op := verb + " role failed"
	r := ac.accessOf().Roles[id]
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
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	r, err := ac.roleToChangeLocked(id, "update")
	if err != nil {
		return err
	}
	for _, p := range privs {
		if !roleValidPriv(ac.accessOf().Version, p) {
			return ParamError(map[string]string{"privs": "invalid format - invalid privilege '" + p + "'\n"})
		}
	}
	if !appendPrivs {
		r.Privs = map[string]bool{}
	}
	for _, p := range privs {
		r.Privs[p] = true
	}
	return ac.saveAccess()
}

// DeleteRole is DELETE /access/roles/{roleid}; ACL entries naming the role
// go with it.
func (ac *accessControl) DeleteRole(id string) error {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	if _, err := ac.roleToChangeLocked(id, "delete"); err != nil {
		return err
	}
	delete(ac.accessOf().Roles, id)
	ac.accessOf().ACL = slices.DeleteFunc(ac.accessOf().ACL, func(e ACLEntry) bool { return e.RoleID == id })
	return ac.saveAccess()
}

// ACL is GET /access/acl: the entries on paths where auth may audit or
// change permissions.
func (ac *accessControl) ACL(auth Auth) []map[string]any {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	out := []map[string]any{}
	for _, e := range ac.accessOf().ACL {
		if !auth.IsRoot() && !ac.canAuditAccess(auth, e.Path) {
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
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	if err := ac.accessOf().UpdateACL(auth, u); err != nil {
		return err
	}
	return ac.saveAccess()
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
