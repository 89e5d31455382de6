package sim

import (
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// Access routes (pve-access-control API2/AccessControl.pm, User.pm,
// Role.pm, ACL.pm). They translate onto the cluster's access model.

// postTicket logs in with a password (root@pam's one-time steps and
// ticket-based clients): {ticket, CSRFPreventionToken, username, cap}.
func (s *Server) postTicket(r *request) (any, error) {
	user := r.params["username"]
	if realm := r.params["realm"]; realm != "" && !strings.Contains(user, "@") {
		user += "@" + realm
	}
	ticket, csrf, err := s.cluster.Login(user, r.params["password"])
	if err != nil {
		return nil, err
	}
	return map[string]any{"ticket": ticket, "CSRFPreventionToken": csrf, "username": user, "cap": map[string]any{}}, nil
}

func (s *Server) getPermissions(r *request) (any, error) {
	return s.cluster.EffectivePermissions(r.auth, r.params["userid"], r.params["path"])
}

func (s *Server) getUsers(r *request) (any, error) {
	return s.cluster.Users(r.auth, boolParam(r, "full")), nil
}

func (s *Server) postUser(r *request) (any, error) {
	return nil, s.cluster.AddUser(r.params["userid"], r.params["password"], bodyParams(r, "userid", "password"))
}

func (s *Server) getTokens(r *request) (any, error) {
	return s.cluster.Tokens(r.params["userid"])
}

func (s *Server) getToken(r *request) (any, error) {
	return s.cluster.TokenInfo(r.params["userid"], r.params["tokenid"])
}

// postToken creates a token; the secret is in the answer once, as in PVE.
func (s *Server) postToken(r *request) (any, error) {
	privsep := true
	if v, ok := r.params["privsep"]; ok {
		privsep = boolParam(r, "privsep") || v == ""
	}
	fullID, secret, info, err := s.cluster.AddToken(r.params["userid"], r.params["tokenid"], privsep, r.params["comment"], intParam(r, "expire"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"full-tokenid": fullID, "value": secret, "info": info}, nil
}

func (s *Server) deleteToken(r *request) (any, error) {
	return nil, s.cluster.DeleteToken(r.params["userid"], r.params["tokenid"])
}

func (s *Server) getRoles(r *request) (any, error) {
	return s.cluster.Roles(), nil
}

func (s *Server) postRole(r *request) (any, error) {
	return nil, s.cluster.AddRole(r.params["roleid"], splitPrivs(r.params["privs"]))
}

func (s *Server) putRole(r *request) (any, error) {
	return nil, s.cluster.UpdateRole(r.params["roleid"], splitPrivs(r.params["privs"]), boolParam(r, "append"))
}

func (s *Server) deleteRole(r *request) (any, error) {
	return nil, s.cluster.DeleteRole(r.params["roleid"])
}

func (s *Server) getACL(r *request) (any, error) {
	return s.cluster.ACL(r.auth), nil
}

func (s *Server) putACL(r *request) (any, error) {
	propagate := true
	if _, ok := r.params["propagate"]; ok {
		propagate = boolParam(r, "propagate")
	}
	return nil, s.cluster.UpdateACL(r.auth, model.ACLUpdate{
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
