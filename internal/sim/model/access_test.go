package model_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testutil/refdata"
)

// accessWantError fails unless err is an *model.Error with the given PVE code
// and exact message.
func accessWantError(t *testing.T, err error, status int, msg string) {
	t.Helper()
	var e *model.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *model.Error %d %q", err, err, status, msg)
	}
	if e.Kind.Code() != status || e.Message != msg {
		t.Fatalf("err = %d %q, want %d %q", e.Kind.Code(), e.Message, status, msg)
	}
}

// accessMust fails the test on a setup error.
func accessMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// accessKit is an Access with a user, alice@pve, and her privsep token
// alice@pve!ci and non-privsep token alice@pve!full.
type accessKit struct {
	t *testing.T
	a *model.Access
}

const (
	kitAlice     = "alice@pve"
	kitAliceCI   = "alice@pve!ci"
	kitAliceFull = "alice@pve!full"
)

func newAccessKit(t *testing.T) *accessKit {
	t.Helper()
	a := model.NewAccess("9.1")
	accessMust(t, a.AddUser(kitAlice, "correct horse"))
	_, err := a.AddToken(kitAlice, "ci", true)
	accessMust(t, err)
	_, err = a.AddToken(kitAlice, "full", false)
	accessMust(t, err)
	return &accessKit{t: t, a: a}
}

// grant puts role on path for one principal (user, @group or token).
func (k *accessKit) grant(path, role, who string, propagate bool) {
	k.t.Helper()
	var users, groups, tokens []string
	switch {
	case strings.HasPrefix(who, "@"):
		groups = []string{strings.TrimPrefix(who, "@")}
	case strings.Contains(who, "!"):
		tokens = []string{who}
	default:
		users = []string{who}
	}
	accessMust(k.t, k.a.SetACL(path, []string{role}, users, groups, tokens, propagate, false))
}

func (k *accessKit) privs(id, path string) []string {
	var out []string
	for p := range k.a.Permissions(id, path) {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func TestNewAccess_builtinRoles(t *testing.T) {
	t.Parallel()
	wantNames := []string{
		"Administrator", "NoAccess", "PVEAdmin", "PVEAuditor", "PVEDatastoreAdmin", "PVEDatastoreUser",
		"PVEMappingAdmin", "PVEMappingUser", "PVEPoolAdmin", "PVEPoolUser", "PVESDNAdmin", "PVESDNUser",
		"PVESysAdmin", "PVETemplateUser", "PVEUserAdmin", "PVEVMAdmin", "PVEVMUser",
	}
	for _, version := range []string{"9.1", "8.4"} {
		t.Run(version, func(t *testing.T) {
			a := model.NewAccess(version)
			var names []string
			for id, r := range a.Roles {
				if !r.Special || r.ID != id {
					t.Errorf("role %q: Special=%v ID=%q", id, r.Special, r.ID)
				}
				names = append(names, id)
			}
			sort.Strings(names)
			if diff := cmp.Diff(wantNames, names); diff != "" {
				t.Errorf("built-in roles (-want +got):\n%s", diff)
			}
			if n := len(a.Roles["NoAccess"].Privs); n != 0 {
				t.Errorf("NoAccess has %d privileges", n)
			}
			if got := accessRolePrivs(a, "PVETemplateUser"); !slices.Equal(got, []string{"VM.Audit", "VM.Clone"}) {
				t.Errorf("PVETemplateUser = %v", got)
			}
			if a.Roles["PVEAdmin"].Privs["Mapping.Modify"] || !a.Roles["PVEMappingAdmin"].Privs["Mapping.Modify"] {
				t.Error("Mapping.Modify must be in PVEMappingAdmin and not in PVEAdmin")
			}
			u := a.Users["root@pam"]
			if u == nil || !u.Enable || len(a.Users) != 1 || len(a.Groups) != 0 || len(a.ACL) != 0 {
				t.Errorf("fresh state: users=%v groups=%v acl=%v", a.Users, a.Groups, a.ACL)
			}
			if len(a.TicketKey) < 32 {
				t.Errorf("ticket key of %d bytes", len(a.TicketKey))
			}
		})
	}
}

func accessRolePrivs(a *model.Access, role string) []string {
	var out []string
	for p, ok := range a.Roles[role].Privs {
		if ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// TestNewAccess_pve9Roles compares the PVE 9 roles with a real `pveum role
// list` of PVE 9.0.3 (the roles that mention guest agent privileges).
func TestNewAccess_pve9Roles(t *testing.T) {
	t.Parallel()
	a := model.NewAccess("9.1")
	want := map[string]string{
		"PVEAdmin":      "Datastore.Allocate,Datastore.AllocateSpace,Datastore.AllocateTemplate,Datastore.Audit,Group.Allocate,Mapping.Audit,Mapping.Use,Pool.Allocate,Pool.Audit,Realm.AllocateUser,SDN.Allocate,SDN.Audit,SDN.Use,Sys.Audit,Sys.Console,Sys.Syslog,User.Modify,VM.Allocate,VM.Audit,VM.Backup,VM.Clone,VM.Config.CDROM,VM.Config.CPU,VM.Config.Cloudinit,VM.Config.Disk,VM.Config.HWType,VM.Config.Memory,VM.Config.Network,VM.Config.Options,VM.Console,VM.GuestAgent.Audit,VM.GuestAgent.FileRead,VM.GuestAgent.FileSystemMgmt,VM.GuestAgent.FileWrite,VM.GuestAgent.Unrestricted,VM.Migrate,VM.PowerMgmt,VM.Replicate,VM.Snapshot,VM.Snapshot.Rollback",
		"PVEAuditor":    "Datastore.Audit,Mapping.Audit,Pool.Audit,SDN.Audit,Sys.Audit,VM.Audit,VM.GuestAgent.Audit",
		"PVEVMAdmin":    "VM.Allocate,VM.Audit,VM.Backup,VM.Clone,VM.Config.CDROM,VM.Config.CPU,VM.Config.Cloudinit,VM.Config.Disk,VM.Config.HWType,VM.Config.Memory,VM.Config.Network,VM.Config.Options,VM.Console,VM.GuestAgent.Audit,VM.GuestAgent.FileRead,VM.GuestAgent.FileSystemMgmt,VM.GuestAgent.FileWrite,VM.GuestAgent.Unrestricted,VM.Migrate,VM.PowerMgmt,VM.Replicate,VM.Snapshot,VM.Snapshot.Rollback",
		"PVEVMUser":     "VM.Audit,VM.Backup,VM.Config.CDROM,VM.Config.Cloudinit,VM.Console,VM.GuestAgent.Audit,VM.GuestAgent.FileRead,VM.GuestAgent.FileSystemMgmt,VM.GuestAgent.FileWrite,VM.PowerMgmt",
		"Administrator": "Datastore.Allocate,Datastore.AllocateSpace,Datastore.AllocateTemplate,Datastore.Audit,Group.Allocate,Mapping.Audit,Mapping.Modify,Mapping.Use,Permissions.Modify,Pool.Allocate,Pool.Audit,Realm.Allocate,Realm.AllocateUser,SDN.Allocate,SDN.Audit,SDN.Use,Sys.AccessNetwork,Sys.Audit,Sys.Console,Sys.Incoming,Sys.Modify,Sys.PowerMgmt,Sys.Syslog,User.Modify,VM.Allocate,VM.Audit,VM.Backup,VM.Clone,VM.Config.CDROM,VM.Config.CPU,VM.Config.Cloudinit,VM.Config.Disk,VM.Config.HWType,VM.Config.Memory,VM.Config.Network,VM.Config.Options,VM.Console,VM.GuestAgent.Audit,VM.GuestAgent.FileRead,VM.GuestAgent.FileSystemMgmt,VM.GuestAgent.FileWrite,VM.GuestAgent.Unrestricted,VM.Migrate,VM.PowerMgmt,VM.Replicate,VM.Snapshot,VM.Snapshot.Rollback",
	}
	for role, list := range want {
		if diff := cmp.Diff(strings.Split(list, ","), accessRolePrivs(a, role)); diff != "" {
			t.Errorf("%s (-pve 9.0.3 +got):\n%s", role, diff)
		}
	}
}

func TestNewAccess_pve8Roles(t *testing.T) {
	t.Parallel()
	a := model.NewAccess("8.4")
	for _, tc := range []struct {
		role, priv string
		want       bool
	}{
		{"PVEVMAdmin", "VM.Monitor", true},
		{"PVEVMAdmin", "VM.GuestAgent.Unrestricted", false},
		{"PVEVMAdmin", "VM.Replicate", false},
		{"PVEAuditor", "VM.GuestAgent.Audit", false},
		{"PVEAdmin", "Sys.AccessNetwork", false},
		{"Administrator", "Sys.AccessNetwork", true},
		{"PVESysAdmin", "Sys.Console", true},
		{"PVEDatastoreUser", "Datastore.AllocateSpace", true},
		{"PVESDNUser", "SDN.Use", true},
	} {
		if got := a.Roles[tc.role].Privs[tc.priv]; got != tc.want {
			t.Errorf("8.4 %s has %s = %v, want %v", tc.role, tc.priv, got, tc.want)
		}
	}
}

// TestNewAccess_privilegeCatalogue checks that the privileges of each
// release are exactly those the release's API schema knows (GET
// /access/roles/{roleid} returns one boolean per privilege).
func TestNewAccess_privilegeCatalogue(t *testing.T) {
	t.Parallel()
	shared := refdata.Dir(t)
	for _, tc := range []struct{ version, file string }{
		{"9.1", "apidoc.json"},
		{"8.4", "apidoc-pve8.json"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(shared, "pve-api", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var tree []accessAPINode
			if err := json.Unmarshal(raw, &tree); err != nil {
				t.Fatal(err)
			}
			node := accessFindPath(tree, "/access/roles/{roleid}")
			if node == nil {
				t.Fatal("no /access/roles/{roleid} in schema")
			}
			var want []string
			for p := range node.Info.GET.Returns.Properties {
				want = append(want, p)
			}
			sort.Strings(want)
			a := model.NewAccess(tc.version)
			if diff := cmp.Diff(want, accessRolePrivs(a, "Administrator")); diff != "" {
				t.Errorf("privileges (-schema +Administrator):\n%s", diff)
			}
			for _, p := range want {
				accessMust(t, model.NewAccess(tc.version).AddRole("All", []string{p}))
			}
		})
	}
}

type accessAPINode struct {
	Path     string          `json:"path"`
	Children []accessAPINode `json:"children"`
	Info     struct {
		GET struct {
			Returns struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"returns"`
		} `json:"GET"`
	} `json:"info"`
}

func accessFindPath(nodes []accessAPINode, path string) *accessAPINode {
	for i := range nodes {
		if nodes[i].Path == path {
			return &nodes[i]
		}
		if n := accessFindPath(nodes[i].Children, path); n != nil {
			return n
		}
	}
	return nil
}

func TestAccess_AddRole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version string
		id      string
		privs   []string
		status  int
		msg     string
		params  map[string]string
	}{
		{name: "ok", version: "9.1", id: "Ops", privs: []string{"VM.Audit", "SDN.Use"}},
		{name: "empty role", version: "9.1", id: "Empty"},
		{name: "VM.Monitor is gone in 9", version: "9.1", id: "Mon", privs: []string{"VM.Audit", "VM.Monitor"},
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"privs": "invalid format - invalid privilege 'VM.Monitor'\n"}},
		{name: "VM.Monitor exists in 8", version: "8.4", id: "Mon", privs: []string{"VM.Monitor"}},
		{name: "guest agent privilege unknown in 8", version: "8.4", id: "Ga", privs: []string{"VM.GuestAgent.Audit"},
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"privs": "invalid format - invalid privilege 'VM.GuestAgent.Audit'\n"}},
		{name: "no such privilege", version: "9.1", id: "Cpu", privs: []string{"VM.Config.CPUMemory"},
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"privs": "invalid format - invalid privilege 'VM.Config.CPUMemory'\n"}},
		{name: "PVE namespace", version: "9.1", id: "pveOps", privs: []string{"VM.Audit"},
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"roleid": "cannot use role ID starting with the (case-insensitive) 'PVE' namespace"}},
		{name: "bad characters", version: "9.1", id: "a b",
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"roleid": "invalid format - role name 'a b' contains invalid characters\n"}},
		{name: "built-in exists", version: "9.1", id: "Administrator",
			status: 500, msg: "create role failed: role 'Administrator' already exists\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := model.NewAccess(tc.version)
			err := a.AddRole(tc.id, tc.privs)
			if tc.status == 0 {
				accessMust(t, err)
				r := a.Roles[tc.id]
				if r == nil || r.Special || len(r.Privs) != len(tc.privs) {
					t.Fatalf("role = %+v", r)
				}
				return
			}
			accessWantError(t, err, tc.status, tc.msg)
			if diff := cmp.Diff(tc.params, err.(*model.Error).Params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
			if tc.status == 400 && a.Roles[tc.id] != nil {
				t.Error("role created despite the error")
			}
		})
	}
}

// TestAccess_Permissions_privsep is the intersection rule of seed 004 §3.3
// and behaviour.md §0.
func TestAccess_Permissions_privsep(t *testing.T) {
	t.Parallel()
	k := newAccessKit(t)
	accessMust(t, k.a.AddRole("Operator", []string{"VM.Audit", "VM.Allocate", "SDN.Use"}))

	// Role on the token only: empty intersection, 403 even for VM.Audit.
	k.grant("/", "Operator", kitAliceCI, true)
	if got := k.privs(kitAliceCI, "/vms/101"); len(got) != 0 {
		t.Fatalf("token-only grant gave %v, want nothing", got)
	}
	ci := model.Auth{UserID: kitAlice, TokenID: kitAliceCI}
	accessWantError(t, k.a.Check(ci, "/vms/101", []string{"VM.Audit"}, false), 403, "Permission check failed (/vms/101, VM.Audit)\n")

	// Role on both: the token has it.
	k.grant("/", "Operator", kitAlice, true)
	if diff := cmp.Diff([]string{"SDN.Use", "VM.Allocate", "VM.Audit"}, k.privs(kitAliceCI, "/vms/101")); diff != "" {
		t.Errorf("dual grant (-want +got):\n%s", diff)
	}

	// The user loses SDN.Use on the bridge: so does the token, although its
	// own ACL still grants it.
	accessMust(t, k.a.AddRole("NoSDN", []string{"VM.Audit", "VM.Allocate"}))
	k.grant("/sdn", "NoSDN", kitAlice, true)
	if got := k.a.HasPriv(ci, "/sdn/zones/localnetwork/vmbr0", "SDN.Use"); got {
		t.Error("token has SDN.Use that its user lacks")
	}
	accessWantError(t, k.a.Check(ci, "/sdn/zones/localnetwork/vmbr0", []string{"SDN.Use"}, false), 403,
		"Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)\n")

	// A token without privilege separation has exactly its user's privileges,
	// whatever its own ACL says.
	k.grant("/", "PVEAuditor", kitAliceFull, true)
	if diff := cmp.Diff(k.privs(kitAlice, "/sdn/zones/x"), k.privs(kitAliceFull, "/sdn/zones/x")); diff != "" {
		t.Errorf("privsep=0 token differs from its user (-user +token):\n%s", diff)
	}

	// Propagate flags combine with AND.
	accessMust(t, k.a.SetACL("/vms/101", []string{"Operator"}, nil, nil, []string{kitAliceCI}, false, false))
	got := k.a.EffectivePermissions(kitAliceCI, "/vms/101")
	want := map[string]map[string]int{"/vms/101": {"VM.Audit": 0, "VM.Allocate": 0, "SDN.Use": 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
}

func TestAccess_Permissions_acl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(k *accessKit)
		path  string
		want  []string
	}{
		{
			name:  "propagate reaches below",
			setup: func(k *accessKit) { k.grant("/vms", "PVETemplateUser", kitAlice, true) },
			path:  "/vms/101", want: []string{"VM.Audit", "VM.Clone"},
		},
		{
			name:  "propagate=0 stops at its path",
			setup: func(k *accessKit) { k.grant("/vms", "PVETemplateUser", kitAlice, false) },
			path:  "/vms/101",
		},
		{
			name:  "propagate=0 holds on its own path",
			setup: func(k *accessKit) { k.grant("/vms", "PVETemplateUser", kitAlice, false) },
			path:  "/vms", want: []string{"VM.Audit", "VM.Clone"},
		},
		{
			name:  "other paths see nothing",
			setup: func(k *accessKit) { k.grant("/vms/101", "PVETemplateUser", kitAlice, true) },
			path:  "/vms/102",
		},
		{
			name: "NoAccess on a deeper path blocks",
			setup: func(k *accessKit) {
				k.grant("/", "Administrator", kitAlice, true)
				k.grant("/vms/101", "NoAccess", kitAlice, true)
			},
			path: "/vms/101",
		},
		{
			name: "NoAccess next to another role blocks",
			setup: func(k *accessKit) {
				accessMust(k.t, k.a.SetACL("/vms", []string{"PVEVMAdmin", "NoAccess"}, []string{kitAlice}, nil, nil, true, false))
			},
			path: "/vms/101",
		},
		{
			name: "deeper grant replaces NoAccess above",
			setup: func(k *accessKit) {
				k.grant("/", "NoAccess", kitAlice, true)
				k.grant("/vms/101", "PVETemplateUser", kitAlice, true)
			},
			path: "/vms/101", want: []string{"VM.Audit", "VM.Clone"},
		},
		{
			name: "deeper path replaces, not adds",
			setup: func(k *accessKit) {
				k.grant("/", "PVEAuditor", kitAlice, true)
				k.grant("/vms", "PVETemplateUser", kitAlice, true)
			},
			path: "/vms/101", want: []string{"VM.Audit", "VM.Clone"},
		},
		{
			name: "group grant applies to members",
			setup: func(k *accessKit) {
				k.grant("/vms", "PVETemplateUser", "@ops", true)
			},
			path: "/vms/101", want: []string{"VM.Audit", "VM.Clone"},
		},
		{
			name: "user beats group on the same path",
			setup: func(k *accessKit) {
				k.grant("/vms", "PVEVMAdmin", "@ops", true)
				k.grant("/vms", "PVETemplateUser", kitAlice, true)
			},
			path: "/vms/101", want: []string{"VM.Audit", "VM.Clone"},
		},
		{
			name: "deeper group beats shallower user",
			setup: func(k *accessKit) {
				k.grant("/", "PVEAuditor", kitAlice, true)
				k.grant("/vms", "PVETemplateUser", "@ops", true)
			},
			path: "/vms/101", want: []string{"VM.Audit", "VM.Clone"},
		},
		{
			name: "group NoAccess on a deeper path blocks the user",
			setup: func(k *accessKit) {
				k.grant("/", "PVEAuditor", kitAlice, true)
				k.grant("/storage", "NoAccess", "@ops", true)
			},
			path: "/storage/local",
		},
		{
			name: "two groups add up",
			setup: func(k *accessKit) {
				accessMust(k.t, k.a.AddRole("Snap", []string{"VM.Snapshot"}))
				k.grant("/vms", "PVETemplateUser", "@ops", true)
				k.grant("/vms", "Snap", "@dev", true)
			},
			path: "/vms/101", want: []string{"VM.Audit", "VM.Clone", "VM.Snapshot"},
		},
		{
			name:  "groups the user is not in do not count",
			setup: func(k *accessKit) { k.grant("/vms", "PVETemplateUser", "@other", true) },
			path:  "/vms/101",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := model.NewAccess("9.1")
			for _, g := range []string{"ops", "dev", "other"} {
				accessMust(t, a.AddGroup(g, ""))
			}
			accessMust(t, a.AddUser(kitAlice, "", model.UserOptions{Groups: []string{"ops", "dev"}}))
			k := &accessKit{t: t, a: a}
			tc.setup(k)
			if diff := cmp.Diff(tc.want, k.privs(kitAlice, tc.path)); diff != "" {
				t.Errorf("Permissions(%s) (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

// TestAuth_root: only the root@pam user with a ticket is root; root's
// tokens are not, though a privsep=0 one passes generic privilege checks
// (behaviour.md §0).
func TestAuth_root(t *testing.T) {
	t.Parallel()
	a := model.NewAccess("9.1")
	_, err := a.AddToken("root@pam", "full", false)
	accessMust(t, err)
	_, err = a.AddToken("root@pam", "sep", true)
	accessMust(t, err)
	root := model.Auth{UserID: "root@pam"}
	full := model.Auth{UserID: "root@pam", TokenID: "root@pam!full"}
	sep := model.Auth{UserID: "root@pam", TokenID: "root@pam!sep"}

	tests := []struct {
		name     string
		auth     model.Auth
		wantID   string
		wantRoot bool
		wantPass bool
	}{
		{"root ticket", root, "root@pam", true, true},
		{"root token privsep=0", full, "root@pam!full", false, true},
		{"root token privsep=1 without ACL", sep, "root@pam!sep", false, false},
		{"other user", model.Auth{UserID: "bob@pve"}, "bob@pve", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.auth.ID(); got != tc.wantID {
				t.Errorf("ID() = %q, want %q", got, tc.wantID)
			}
			if got := tc.auth.IsRoot(); got != tc.wantRoot {
				t.Errorf("IsRoot() = %v, want %v", got, tc.wantRoot)
			}
			err := a.Check(tc.auth, "/nodes/pve", []string{"Sys.Modify", "Sys.PowerMgmt", "Permissions.Modify"}, false)
			if pass := err == nil; pass != tc.wantPass {
				t.Errorf("Check = %v, want pass=%v", err, tc.wantPass)
			}
		})
	}

	// The privsep root token gets what its own ACL grants, no more.
	accessMust(t, a.SetACL("/vms", []string{"PVEAuditor"}, nil, nil, []string{"root@pam!sep"}, true, false))
	if !a.HasPriv(sep, "/vms/100", "VM.Audit") || a.HasPriv(sep, "/vms/100", "VM.Allocate") {
		t.Errorf("root@pam!sep on /vms/100 = %v", a.Permissions("root@pam!sep", "/vms/100"))
	}
}

func TestAccess_Check(t *testing.T) {
	t.Parallel()
	k := newAccessKit(t)
	accessMust(t, k.a.AddRole("Disk", []string{"VM.Audit", "VM.Config.Disk"}))
	k.grant("/vms/101", "Disk", kitAlice, true)
	alice := model.Auth{UserID: kitAlice}
	anyConfig := []string{"VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Options"}

	tests := []struct {
		name   string
		path   string
		privs  []string
		any    bool
		status int
		msg    string
	}{
		{name: "held", path: "/vms/101", privs: []string{"VM.Audit", "VM.Config.Disk"}},
		{name: "missing", path: "/vms/101", privs: []string{"VM.Allocate"},
			status: 403, msg: "Permission check failed (/vms/101, VM.Allocate)\n"},
		{name: "names the first missing", path: "/vms/101", privs: []string{"VM.Audit", "VM.PowerMgmt", "VM.Allocate"},
			status: 403, msg: "Permission check failed (/vms/101, VM.PowerMgmt)\n"},
		{name: "any held", path: "/vms/101", privs: anyConfig, any: true},
		{name: "any none held", path: "/vms/102", privs: anyConfig, any: true,
			status: 403, msg: "Permission check failed (/vms/102, VM.Config.Disk|VM.Config.CPU|VM.Config.Memory|VM.Config.Network|VM.Config.Options)\n"},
		{name: "unknown privilege", path: "/vms/101", privs: []string{"VM.Monitor"},
			status: 500, msg: "invalid privilege 'VM.Monitor'\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := k.a.Check(alice, tc.path, tc.privs, tc.any)
			if tc.status == 0 {
				accessMust(t, err)
				return
			}
			accessWantError(t, err, tc.status, tc.msg)
		})
	}
}

// TestAccess_EffectivePermissions_fixture rebuilds the situation of
// fixtures/access-permissions-token.json and compares the whole answer.
func TestAccess_EffectivePermissions_fixture(t *testing.T) {
	t.Parallel()
	shared := refdata.Dir(t)
	raw, err := os.ReadFile(filepath.Join(shared, "pve-api", "fixtures", "access-permissions-token.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Data map[string]map[string]int `json:"data"`
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}

	k := newAccessKit(t)
	var vmPrivs []string
	for p := range fixture.Data["/vms"] {
		vmPrivs = append(vmPrivs, p)
	}
	accessMust(t, k.a.AddRole("Guests", vmPrivs))
	accessMust(t, k.a.AddRole("Space", []string{"Datastore.Audit", "Datastore.AllocateSpace"}))
	accessMust(t, k.a.AddRole("Audit", []string{"Sys.Audit"}))
	for _, who := range []string{kitAlice, kitAliceCI} {
		k.grant("/vms", "Guests", who, true)
		k.grant("/storage/local-lvm", "Space", who, true)
		k.grant("/storage/local", "Space", who, true)
		k.grant("/nodes/pve", "Audit", who, false)
	}
	if diff := cmp.Diff(fixture.Data, k.a.EffectivePermissions(kitAliceCI, "")); diff != "" {
		t.Errorf("GET /access/permissions (-fixture +got):\n%s", diff)
	}

	// With a path: just that path, present even when empty.
	got := k.a.EffectivePermissions(kitAliceCI, "/sdn")
	if diff := cmp.Diff(map[string]map[string]int{"/sdn": {}}, got); diff != "" {
		t.Errorf("path=/sdn (-want +got):\n%s", diff)
	}
}

func TestAccess_EffectivePermissions_root(t *testing.T) {
	t.Parallel()
	a := model.NewAccess("8.4")
	got := a.EffectivePermissions("root@pam", "")
	var paths []string
	for p, privs := range got {
		paths = append(paths, p)
		if len(privs) != 42 || privs["VM.Monitor"] != 1 {
			t.Errorf("%s: %d privileges, VM.Monitor=%d", p, len(privs), privs["VM.Monitor"])
		}
	}
	sort.Strings(paths)
	want := []string{"/", "/access", "/access/groups", "/nodes", "/pool", "/sdn", "/storage", "/vms"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

func TestAccess_CheckReadPermissions(t *testing.T) {
	t.Parallel()
	k := newAccessKit(t)
	accessMust(t, k.a.AddUser("bob@pve", ""))
	alice := model.Auth{UserID: kitAlice}
	ci := model.Auth{UserID: kitAlice, TokenID: kitAliceCI}
	for _, tc := range []struct {
		name string
		auth model.Auth
		id   string
		ok   bool
	}{
		{"own, implicit", ci, "", true},
		{"own token", ci, kitAliceCI, true},
		{"user reads her token", alice, kitAliceCI, true},
		{"token reads its user", ci, kitAlice, false},
		{"token reads a sibling", ci, kitAliceFull, false},
		{"other user", alice, "bob@pve", false},
		{"root", model.Auth{UserID: "root@pam"}, "bob@pve", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := k.a.CheckReadPermissions(tc.auth, tc.id)
			if tc.ok {
				accessMust(t, err)
				return
			}
			accessWantError(t, err, 403, "Permission check failed (/access, Sys.Audit)\n")
		})
	}
}

func TestAccess_SetACL_errors(t *testing.T) {
	t.Parallel()
	const locked = "ACL update failed: "
	either := "either 'users', 'groups' or 'tokens' is required."
	tests := []struct {
		name   string
		u      model.ACLUpdate
		status int
		msg    string
		params map[string]string
	}{
		{name: "no roles", u: model.ACLUpdate{Path: "/", Users: []string{kitAlice}},
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"roles": "property is missing and it is not optional"}},
		{name: "nobody", u: model.ACLUpdate{Path: "/", Roles: []string{"PVEAuditor"}},
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"users": either, "groups": either, "tokens": either}},
		{name: "bad path", u: model.ACLUpdate{Path: "/vms/abc", Roles: []string{"PVEAuditor"}, Users: []string{kitAlice}},
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"path": "invalid ACL path '/vms/abc'"}},
		{name: "bad characters", u: model.ACLUpdate{Path: "/vms/1 0", Roles: []string{"PVEAuditor"}, Users: []string{kitAlice}},
			status: 400, msg: "Parameter verification failed.\n", params: map[string]string{"path": "invalid ACL path '/vms/1 0'"}},
		{name: "unknown role", u: model.ACLUpdate{Path: "/", Roles: []string{"Nope"}, Users: []string{kitAlice}},
			status: 500, msg: locked + "role 'Nope' does not exist\n"},
		{name: "unknown user", u: model.ACLUpdate{Path: "/", Roles: []string{"PVEAuditor"}, Users: []string{"bob@pve"}},
			status: 500, msg: locked + "user 'bob@pve' does not exist\n"},
		{name: "unknown group", u: model.ACLUpdate{Path: "/", Roles: []string{"PVEAuditor"}, Groups: []string{"ops"}},
			status: 500, msg: locked + "group 'ops' does not exist\n"},
		{name: "unknown token", u: model.ACLUpdate{Path: "/", Roles: []string{"PVEAuditor"}, Tokens: []string{"alice@pve!nope"}},
			status: 500, msg: locked + "no such token 'nope' for user 'alice@pve'\n"},
		{name: "token of unknown user", u: model.ACLUpdate{Path: "/", Roles: []string{"PVEAuditor"}, Tokens: []string{"bob@pve!xy"}},
			status: 500, msg: locked + "no such user ('bob@pve')\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newAccessKit(t)
			err := k.a.UpdateACL(model.Auth{UserID: "root@pam"}, tc.u)
			accessWantError(t, err, tc.status, tc.msg)
			if diff := cmp.Diff(tc.params, err.(*model.Error).Params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
			if len(k.a.ACL) != 0 {
				t.Errorf("ACL changed despite the error: %v", k.a.ACL)
			}
		})
	}
}

func TestAccess_SetACL(t *testing.T) {
	t.Parallel()
	k := newAccessKit(t)
	accessMust(t, k.a.AddGroup("ops", ""))
	accessMust(t, k.a.SetACL("/vms//101/", []string{"PVEAuditor", "PVETemplateUser"}, []string{kitAlice}, []string{"ops"}, []string{kitAliceCI}, true, false))
	k.grant("/", "PVEAuditor", kitAlice, false)
	k.grant("/storage", "PVEAuditor", kitAlice, true)
	// Granting again changes only the flag.
	k.grant("/", "PVEAuditor", kitAlice, true)
	want := []model.ACLEntry{
		{Path: "/", Type: "user", UGID: kitAlice, RoleID: "PVEAuditor", Propagate: true},
		{Path: "/storage", Type: "user", UGID: kitAlice, RoleID: "PVEAuditor", Propagate: true},
		{Path: "/vms/101", Type: "user", UGID: kitAlice, RoleID: "PVEAuditor", Propagate: true},
		{Path: "/vms/101", Type: "user", UGID: kitAlice, RoleID: "PVETemplateUser", Propagate: true},
		{Path: "/vms/101", Type: "group", UGID: "ops", RoleID: "PVEAuditor", Propagate: true},
		{Path: "/vms/101", Type: "group", UGID: "ops", RoleID: "PVETemplateUser", Propagate: true},
		{Path: "/vms/101", Type: "token", UGID: kitAliceCI, RoleID: "PVEAuditor", Propagate: true},
		{Path: "/vms/101", Type: "token", UGID: kitAliceCI, RoleID: "PVETemplateUser", Propagate: true},
	}
	if diff := cmp.Diff(want, k.a.ACL); diff != "" {
		t.Fatalf("ACL (-want +got):\n%s", diff)
	}

	// Delete takes roles too, and allows any path.
	accessMust(t, k.a.SetACL("/vms/101", []string{"PVETemplateUser"}, []string{kitAlice}, []string{"ops"}, nil, true, true))
	accessMust(t, k.a.SetACL("/nonsense", []string{"PVEAuditor"}, []string{kitAlice}, nil, nil, true, true))
	if got := len(k.a.ACL); got != 6 {
		t.Errorf("after delete: %d entries: %v", got, k.a.ACL)
	}

	// Deleting a token drops its ACL entries; destroying a guest drops its path.
	accessMust(t, k.a.DeleteToken(kitAlice, "ci"))
	k.a.RemoveVMAccess(101)
	want = want[:2]
	if diff := cmp.Diff(want, k.a.ACL); diff != "" {
		t.Errorf("after DeleteToken and RemoveVMAccess (-want +got):\n%s", diff)
	}
	accessWantError(t, k.a.DeleteToken(kitAlice, "ci"), 500, "no such token 'ci' for user 'alice@pve'\n")
}

// TestAccess_UpdateACL_delegated covers callers other than root@pam: the
// perm-modify check and the superset rule for callers without
// Permissions.Modify.
func TestAccess_UpdateACL_delegated(t *testing.T) {
	t.Parallel()
	const locked = "ACL update failed: 400 Parameter verification failed.\nrole: "
	k := newAccessKit(t)
	accessMust(t, k.a.AddUser("bob@pve", ""))
	accessMust(t, k.a.AddRole("Owner", []string{"VM.Allocate", "VM.Audit", "VM.PowerMgmt"}))
	k.grant("/vms/101", "Owner", kitAlice, true)
	k.grant("/vms/102", "Owner", kitAlice, false)
	k.grant("/storage/local", "PVEAuditor", kitAlice, true)
	alice := model.Auth{UserID: kitAlice}
	grant := func(path, role string, propagate, del bool) error {
		return k.a.UpdateACL(alice, model.ACLUpdate{Path: path, Roles: []string{role}, Users: []string{"bob@pve"}, Propagate: propagate, Delete: del})
	}

	accessWantError(t, grant("/storage/local", "PVEAuditor", true, false), 403,
		"Permission check failed (/storage/local, Permissions.Modify|Datastore.Allocate)\n")
	accessWantError(t, grant("/", "PVEAuditor", true, false), 403, "Permission check failed (/, Permissions.Modify)\n")

	accessMust(t, k.a.AddRole("Watch", []string{"VM.Audit"}))
	accessMust(t, grant("/vms/101", "Watch", true, false))
	accessWantError(t, grant("/vms/101", "PVEVMUser", true, false), 500,
		locked+"Cannot add role 'PVEVMUser' - requires 'Permissions.Modify' or superset of privileges.\n")
	accessWantError(t, grant("/vms/102", "Watch", true, false), 500,
		locked+"Cannot add role 'Watch' with propagation - requires 'Permissions.Modify' or propagated superset of privileges.\n")
	accessMust(t, grant("/vms/102", "Watch", false, false))
	accessWantError(t, grant("/vms/101", "NoAccess", true, false), 500,
		locked+"Cannot add role 'NoAccess' - requires 'Permissions.Modify'\n")
	accessMust(t, grant("/vms/101", "Watch", true, true))

	// Permissions.Modify lifts the superset rule.
	k.grant("/vms/101", "Administrator", kitAlice, true)
	accessMust(t, grant("/vms/101", "PVEVMAdmin", true, false))
}

func TestAccess_users(t *testing.T) {
	t.Parallel()
	a := model.NewAccess("9.1")
	accessMust(t, a.AddGroup("ops", "operators"))
	accessWantError(t, a.AddGroup("ops", ""), 500, "create group failed: group 'ops' already exists\n")
	accessWantError(t, a.AddGroup("o/ps", ""), 400, "Parameter verification failed.\n")

	accessMust(t, a.AddUser("carol@pve", "s3cret-pass", model.UserOptions{Groups: []string{"ops"}, Email: "c@example.org", Disable: true}))
	u := a.Users["carol@pve"]
	if u.Enable || u.Email != "c@example.org" || !slices.Equal(u.Groups, []string{"ops"}) {
		t.Errorf("user = %+v", u)
	}
	if strings.Contains(u.PasswordHash, "s3cret-pass") || u.PasswordHash == "" {
		t.Errorf("password stored as %q", u.PasswordHash)
	}
	accessWantError(t, a.AddUser("carol@pve", ""), 500, "create user failed: user 'carol@pve' already exists\n")
	accessWantError(t, a.AddUser("dave@pve", "", model.UserOptions{Groups: []string{"nope"}}), 500,
		"create user failed: no such group 'nope'\n")
	accessWantError(t, a.AddUser("erin@ldap", "password1"), 500,
		"create user failed: auth domain 'ldap' does not exist\n")
	accessWantError(t, a.AddUser("no-realm", ""), 400, "Parameter verification failed.\n")
	if a.Users["dave@pve"] != nil || a.Users["erin@ldap"] != nil {
		t.Error("user created despite the error")
	}
	accessWantError(t, a.SetPassword("dave@pve", "x"), 500, "no such user ('dave@pve')\n")

	_, err := a.AddToken("dave@pve", "tk", true)
	accessWantError(t, err, 500, "no such user ('dave@pve')\n")
	_, err = a.AddToken("carol@pve", "t", true) // token ids need two characters
	accessWantError(t, err, 400, "Parameter verification failed.\n")
	_, err = a.AddToken("carol@pve", "tk", true)
	accessMust(t, err)
	_, err = a.AddToken("carol@pve", "tk", true)
	accessWantError(t, err, 400, "Parameter verification failed.\n")
	if diff := cmp.Diff(map[string]string{"tokenid": "Token already exists."}, err.(*model.Error).Params); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
}

func TestAccess_VerifyToken(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	a := model.NewAccess("9.1")
	a.Clock = func() time.Time { return now }
	accessMust(t, a.AddUser(kitAlice, ""))
	secret, err := a.AddToken(kitAlice, "ci", true)
	accessMust(t, err)
	if len(secret) != 36 || strings.Count(secret, "-") != 4 {
		t.Errorf("secret %q is not a UUID", secret)
	}
	other, err := a.AddToken(kitAlice, "old", false)
	accessMust(t, err)
	a.Users[kitAlice].Tokens["old"].Expire = now.Add(-time.Second).Unix()

	got, err := a.VerifyToken(kitAliceCI, secret)
	accessMust(t, err)
	if want := (model.Auth{UserID: kitAlice, TokenID: kitAliceCI}); got != want {
		t.Errorf("Auth = %+v, want %+v", got, want)
	}

	tests := []struct {
		name   string
		id     string
		secret string
		setup  func()
		msg    string
	}{
		{name: "wrong secret", id: kitAliceCI, secret: other, msg: "invalid token value!\n"},
		{name: "expired token", id: "alice@pve!old", secret: other, msg: "token 'old' access expired\n"},
		{name: "unknown token", id: "alice@pve!nope", secret: secret, msg: "no such token 'nope' for user 'alice@pve'\n"},
		{name: "unknown user", id: "bob@pve!ci", secret: secret, msg: "no such user ('bob@pve')\n"},
		{name: "malformed id", id: "alice@pve", secret: secret, msg: "'alice@pve' is not a valid token ID - not able to split into user and token parts\n"},
		{name: "disabled user", id: kitAliceCI, secret: secret, setup: func() { a.Users[kitAlice].Enable = false },
			msg: "user 'alice@pve' is disabled\n"},
		{name: "expired user", id: kitAliceCI, secret: secret, setup: func() {
			a.Users[kitAlice].Enable = true
			a.Users[kitAlice].Expire = now.Unix() - 1
		}, msg: "user 'alice@pve' access expired\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			_, err := a.VerifyToken(tc.id, tc.secret)
			accessWantError(t, err, http.StatusUnauthorized, tc.msg)
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

func TestAccess_VerifyPassword(t *testing.T) {
	t.Parallel()
	a := model.NewAccess("9.1")
	accessMust(t, a.SetPassword("root@pam", "rootpass1"))
	accessMust(t, a.AddUser(kitAlice, "alicepass", model.UserOptions{Disable: true}))
	accessMust(t, a.AddUser("nopw@pve", ""))

	got, err := a.VerifyPassword("root@pam", "rootpass1")
	accessMust(t, err)
	if got != (model.Auth{UserID: "root@pam"}) || !got.IsRoot() {
		t.Errorf("Auth = %+v", got)
	}
	for _, tc := range []struct{ name, user, pw string }{
		{"wrong password", "root@pam", "rootpass2"},
		{"disabled user", kitAlice, "alicepass"},
		{"no password set", "nopw@pve", ""},
		{"unknown user", "bob@pve", "x"},
		{"malformed user", "root", "rootpass1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.VerifyPassword(tc.user, tc.pw)
			accessWantError(t, err, http.StatusUnauthorized, "authentication failure\n")
		})
	}
}

// TestAccess_JSON: the state survives the cluster's state file.
func TestAccess_JSON(t *testing.T) {
	t.Parallel()
	k := newAccessKit(t)
	accessMust(t, k.a.AddGroup("ops", "c"))
	accessMust(t, k.a.AddRole("Ops", []string{"VM.Audit"}))
	accessMust(t, k.a.AddUser("bob@pve", "password1", model.UserOptions{Groups: []string{"ops"}, Expire: 4102444800, Comment: "b"}))
	k.grant("/vms", "Ops", "@ops", false)
	k.grant("/", "Ops", kitAliceCI, true)

	raw, err := json.Marshal(k.a)
	accessMust(t, err)
	var back model.Access
	accessMust(t, json.Unmarshal(raw, &back))
	if diff := cmp.Diff(k.a, &back, cmpopts.IgnoreFields(model.Access{}, "Clock")); diff != "" {
		t.Fatalf("round trip (-before +after):\n%s", diff)
	}
	// And it still works after the trip.
	if _, err := back.VerifyPassword("bob@pve", "password1"); err != nil {
		t.Errorf("password after round trip: %v", err)
	}
	ticket, _ := k.a.NewTicket("bob@pve", time.Now())
	if _, err := back.VerifyTicket(ticket, time.Now()); err != nil {
		t.Errorf("ticket after round trip: %v", err)
	}
}

// TestAccess_operatorSeed is the emulator's bootstrap operator: seed 004's
// 16-privilege role plus Datastore.AllocateTemplate, on "/" for both user
// and privsep token.
func TestAccess_operatorSeed(t *testing.T) {
	t.Parallel()
	a := model.NewAccess("9.1")
	accessMust(t, a.AddRole("CorralOperator", model.OperatorPrivileges))
	accessMust(t, a.AddUser("corral@pve", ""))
	_, err := a.AddToken("corral@pve", "corral", true)
	accessMust(t, err)
	accessMust(t, a.SetACL("/", []string{"CorralOperator"}, []string{"corral@pve"}, nil, []string{"corral@pve!corral"}, true, false))
	op := model.Auth{UserID: "corral@pve", TokenID: "corral@pve!corral"}
	for _, c := range []struct{ path, priv string }{
		{"/sdn/zones/localnetwork/vmbr0", "SDN.Use"},
		{"/nodes/pve", "Sys.Audit"},
		{"/vms/105", "VM.Allocate"},
		{"/storage/local-lvm", "Datastore.AllocateSpace"},
	} {
		if !a.HasPriv(op, c.path, c.priv) {
			t.Errorf("operator lacks %s on %s", c.priv, c.path)
		}
	}
	// corral downloads templates a node lacks, so its role has this too.
	if !a.HasPriv(op, "/storage/local", "Datastore.AllocateTemplate") {
		t.Error("operator lacks Datastore.AllocateTemplate on /storage/local")
	}
	// 18, and Pool.Allocate and Pool.Audit for a manifest's pool: (issue 33).
	if got := len(a.Permissions("corral@pve!corral", "/")); got != 20 {
		t.Errorf("operator token has %d privileges on /, want 20", got)
	}
}
