package model

import (
	"maps"
	"slices"
	"strings"
)

// Groups as pve-access-control API2/Group.pm serves them. A group is a
// user.cfg "group:" line; its members are recorded on the users
// (User.Groups), so a member list is gathered from them.

// groupMembers are the users in group g, sorted.
func (a *Access) groupMembers(g string) []string {
	var out []string
	for id, u := range a.Users {
		if slices.Contains(u.Groups, g) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Groups is GET /access/groups: every group visible says canSee (PVE:
// User.Modify, Sys.Audit or Group.Allocate on /access/groups/<group>),
// with its comment and its users as a comma list (PVE walks a hash;
// sorted here).
func (ac *accessControl) Groups(canSee func(group string) bool) []map[string]any {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	a := ac.accessOf()
	out := []map[string]any{}
	for _, id := range slices.Sorted(maps.Keys(a.Groups)) {
		if !canSee(id) {
			continue
		}
		e := map[string]any{"groupid": id, "users": strings.Join(a.groupMembers(id), ",")}
		if c := a.Groups[id].Comment; c != "" {
			e["comment"] = c
		}
		out = append(out, e)
	}
	return out
}

// Group is GET /access/groups/{groupid}: its members and comment.
func (ac *accessControl) Group(groupid string) (map[string]any, error) {
	ac.stateMu.RLock()
	defer ac.stateMu.RUnlock()
	a := ac.accessOf()
	g := a.Groups[groupid]
	if g == nil {
		return nil, Failf("group '%s' does not exist\n", groupid)
	}
	members := a.groupMembers(groupid)
	if members == nil {
		members = []string{}
	}
	out := map[string]any{"members": members}
	if g.Comment != "" {
		out["comment"] = g.Comment
	}
	return out, nil
}

// CreateGroup is POST /access/groups.
func (ac *accessControl) CreateGroup(groupid, comment string) error {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	if err := ac.accessOf().AddGroup(groupid, comment); err != nil {
		return err
	}
	return ac.saveAccess()
}

// UpdateGroup is PUT /access/groups/{groupid}: the comment, when given.
func (ac *accessControl) UpdateGroup(groupid string, comment *string) error {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	g := ac.accessOf().Groups[groupid]
	if g == nil {
		return accessLockedFail("update group failed", "group '"+groupid+"' does not exist\n")
	}
	if comment != nil {
		g.Comment = *comment
	}
	return ac.saveAccess()
}

// DeleteGroup is DELETE /access/groups/{groupid}: the group, its members'
// membership (user.cfg keeps it on the group line) and its ACL entries
// (delete_group_acl).
func (ac *accessControl) DeleteGroup(groupid string) error {
	ac.stateMu.Lock()
	defer ac.stateMu.Unlock()
	a := ac.accessOf()
	if a.Groups[groupid] == nil {
		return accessLockedFail("delete group failed", "group '"+groupid+"' does not exist\n")
	}
	delete(a.Groups, groupid)
	for _, u := range a.Users {
		u.Groups = slices.DeleteFunc(u.Groups, func(g string) bool { return g == groupid })
	}
	a.ACL = slices.DeleteFunc(a.ACL, func(e ACLEntry) bool { return e.Type == "group" && e.UGID == groupid })
	return ac.saveAccess()
}
