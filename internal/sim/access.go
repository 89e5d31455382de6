package sim

import (
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// Access routes (pve-access-control API2/AccessControl.pm, User.pm,
// Role.pm, ACL.pm). They translate onto the cluster's access model.

// postTicket logs in with a password (root@pam's one-time steps and
// ticket-based clients): {ticket, CSRFPreventionToken, username, cap}.
func (a *accessAPI) postTicket(r *request) (any, error) {
	user := r.params["username"]
	if realm := r.params["realm"]; realm != "" && !strings.Contains(user, "@") {
		user += "@" + realm
	}
	ticket, csrf, err := a.cluster.Login(user, r.params["password"])
	if err != nil {
		return nil, err
	}
	return map[string]any{"ticket": ticket, "CSRFPreventionToken": csrf, "username": user, "cap": map[string]any{}}, nil
}

func (a *accessAPI) getPermissions(r *request) (any, error) {
	return a.cluster.EffectivePermissions(r.auth, r.params["userid"], r.params["path"])
}

func (a *accessAPI) getUsers(r *request) (any, error) {
	var enabled *bool
	if _, ok := r.params["enabled"]; ok {
		e := boolParam(r, "enabled")
		enabled = &e
	}
	return a.cluster.Users(r.auth, boolParam(r, "full"), enabled), nil
}

func (a *accessAPI) getUser(r *request) (any, error) {
	return a.cluster.User(r.params["userid"])
}

func (a *accessAPI) putUser(r *request) (any, error) {
	return nil, a.cluster.UpdateUser(r.params["userid"], bodyParams(r, "userid"))
}

func (a *accessAPI) deleteUser(r *request) (any, error) {
	return nil, a.cluster.DeleteUser(r.params["userid"])
}

func (a *accessAPI) getRole(r *request) (any, error) {
	return a.cluster.Role(r.params["roleid"])
}

func (a *accessAPI) postUser(r *request) (any, error) {
	return nil, a.cluster.AddUser(r.params["userid"], r.params["password"], bodyParams(r, "userid", "password"))
}

func (a *accessAPI) getTokens(r *request) (any, error) {
	return a.cluster.Tokens(r.params["userid"])
}

func (a *accessAPI) getToken(r *request) (any, error) {
	return a.cluster.TokenInfo(r.params["userid"], r.params["tokenid"])
}

// postToken creates a token; the secret is in the answer once, as in PVE.
func (a *accessAPI) postToken(r *request) (any, error) {
	privsep := true
	if v, ok := r.params["privsep"]; ok {
		privsep = boolParam(r, "privsep") || v == ""
	}
	fullID, secret, info, err := a.cluster.AddToken(r.params["userid"], r.params["tokenid"], privsep, r.params["comment"], intParam(r, "expire"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"full-tokenid": fullID, "value": secret, "info": info}, nil
}

func (a *accessAPI) deleteToken(r *request) (any, error) {
	return nil, a.cluster.DeleteToken(r.params["userid"], r.params["tokenid"])
}

func (a *accessAPI) getRoles(r *request) (any, error) {
	return a.cluster.Roles(), nil
}

func (a *accessAPI) postRole(r *request) (any, error) {
	return nil, a.cluster.AddRole(r.params["roleid"], splitPrivs(r.params["privs"]))
}

func (a *accessAPI) putRole(r *request) (any, error) {
	return nil, a.cluster.UpdateRole(r.params["roleid"], splitPrivs(r.params["privs"]), boolParam(r, "append"))
}

func (a *accessAPI) deleteRole(r *request) (any, error) {
	return nil, a.cluster.DeleteRole(r.params["roleid"])
}

func (a *accessAPI) getACL(r *request) (any, error) {
	return a.cluster.ACL(r.auth), nil
}

func (a *accessAPI) putACL(r *request) (any, error) {
	propagate := true
	if _, ok := r.params["propagate"]; ok {
		propagate = boolParam(r, "propagate")
	}
	return nil, a.cluster.UpdateACL(r.auth, model.ACLUpdate{
		Path: r.params["path"], Roles: splitList(r.params["roles"]), Users: splitList(r.params["users"]),
		Groups: splitList(r.params["groups"]), Tokens: splitList(r.params["tokens"]),
		Propagate: propagate, Delete: boolParam(r, "delete"),
	})
}

// splitPrivs splits a pve-priv-list.
func splitPrivs(s string) []string { return splitList(s) }

// splitList splits PVE's list formats (comma, semicolon, space or NUL
// separated).
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\x00' })
}
