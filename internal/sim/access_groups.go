package sim

// Group routes (pve-access-control API2/Group.pm). The privileges of
// create, read, update and delete are the schema's checks; the list
// filters each group itself. Ansible's proxmox_group_info reads them.

// getGroups is GET /access/groups: the groups the caller has User.Modify,
// Sys.Audit or Group.Allocate on (/access/groups/<group>).
func (a *accessAPI) getGroups(r *request) (any, error) {
	return a.cluster.Groups(func(g string) bool {
		for _, p := range []string{"User.Modify", "Sys.Audit", "Group.Allocate"} {
			if a.cluster.HasPriv(r.auth, "/access/groups/"+g, p) {
				return true
			}
		}
		return false
	}), nil
}

func (a *accessAPI) getGroup(r *request) (any, error) { return a.cluster.Group(r.params["groupid"]) }

func (a *accessAPI) postGroup(r *request) (any, error) {
	return nil, a.cluster.CreateGroup(r.params["groupid"], r.params["comment"])
}

func (a *accessAPI) putGroup(r *request) (any, error) {
	var comment *string
	if c, ok := r.params["comment"]; ok {
		comment = &c
	}
	return nil, a.cluster.UpdateGroup(r.params["groupid"], comment)
}

func (a *accessAPI) deleteGroup(r *request) (any, error) {
	return nil, a.cluster.DeleteGroup(r.params["groupid"])
}
