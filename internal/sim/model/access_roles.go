package model

import (
	"slices"
	"strings"
)

// This file holds PVE's privilege catalogue and its built-in roles as data.
//
// pve-access-control does not list its built-in roles one by one: it sorts
// every privilege into a category (VM, Sys, Datastore, SDN, User, Pool,
// Mapping) and a tier (root, admin, user, audit), and derives the roles from
// that table in create_roles (src/PVE/AccessControl.pm, "$privgroups").
// roleBuiltins repeats that derivation, so the tables below are the facts
// and the roles follow from them exactly as in PVE.
//
// Sources:
//   - 8.4: AccessControl.pm before the PVE 9 privilege changes (Sys.AccessNetwork
//     in the root tier, VM.Monitor in the VM admin tier).
//   - 9.1: the PVE 9 series "replace ambiguously named VM.Monitor privilege"
//     (pve-devel, 2025-07) added VM.GuestAgent.{Audit,FileRead,FileWrite,
//     FileSystemMgmt,Unrestricted} and dropped VM.Monitor; VM.Replicate is new
//     in the VM admin tier. Cross-checked against a real `pveum role list` of
//     PVE 9.0.3 (PVEAdmin, PVEAuditor, PVEVMAdmin, PVEVMUser).
//   - Both privilege sets equal the properties of GET /access/roles/{roleid}
//     in ../shared/pve-api/apidoc.json (47) and apidoc-pve8.json (42); the
//     tests check that.

// rolePrivGroup is one category of PVE's $privgroups table. Root-tier
// privileges belong to no derived role (only Administrator has them).
type rolePrivGroup struct {
	Category                 string
	Root, Admin, User, Audit []string
}

// rolePrivGroupsPVE8 is $privgroups of pve-access-control 8.x (PVE 8.4).
var rolePrivGroupsPVE8 = []rolePrivGroup{
	{
		Category: "VM",
		Admin: []string{
			"VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network",
			"VM.Config.HWType", "VM.Config.Options", "VM.Allocate", "VM.Clone", "VM.Migrate",
			"VM.Monitor", "VM.Snapshot", "VM.Snapshot.Rollback",
		},
		User:  []string{"VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.Backup", "VM.PowerMgmt"},
		Audit: []string{"VM.Audit"},
	},
	roleSysGroup,
	roleDatastoreGroup,
	roleSDNGroup,
	roleUserGroup,
	rolePoolGroup,
	roleMappingGroup,
}

// rolePrivGroupsPVE9 is $privgroups of pve-access-control 9.x (PVE 9.1).
var rolePrivGroupsPVE9 = []rolePrivGroup{
	{
		Category: "VM",
		Admin: []string{
			"VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network",
			"VM.Config.HWType", "VM.Config.Options", "VM.Allocate", "VM.Clone",
			"VM.GuestAgent.Unrestricted", "VM.Migrate", "VM.Replicate", "VM.Snapshot",
			"VM.Snapshot.Rollback",
		},
		User: []string{
			"VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.Backup",
			"VM.GuestAgent.FileRead", "VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.FileWrite",
			"VM.PowerMgmt",
		},
		Audit: []string{"VM.Audit", "VM.GuestAgent.Audit"},
	},
	roleSysGroup,
	roleDatastoreGroup,
	roleSDNGroup,
	roleUserGroup,
	rolePoolGroup,
	roleMappingGroup,
}

// The categories that are the same in 8.4 and 9.1.
var (
	roleSysGroup = rolePrivGroup{
		Category: "Sys",
		Root:     []string{"Sys.PowerMgmt", "Sys.Modify", "Sys.Incoming", "Sys.AccessNetwork"},
		Admin:    []string{"Sys.Console", "Sys.Syslog"},
		Audit:    []string{"Sys.Audit"},
	}
	roleDatastoreGroup = rolePrivGroup{
		Category: "Datastore",
		Admin:    []string{"Datastore.Allocate", "Datastore.AllocateTemplate"},
		User:     []string{"Datastore.AllocateSpace"},
		Audit:    []string{"Datastore.Audit"},
	}
	roleSDNGroup = rolePrivGroup{
		Category: "SDN",
		Admin:    []string{"SDN.Allocate", "SDN.Audit"},
		User:     []string{"SDN.Use"},
		Audit:    []string{"SDN.Audit"},
	}
	roleUserGroup = rolePrivGroup{
		Category: "User",
		Root:     []string{"Realm.Allocate"},
		Admin:    []string{"User.Modify", "Group.Allocate", "Realm.AllocateUser"},
	}
	rolePoolGroup = rolePrivGroup{
		Category: "Pool",
		Admin:    []string{"Pool.Allocate"},
		User:     []string{"Pool.Audit"},
		Audit:    []string{"Pool.Audit"},
	}
	roleMappingGroup = rolePrivGroup{
		Category: "Mapping",
		Admin:    []string{"Mapping.Modify"},
		User:     []string{"Mapping.Use"},
		Audit:    []string{"Mapping.Audit"},
	}
)

// Names of the built-in roles that exist outside the derived PVE<cat>*
// family.
const (
	roleAdministrator = "Administrator"
	roleNoAccess      = "NoAccess"
)

// rolePrivGroupsFor returns the privilege table of a PVE release: 8.x gets
// the 8.4 table, anything else the 9.1 one.
func rolePrivGroupsFor(version string) []rolePrivGroup {
	if strings.HasPrefix(version, "8") {
		return rolePrivGroupsPVE8
	}
	return rolePrivGroupsPVE9
}

// The sorted privilege catalogues, computed once from the tables above.
var (
	rolePrivilegesPVE8 = roleCollectPrivileges(rolePrivGroupsPVE8)
	rolePrivilegesPVE9 = roleCollectPrivileges(rolePrivGroupsPVE9)
)

// rolePrivileges is the sorted list of every valid privilege name of a PVE
// release. PVE rejects any other name with "invalid privilege '<name>'".
// Callers must not modify the returned slice.
func rolePrivileges(version string) []string {
	if strings.HasPrefix(version, "8") {
		return rolePrivilegesPVE8
	}
	return rolePrivilegesPVE9
}

// roleCollectPrivileges is Permissions.Modify (in no category, as in PVE)
// plus every tier of every category, sorted.
func roleCollectPrivileges(groups []rolePrivGroup) []string {
	set := map[string]bool{"Permissions.Modify": true}
	for _, g := range groups {
		for _, tier := range [][]string{g.Root, g.Admin, g.User, g.Audit} {
			for _, p := range tier {
				set[p] = true
			}
		}
	}
	return roleSortedKeys(set)
}

// roleBuiltins derives the built-in ("special") roles of a PVE release the
// way create_roles does:
//   - PVE<cat>Admin: admin, user and audit tiers of the category;
//   - PVE<cat>User (only when the user tier is not empty): user and audit;
//   - PVEAdmin: admin, user and audit tiers of every category, minus
//     Mapping.Modify;
//   - PVEAuditor: every audit tier;
//   - PVETemplateUser: VM.Clone and VM.Audit;
//   - Administrator: every privilege; NoAccess: none.
func roleBuiltins(version string) map[string]*Role {
	privs := map[string]map[string]bool{}
	add := func(role string, list ...[]string) {
		if privs[role] == nil {
			privs[role] = map[string]bool{}
		}
		for _, l := range list {
			for _, p := range l {
				privs[role][p] = true
			}
		}
	}
	for _, g := range rolePrivGroupsFor(version) {
		add("PVE"+g.Category+"Admin", g.Admin, g.User, g.Audit)
		add("PVEAdmin", g.Admin, g.User, g.Audit)
		if len(g.User) > 0 {
			add("PVE"+g.Category+"User", g.User, g.Audit)
		}
		add("PVEAuditor", g.Audit)
	}
	delete(privs["PVEAdmin"], "Mapping.Modify")
	add("PVETemplateUser", []string{"VM.Clone", "VM.Audit"})
	add(roleAdministrator, rolePrivileges(version))
	add(roleNoAccess)

	roles := make(map[string]*Role, len(privs))
	for id, set := range privs {
		roles[id] = &Role{ID: id, Privs: set, Special: true}
	}
	return roles
}

// roleValidPriv reports whether name is a privilege of the release.
func roleValidPriv(version, name string) bool {
	_, ok := slices.BinarySearch(rolePrivileges(version), name)
	return ok
}

// roleSortedKeys returns the keys of a set in sorted order.
func roleSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
