package sim

import (
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/schema"
)

// checkPermissions evaluates the schema's permissions object for the
// route as pve-access-control's check_api2_permissions does: root@pam
// (the user, never a token) passes; a route without permissions is
// root@pam only; user "all" admits any authenticated caller; otherwise
// the check tree decides. Routes that do not allow tokens refuse them.
func (s *Server) checkPermissions(r *request) error {
	if r.auth.TokenID != "" && !r.m.AllowToken {
		return &model.Error{Kind: model.ErrPerm, Message: "Permission check failed (URI '" + r.path + "' not available with API token, need proper ticket.\n)\n"}
	}
	if r.auth.IsRoot() {
		return nil
	}
	perm := r.m.Perm
	if perm == nil {
		return model.PermError("user != root@pam")
	}
	if perm.User == "all" || perm.User == "world" {
		return nil
	}
	if perm.Check == nil {
		return model.PermError("")
	}
	_, err := s.evalCheck(r, perm.Check, false)
	return err
}

// evalCheck is exec_api2_perm_check. With noerr it reports failure as
// false instead of an error.
func (s *Server) evalCheck(r *request, c *schema.Check, noerr bool) (bool, error) {
	fail := func(err error) (bool, error) {
		if noerr {
			return false, nil
		}
		return false, err
	}
	switch c.Op {
	case schema.OpOr:
		for _, sub := range c.Sub {
			if ok, _ := s.evalCheck(r, sub, true); ok {
				return true, nil
			}
		}
		return fail(model.PermError(""))
	case schema.OpAnd:
		for _, sub := range c.Sub {
			if ok, err := s.evalCheck(r, sub, noerr); !ok {
				return false, err
			}
		}
		return true, nil
	case schema.OpPerm:
		if c.RequireParam != "" {
			if _, ok := r.params[c.RequireParam]; !ok {
				return false, nil
			}
		}
		path := normalizePath(templateReplace(c.Path, r.params))
		if err := s.cluster.Check(r.auth, path, c.Privs, c.Any); err != nil {
			return fail(err)
		}
		return true, nil
	case schema.OpUseridParam:
		userid := r.params["userid"]
		if c.Param == "self" || c.Param == "" {
			if r.auth.ID() == userid || (r.auth.TokenID == "" && r.auth.UserID == userid) {
				return true, nil
			}
			return fail(model.PermError("user != " + userid))
		}
		realm := userid[strings.LastIndex(userid, "@")+1:]
		if err := s.cluster.Check(r.auth, "/access/realm/"+realm, []string{c.Param}, false); err != nil {
			return fail(err)
		}
		return true, nil
	case schema.OpUseridGroup:
		// check_any: one of the listed privileges is enough (GET
		// /access/users/{userid} lists User.Modify and Sys.Audit).
		if err := s.cluster.Check(r.auth, "/access/groups", c.Privs, true); err != nil {
			return fail(err)
		}
		return true, nil
	case schema.OpPermModify:
		path := normalizePath(templateReplace(c.Path, r.params))
		if err := s.cluster.CheckPermModify(r.auth, path); err != nil {
			return fail(err)
		}
		return true, nil
	}
	return fail(model.PermError(""))
}

var tmplVar = lazyre.New(`\{([^}]+)\}`)

// templateReplace fills {param} placeholders (PVE::Tools::template_replace).
func templateReplace(tmpl string, params map[string]string) string {
	return tmplVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		return params[m[1:len(m)-1]]
	})
}

// normalizePath collapses slashes and drops a trailing one
// (PVE::AccessControl::normalize_path).
func normalizePath(p string) string {
	p = "/" + p
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}
