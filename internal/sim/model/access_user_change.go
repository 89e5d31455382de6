package model

import (
	"slices"
	"strconv"
	"strings"
)

// UpdateUser is PUT /access/users/{userid} (API2/User.pm update_user):
// each field given is set; groups replaces the user's groups unless
// append. Errors are 500 "update user failed: …" (a missing user or
// group).
func (ac *accessControl) UpdateUser(userid string, params map[string]string) error {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	a := ac.accessOf()
	const op = "update user failed"
	u := a.Users[userid]
	if u == nil {
		return accessLockedFail(op, "no such user ('"+userid+"')\n")
	}
	next := *u
	if v, ok := params["enable"]; ok {
		next.Enable = isTrue(v)
	}
	if v, ok := params["expire"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return ParamError(map[string]string{"expire": "type check ('integer') failed - got '" + v + "'"})
		}
		next.Expire = n
	}
	if g, ok := params["groups"]; ok {
		if !isTrue(params["append"]) {
			next.Groups = nil
		}
		for _, group := range strings.FieldsFunc(g, func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
			if a.Groups[group] == nil {
				return accessLockedFail(op, "no such group '"+group+"'\n")
			}
			next.Groups = append(next.Groups, group)
		}
		slices.Sort(next.Groups)
		next.Groups = slices.Compact(next.Groups)
	}
	for k, field := range map[string]*string{"firstname": &next.Firstname, "lastname": &next.Lastname, "email": &next.Email, "comment": &next.Comment} {
		if v, ok := params[k]; ok {
			*field = v
		}
	}
	*u = next
	return ac.saveAccess()
}

// DeleteUser is DELETE /access/users/{userid} (delete_user): the user,
// its tokens, and every ACL entry naming it or one of its tokens go. As
// in PVE, which disables the entry before it deletes it, a user that does
// not exist is no error.
func (ac *accessControl) DeleteUser(userid string) error {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	a := ac.accessOf()
	delete(a.Users, userid)
	a.ACL = slices.DeleteFunc(a.ACL, func(e ACLEntry) bool {
		return e.Type == "user" && e.UGID == userid || e.Type == "token" && strings.HasPrefix(e.UGID, userid+"!")
	})
	return ac.saveAccess()
}
