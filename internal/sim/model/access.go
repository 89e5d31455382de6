package model

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/lazyre"
)

// Access is the persisted access-control state of the emulated cluster:
// users with their API tokens, groups, roles and the ACL. It mirrors
// pve-access-control's user.cfg (plus the secrets PVE keeps in priv/).
//
// Access has no lock of its own: the Cluster holds its mutex around every
// call. It marshals to JSON because the cluster persists it inside its
// state file.
type Access struct {
	// Version is the emulated PVE release ("9.1" or "8.4"); it selects the
	// privilege catalogue (access_roles.go).
	Version string            `json:"version"`
	Users   map[string]*User  `json:"users"`
	Groups  map[string]*Group `json:"groups"`
	// Roles holds the built-in roles (Special) and the custom ones.
	Roles map[string]*Role `json:"roles"`
	// ACL is kept sorted in the order GET /access/acl walks PVE's ACL tree.
	ACL []ACLEntry `json:"acl"`
	// Pools are user.cfg's "pool:" lines (pool.go); nil in a state saved
	// before the emulator had pools.
	Pools map[string]*Pool `json:"pools,omitempty"`
	// TicketKey signs tickets and CSRF tokens (ticket.go). Random per
	// cluster, so tickets survive a restart of the emulator.
	TicketKey []byte `json:"ticket_key"`

	// Clock is the time source for user and token expiry; nil means
	// time.Now. The Cluster sets it to its own clock after creating or
	// loading the state. Not persisted.
	Clock func() time.Time `json:"-"`
}

// User is one user.cfg "user:" line plus its tokens and password.
type User struct {
	UserID string `json:"userid"` // user@realm
	Enable bool   `json:"enable"`
	// Expire is a Unix time; 0 means never.
	Expire int64 `json:"expire"`
	// Groups lists the groups the user belongs to, sorted.
	Groups []string `json:"groups"`
	// PasswordHash is "pbkdf2-sha256$<iterations>$<salt>$<key>" (base64),
	// or "" when no password is set (no login possible).
	PasswordHash string            `json:"password_hash"`
	Tokens       map[string]*Token `json:"tokens"` // key: the token's ID
	Comment      string            `json:"comment"`
	Email        string            `json:"email"`
	Firstname    string            `json:"firstname"`
	Lastname     string            `json:"lastname"`
}

// Token is one API token of a user.
type Token struct {
	// ID is the token's own name, the "tok" of user@realm!tok.
	ID      string `json:"tokenid"`
	Privsep bool   `json:"privsep"`
	// Expire is a Unix time; 0 means never.
	Expire int64 `json:"expire"`
	// SecretHash is the hex SHA-256 of the secret. The secret is a random
	// UUID (122 random bits), so a fast hash is enough.
	SecretHash string `json:"secret_hash"`
	Comment    string `json:"comment"`
}

// Group is one user.cfg "group:" line. Membership is recorded on the users
// (User.Groups).
type Group struct {
	ID      string `json:"groupid"`
	Comment string `json:"comment"`
}

// Role is a named set of privileges.
type Role struct {
	ID    string          `json:"roleid"`
	Privs map[string]bool `json:"privs"`
	// Special marks PVE's built-in roles (access_roles.go), which cannot be
	// changed or deleted.
	Special bool `json:"special"`
}

// ACLEntry is one (path, principal, role) grant, as GET /access/acl lists it.
type ACLEntry struct {
	Path      string `json:"path"`
	Type      string `json:"type"` // user | group | token
	UGID      string `json:"ugid"` // user@realm, group name, or user@realm!tok
	RoleID    string `json:"roleid"`
	Propagate bool   `json:"propagate"`
}

// Auth is the identity of an authenticated request.
type Auth struct {
	// UserID is always user@realm, also for a token (its owner).
	UserID string
	// TokenID is the full token id "user@realm!tok", or "" for a ticket or
	// password login.
	TokenID string
	// HA marks a request of the HA stack itself (pve-ha-lrm runs as
	// root@pam in RPCEnvironment type 'ha'): its start, stop and migrate
	// of an HA resource act, where anyone else's become HA requests.
	HA bool
}

// ID is the authenticated id PVE checks against: the token id for a
// token, else the user id (behaviour.md §0).
func (a Auth) ID() string {
	if a.TokenID != "" {
		return a.TokenID
	}
	return a.UserID
}

// IsRoot reports whether the request is the root@pam user itself, the
// condition of PVE's many hard-coded `$authuser eq 'root@pam'` checks. A
// token is never root@pam, not even root@pam!x (behaviour.md §0; seed 004
// §3.6): such a token without privilege separation passes the generic
// privilege checks, but never these.
func (a Auth) IsRoot() bool {
	return a.TokenID == "" && a.UserID == accessRootUser
}

// UserOptions are the optional fields of POST /access/users.
type UserOptions struct {
	// Disable creates the user disabled (PVE's enable=0). The zero value is
	// PVE's default: enabled.
	Disable   bool
	Expire    int64
	Groups    []string
	Comment   string
	Email     string
	Firstname string
	Lastname  string
}

// ACLUpdate is one PUT /access/acl request.
type ACLUpdate struct {
	Path   string
	Roles  []string
	Users  []string
	Groups []string
	Tokens []string
	// Propagate is PVE's propagate flag; its API default is true.
	Propagate bool
	Delete    bool
}

const (
	accessRootUser = "root@pam"
	// accessPasswordWork is the PBKDF2 work factor for passwords.
	accessPasswordWork = 4096
)

// accessPasswordIterations is the work factor new password hashes get
// (a stored hash names its own, which its check uses): accessPasswordWork,
// but 16 in test binaries, where hashing each new emulator's root password
// at the full factor was 2-3% of internal/cli's and internal/sim's CPU
// under -race (issue 30). TestAccessPasswordHash checks the full factor.
var accessPasswordIterations = accessPasswordWork

func init() {
	if testing.Testing() {
		accessPasswordIterations = 16
	}
}

// accessRealms are the realms of a default PVE install (domains.cfg).
var accessRealms = map[string]bool{"pam": true, "pve": true}

var (
	accessGroupRe  = lazyre.New(`^[A-Za-z0-9.\-_]+$`)
	accessRoleRe   = lazyre.New(`^[A-Za-z0-9.\-_]+$`)
	aclPathCharsRe = lazyre.New(`^[[:alnum:]._\-/]+$`)
	// aclValidPathRe is AccessControl.pm check_path: the paths an ACL may be
	// set on.
	aclValidPathRe = lazyre.New(`^(?:/` +
		`|/access|/access/groups|/access/groups/[[:alnum:]._\-]+` +
		`|/access/realm|/access/realm/[[:alnum:]._\-]+` +
		`|/nodes|/nodes/[[:alnum:]._\-]+` +
		`|/pool|/pool/[A-Za-z0-9._\-]+(?:/[A-Za-z0-9._\-]+){0,2}` +
		`|/sdn|/sdn/controllers|/sdn/controllers/[[:alnum:]_\-]+` +
		`|/sdn/dns|/sdn/dns/[[:alnum:]]+|/sdn/ipams|/sdn/ipams/[[:alnum:]]+` +
		`|/sdn/zones|/sdn/zones/[[:alnum:]._\-]+|/sdn/zones/[[:alnum:]._\-]+/[[:alnum:]._\-]+` +
		`|/sdn/zones/[[:alnum:]._\-]+/[[:alnum:]._\-]+/[1-9][0-9]{0,3}` +
		`|/storage|/storage/[[:alnum:]._\-]+` +
		`|/vms|/vms/[1-9][0-9]{2,}` +
		`|/mapping|/mapping/[[:alnum:]._\-]+|/mapping/[[:alnum:]._\-]+/[[:alnum:]._\-]+` +
		`)$`)
)

// accessEffectivePaths are the paths get_effective_permissions always
// reports on, besides every path of the ACL tree (RPCEnvironment.pm).
var accessEffectivePaths = []string{"/", "/access", "/access/groups", "/nodes", "/pool", "/sdn", "/storage", "/vms"}

// NewAccess returns the access state of a fresh PVE install of the given
// release ("9.1" or "8.4"; any 8.x gets the 8.4 catalogue): the built-in
// roles, an enabled root@pam without password, no groups, no ACLs, and a
// new random ticket key.
func NewAccess(version string) *Access {
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand, Go 1.24+)
	return &Access{
		Version:   version,
		Users:     map[string]*User{accessRootUser: {UserID: accessRootUser, Enable: true}},
		Groups:    map[string]*Group{},
		Roles:     roleBuiltins(version),
		TicketKey: key,
	}
}

// now is the time expiry checks use.
func (a *Access) now() time.Time {
	if a.Clock != nil {
		return a.Clock()
	}
	return time.Now()
}

// AddUser creates a user as POST /access/users does (API2/User.pm
// create_user). opts, at most one, carries the optional fields. A password
// is stored only for the pam and pve realms; other realms fail as PVE's
// domain_set_password does. Errors: 400 for a malformed userid; 500
// "create user failed: ..." if the user exists or a group does not.
func (a *Access) AddUser(userid, password string, opts ...UserOptions) error {
	var o UserOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	realm, err := accessVerifyUsername(userid)
	if err != nil {
		return ParamError(map[string]string{"userid": "invalid format - " + err.Error()})
	}
	const op = "create user failed"
	if a.Users[userid] != nil {
		return accessLockedFail(op, fmt.Sprintf("user '%s' already exists\n", userid))
	}
	var hash string
	if password != "" {
		if !accessRealms[realm] {
			return accessLockedFail(op, fmt.Sprintf("auth domain '%s' does not exist\n", realm))
		}
		hash = accessHashPassword(password)
	}
	for _, g := range o.Groups {
		if a.Groups[g] == nil {
			return accessLockedFail(op, fmt.Sprintf("no such group '%s'\n", g))
		}
	}
	groups := slices.Clone(o.Groups)
	slices.Sort(groups)
	a.Users[userid] = &User{
		UserID: userid, Enable: !o.Disable, Expire: o.Expire, Groups: slices.Compact(groups),
		PasswordHash: hash, Comment: o.Comment, Email: o.Email, Firstname: o.Firstname, Lastname: o.Lastname,
	}
	return nil
}

// SetPassword sets a user's password as PUT /access/password does
// (domain_set_password). Errors are 500: "no such user ('<id>')\n" or
// "auth domain '<realm>' does not exist\n".
func (a *Access) SetPassword(userid, password string) error {
	realm, err := accessVerifyUsername(userid)
	if err != nil {
		return ParamError(map[string]string{"userid": "invalid format - " + err.Error()})
	}
	u := a.Users[userid]
	if u == nil {
		return Failf("no such user ('%s')\n", userid)
	}
	if !accessRealms[realm] {
		return Failf("auth domain '%s' does not exist\n", realm)
	}
	u.PasswordHash = accessHashPassword(password)
	return nil
}

// AddGroup creates a group as POST /access/groups does. Errors: 400 for a
// malformed name, 500 "create group failed: ..." if it exists.
func (a *Access) AddGroup(groupid, comment string) error {
	if !accessGroupRe.MatchString(groupid) {
		return ParamError(map[string]string{"groupid": fmt.Sprintf("invalid format - group name '%s' contains invalid characters\n", groupid)})
	}
	if a.Groups[groupid] != nil {
		return accessLockedFail("create group failed", fmt.Sprintf("group '%s' already exists\n", groupid))
	}
	a.Groups[groupid] = &Group{ID: groupid, Comment: comment}
	return nil
}

// AddToken creates an API token as POST /access/users/{userid}/token/{tokenid}
// does (API2/User.pm generate_token) and returns its secret, a random UUID
// as PVE's. Only a hash of the secret is kept. Errors: 500 "no such user
// ('<id>')\n"; 400 tokenid "Token already exists.".
func (a *Access) AddToken(userid, tokenid string, privsep bool) (secret string, err error) {
	if !accessRealmLike(tokenid) { // the token-subid format
		return "", ParamError(map[string]string{"tokenid": "value does not match the regex pattern"})
	}
	if _, err := accessVerifyUsername(userid); err != nil {
		return "", ParamError(map[string]string{"userid": "invalid format - " + err.Error()})
	}
	u := a.Users[userid]
	if u == nil {
		return "", Failf("no such user ('%s')\n", userid)
	}
	if u.Tokens[tokenid] != nil {
		return "", ParamError(map[string]string{"tokenid": "Token already exists."})
	}
	secret = accessNewUUID()
	if u.Tokens == nil {
		u.Tokens = map[string]*Token{}
	}
	u.Tokens[tokenid] = &Token{ID: tokenid, Privsep: privsep, SecretHash: accessHashSecret(secret)}
	return secret, nil
}

// DeleteToken removes an API token and the ACL entries that name it (PVE
// drops ACL lines of unknown tokens when it reads user.cfg). Errors are
// 500 "no such user ('<id>')\n" or "no such token '<tok>' for user '<id>'\n".
func (a *Access) DeleteToken(userid, tokenid string) error {
	if _, err := a.lookupToken(userid, tokenid); err != nil {
		return err
	}
	delete(a.Users[userid].Tokens, tokenid)
	full := userid + "!" + tokenid
	a.ACL = slices.DeleteFunc(a.ACL, func(e ACLEntry) bool { return e.Type == "token" && e.UGID == full })
	return nil
}

// AddRole creates a custom role as POST /access/roles does (API2/Role.pm
// create_role). Errors: 400 for a malformed role id, an unknown privilege
// ("invalid format - invalid privilege '<p>'\n", checked against this
// release's catalogue) or a role id in the reserved "PVE" namespace; 500
// "create role failed: ..." if the role exists.
func (a *Access) AddRole(id string, privs []string) error {
	bad := map[string]string{}
	if !accessRoleRe.MatchString(id) {
		bad["roleid"] = fmt.Sprintf("invalid format - role name '%s' contains invalid characters\n", id)
	}
	for _, p := range privs {
		if !roleValidPriv(a.Version, p) {
			bad["privs"] = fmt.Sprintf("invalid format - invalid privilege '%s'\n", p)
			break
		}
	}
	if len(bad) > 0 {
		return ParamError(bad)
	}
	if strings.HasPrefix(strings.ToLower(id), "pve") {
		return ParamError(map[string]string{"roleid": "cannot use role ID starting with the (case-insensitive) 'PVE' namespace"})
	}
	if a.Roles[id] != nil {
		return accessLockedFail("create role failed", fmt.Sprintf("role '%s' already exists\n", id))
	}
	set := make(map[string]bool, len(privs))
	for _, p := range privs {
		set[p] = true
	}
	a.Roles[id] = &Role{ID: id, Privs: set}
	return nil
}

// SetACL is PUT /access/acl performed by root@pam: it grants (or with del
// revokes) each role on path to each user, group and token. See UpdateACL
// for the validation and its errors.
func (a *Access) SetACL(path string, roles []string, users, groups, tokens []string, propagate bool, del bool) error {
	return a.UpdateACL(Auth{UserID: accessRootUser}, ACLUpdate{
		Path: path, Roles: roles, Users: users, Groups: groups, Tokens: tokens, Propagate: propagate, Delete: del,
	})
}

// UpdateACL is PUT /access/acl (API2/ACL.pm update_acl) performed by auth,
// checked in PVE's order:
//  1. perm-modify (403): Permissions.Modify on the path, or for /vms/<id>,
//     /storage/<id> and /pool/<id> alternatively VM.Allocate,
//     Datastore.Allocate or Pool.Allocate (root@pam always passes);
//  2. parameters (400): roles is required; one of users, groups, tokens is
//     required; the path must normalize and, unless deleting, be a valid
//     ACL path ("invalid ACL path '<path>'");
//  3. per role, under the user.cfg lock (500 "ACL update failed: ..."):
//     the role must exist; a caller without Permissions.Modify may only
//     hand out roles whose privileges it holds itself (and with propagate
//     only privileges it holds propagated), never NoAccess; then every
//     group, user and token must exist.
//
// Nothing changes unless every check passes.
func (a *Access) UpdateACL(auth Auth, u ACLUpdate) error {
	path, pathOK := aclNormalizePath(u.Path)
	if pathOK && !auth.IsRoot() {
		if err := a.checkPermModify(auth, path); err != nil {
			return err
		}
	}
	if len(u.Roles) == 0 {
		return ParamError(map[string]string{"roles": "property is missing and it is not optional"})
	}
	if len(u.Users) == 0 && len(u.Groups) == 0 && len(u.Tokens) == 0 {
		const msg = "either 'users', 'groups' or 'tokens' is required."
		return ParamError(map[string]string{"users": msg, "groups": msg, "tokens": msg})
	}
	if !pathOK || (!u.Delete && !aclValidPathRe.MatchString(path)) {
		return ParamError(map[string]string{"path": fmt.Sprintf("invalid ACL path '%s'", u.Path)})
	}

	const op = "ACL update failed"
	authPrivs := a.privileges(auth.ID(), path)
	_, canModify := authPrivs["Permissions.Modify"]
	var changes []ACLEntry
	for _, roleID := range u.Roles {
		role := a.Roles[roleID]
		if role == nil {
			return accessLockedFail(op, fmt.Sprintf("role '%s' does not exist\n", roleID))
		}
		if !canModify {
			if err := aclCheckGrant(op, roleID, role, authPrivs, u); err != nil {
				return err
			}
		}
		for _, g := range u.Groups {
			if a.Groups[g] == nil {
				return accessLockedFail(op, fmt.Sprintf("group '%s' does not exist\n", g))
			}
			changes = append(changes, ACLEntry{Path: path, Type: "group", UGID: g, RoleID: roleID, Propagate: u.Propagate})
		}
		for _, id := range u.Users {
			if _, err := accessVerifyUsername(id); err != nil {
				return accessLockedFail(op, err.Error())
			}
			if a.Users[id] == nil {
				return accessLockedFail(op, fmt.Sprintf("user '%s' does not exist\n", id))
			}
			changes = append(changes, ACLEntry{Path: path, Type: "user", UGID: id, RoleID: roleID, Propagate: u.Propagate})
		}
		for _, id := range u.Tokens {
			user, tok, ok := accessSplitTokenID(id)
			if !ok {
				return accessLockedFail(op, fmt.Sprintf("'%s' is not a valid token ID - not able to split into user and token parts\n", id))
			}
			if _, err := a.lookupToken(user, tok); err != nil {
				return accessLockedFail(op, err.(*Error).Message)
			}
			changes = append(changes, ACLEntry{Path: path, Type: "token", UGID: id, RoleID: roleID, Propagate: u.Propagate})
		}
	}
	for _, c := range changes {
		i := slices.IndexFunc(a.ACL, func(e ACLEntry) bool {
			return e.Path == c.Path && e.Type == c.Type && e.UGID == c.UGID && e.RoleID == c.RoleID
		})
		switch {
		case u.Delete && i >= 0:
			a.ACL = slices.Delete(a.ACL, i, i+1)
		case !u.Delete && i >= 0:
			a.ACL[i].Propagate = c.Propagate
		case !u.Delete:
			a.ACL = append(a.ACL, c)
		}
	}
	aclSort(a.ACL)
	return nil
}

// aclCheckGrant is update_acl's guard for callers without
// Permissions.Modify (they passed perm-modify through VM.Allocate and the
// like): the role's privileges must be a subset of the caller's. PVE raises
// a parameter exception inside the user.cfg lock, whose wrapper turns it
// into a plain 500 carrying the exception's text.
func aclCheckGrant(op, roleID string, role *Role, authPrivs map[string]bool, u ACLUpdate) error {
	verb := "add"
	if u.Delete {
		verb = "remove"
	}
	fail := func(msg string) error {
		return Failf("%s: 400 Parameter verification failed.\nrole: %s\n", op, msg)
	}
	for _, p := range roleSortedKeys(role.Privs) {
		propagated, ok := authPrivs[p]
		if !ok {
			return fail(fmt.Sprintf("Cannot %s role '%s' - requires 'Permissions.Modify' or superset of privileges.", verb, roleID))
		}
		if u.Propagate && !propagated && !u.Delete {
			return fail(fmt.Sprintf("Cannot %s role '%s' with propagation - requires 'Permissions.Modify' or propagated superset of privileges.", verb, roleID))
		}
	}
	if roleID == roleNoAccess {
		return fail(fmt.Sprintf("Cannot %s role '%s' - requires 'Permissions.Modify'", verb, roleID))
	}
	return nil
}

// checkPermModify is RPCEnvironment.pm check_perm_modify for a normalized
// ACL path.
func (a *Access) checkPermModify(auth Auth, path string) error {
	privs := []string{"Permissions.Modify"}
	switch {
	case strings.HasPrefix(path, "/storage/"):
		privs = append(privs, "Datastore.Allocate")
	case strings.HasPrefix(path, "/vms/"):
		privs = append(privs, "VM.Allocate")
	case strings.HasPrefix(path, "/pool/"):
		privs = append(privs, "Pool.Allocate")
	}
	return a.Check(auth, path, privs, true)
}

// RemoveVMAccess drops every ACL entry on /vms/<vmid> and the guest's
// pool membership, as destroying a guest does (remove_vm_access;
// behaviour.md (a)).
func (a *Access) RemoveVMAccess(vmid int) {
	a.removeFromPool(vmid)
	p := "/vms/" + strconv.Itoa(vmid)
	a.ACL = slices.DeleteFunc(a.ACL, func(e ACLEntry) bool {
		return e.Path == p || strings.HasPrefix(e.Path, p+"/")
	})
}

// VerifyToken authenticates "PVEAPIToken=<fullTokenID>=<secret>" as PVE's
// verify_token does: the owner must exist, be enabled and not expired; the
// token must exist and not be expired; the secret's hash is compared in
// constant time. Failures are 401 with PVE's message, which never contains
// the secret.
func (a *Access) VerifyToken(fullTokenID, secret string) (Auth, error) {
	user, tok, ok := accessSplitTokenID(fullTokenID)
	if !ok {
		return Auth{}, accessAuthFail(fmt.Sprintf("'%s' is not a valid token ID - not able to split into user and token parts\n", fullTokenID))
	}
	if err := a.checkUserEnabled(user); err != nil {
		return Auth{}, err
	}
	t, err := a.lookupToken(user, tok)
	if err != nil {
		return Auth{}, accessAuthFail(err.(*Error).Message)
	}
	if t.Expire != 0 && t.Expire < a.now().Unix() {
		return Auth{}, accessAuthFail(fmt.Sprintf("token '%s' access expired\n", tok))
	}
	want, err := hex.DecodeString(t.SecretHash)
	got := sha256.Sum256([]byte(secret))
	if err != nil || !hmac.Equal(want, got[:]) {
		return Auth{}, accessAuthFail("invalid token value!\n")
	}
	return Auth{UserID: user, TokenID: fullTokenID}, nil
}

// VerifyPassword authenticates a POST /access/ticket login. As in PVE,
// every failure (unknown, disabled or expired user, unknown realm, wrong or
// unset password) is the same 401 "authentication failure\n".
func (a *Access) VerifyPassword(userid, password string) (Auth, error) {
	fail := &Error{Kind: ErrAuth, Message: "authentication failure\n"}
	realm, err := accessVerifyUsername(userid)
	if err != nil || !accessRealms[realm] || a.checkUserEnabled(userid) != nil {
		return Auth{}, fail
	}
	if !accessCheckPassword(a.Users[userid].PasswordHash, password) {
		return Auth{}, fail
	}
	return Auth{UserID: userid}, nil
}

// checkUserEnabled is AccessControl.pm check_user_enabled, failing with 401.
func (a *Access) checkUserEnabled(userid string) error {
	if _, err := accessVerifyUsername(userid); err != nil {
		return accessAuthFail(err.Error())
	}
	u := a.Users[userid]
	switch {
	case u == nil:
		return accessAuthFail(fmt.Sprintf("no such user ('%s')\n", userid))
	case !u.Enable:
		return accessAuthFail(fmt.Sprintf("user '%s' is disabled\n", userid))
	case u.Expire != 0 && u.Expire < a.now().Unix():
		return accessAuthFail(fmt.Sprintf("user '%s' access expired\n", userid))
	}
	return nil
}

// lookupToken is check_token_exist: 500 "no such user ('<id>')\n" or
// "no such token '<tok>' for user '<id>'\n".
func (a *Access) lookupToken(userid, tokenid string) (*Token, error) {
	u := a.Users[userid]
	if u == nil {
		return nil, Failf("no such user ('%s')\n", userid)
	}
	t := u.Tokens[tokenid]
	if t == nil {
		return nil, Failf("no such token '%s' for user '%s'\n", tokenid, userid)
	}
	return t, nil
}

// Permissions returns the privileges id (a user id or a full token id) holds
// on path, as RPCEnvironment.pm permissions computes them:
//   - root@pam has every privilege everywhere;
//   - a token without privilege separation has its owner's privileges (so
//     root@pam!x with privsep=0 has all of them);
//   - a privsep token has the intersection of its own ACL privileges and
//     its owner's (seed 004 §3.3: the role must be granted to both);
//   - otherwise the roles come from the ACL along the path (see aclRoles).
func (a *Access) Permissions(id, path string) map[string]bool {
	privs := a.privileges(id, path)
	out := make(map[string]bool, len(privs))
	for p := range privs {
		out[p] = true
	}
	return out
}

// EffectivePermissions is what GET /access/permissions returns for id:
// {path: {priv: propagate 1|0}}. With a path, just that path (present even
// when empty, as in PVE). Without, get_effective_permissions: the top-level
// paths ("/", "/access", "/access/groups", "/nodes", "/pool", "/sdn",
// "/storage", "/vms") and every node of the ACL tree (ACL paths and their
// parents), leaving out paths without privileges. Compare
// ../shared/pve-api/fixtures/access-permissions-token.json.
func (a *Access) EffectivePermissions(id, path string) map[string]map[string]int {
	if path != "" {
		return map[string]map[string]int{path: aclFlags(a.privileges(id, path))}
	}
	paths := map[string]bool{}
	for _, p := range accessEffectivePaths {
		paths[p] = true
	}
	for _, e := range a.ACL {
		comps := aclSplitPath(e.Path)
		for i := 1; i <= len(comps); i++ {
			paths["/"+strings.Join(comps[:i], "/")] = true
		}
	}
	for _, p := range a.Pools {
		for _, vmid := range p.VMs {
			paths["/vms/"+strconv.Itoa(vmid)] = true
		}
		for _, sid := range p.Storage {
			paths["/storage/"+sid] = true
		}
	}
	out := map[string]map[string]int{}
	for p := range paths {
		if privs := a.privileges(id, p); len(privs) > 0 {
			out[p] = aclFlags(privs)
		}
	}
	return out
}

// CheckReadPermissions is the permission rule of GET /access/permissions
// for reading id's permissions: one's own, those of one's own tokens, or
// anybody's with Sys.Audit on /access. An empty id means the caller's own.
func (a *Access) CheckReadPermissions(auth Auth, id string) error {
	if id == "" || id == auth.ID() {
		return nil
	}
	if user, _, ok := accessSplitTokenID(id); ok && user == auth.ID() {
		return nil
	}
	return a.Check(auth, "/access", []string{"Sys.Audit"}, false)
}

// Check is RPCEnvironment.pm check (any=false: every privilege needed) and
// check_any (any=true: one is enough). It returns nil or a 403 *Error:
// "Permission check failed (<path>, <first missing priv>)\n", or with any
// the privileges joined by "|" (behaviour.md §0). A privilege name unknown
// to this PVE release is a 500 "invalid privilege '<name>'\n", as PVE's
// verify_privname dies.
func (a *Access) Check(auth Auth, path string, privs []string, any bool) error {
	held := a.privileges(auth.ID(), path)
	for _, p := range privs {
		if !roleValidPriv(a.Version, p) {
			return Failf("invalid privilege '%s'\n", p)
		}
		_, ok := held[p]
		switch {
		case any && ok:
			return nil
		case !any && !ok:
			return PermError(path + ", " + p)
		}
	}
	if any {
		return PermError(path + ", " + strings.Join(privs, "|"))
	}
	return nil
}

// HasPriv reports whether auth holds priv on path.
func (a *Access) HasPriv(auth Auth, path, priv string) bool {
	_, ok := a.privileges(auth.ID(), path)[priv]
	return ok
}

// privileges is RPCEnvironment.pm permissions: privilege → propagate flag.
func (a *Access) privileges(id, path string) map[string]bool {
	if id == accessRootUser {
		out := map[string]bool{}
		admin := a.Roles[roleAdministrator]
		if admin == nil {
			admin = &Role{Privs: map[string]bool{}}
			for _, p := range rolePrivileges(a.Version) {
				admin.Privs[p] = true
			}
		}
		for p, set := range admin.Privs {
			if set {
				out[p] = true
			}
		}
		return out
	}
	if user, tok, ok := accessSplitTokenID(id); ok {
		u := a.Users[user]
		if u == nil || u.Tokens[tok] == nil {
			return map[string]bool{}
		}
		userPrivs := a.privileges(user, path)
		if !u.Tokens[tok].Privsep {
			return userPrivs
		}
		own := a.rolePrivs(a.roles(id, path, true))
		if user == accessRootUser {
			return own // PVE skips the intersection for root's tokens
		}
		out := map[string]bool{}
		for p, tokenFlag := range own {
			if userFlag, ok := userPrivs[p]; ok {
				out[p] = userFlag && tokenFlag
			}
		}
		return out
	}
	if _, err := accessVerifyUsername(id); err != nil {
		return map[string]bool{}
	}
	return a.rolePrivs(a.roles(id, path, false))
}

// aclRoles is AccessControl.pm roles: the roles (→ propagate flag) id holds
// on path. It walks the path from "/" to its end; at each node the
// principal's own entries (token entries for a token, user entries for a
// user), if any apply, replace everything inherited so far; otherwise the
// user's group entries, if any apply, do. An entry applies at the final
// node always and above it only with propagate. So the deepest level with a
// matching entry wins, and at the same level user beats group. If the
// result has NoAccess, it is the only role (and grants nothing).
func (a *Access) aclRoles(id, path string, token bool) map[string]bool {
	byPath := map[string][]ACLEntry{}
	for _, e := range a.ACL {
		byPath[e.Path] = append(byPath[e.Path], e)
	}
	own := "user"
	member := map[string]bool{}
	if token {
		own = "token"
	} else if u := a.Users[id]; u != nil {
		for _, g := range u.Groups {
			member[g] = a.Groups[g] != nil
		}
	}
	collect := func(entries []ACLEntry, final bool, match func(ACLEntry) bool) map[string]bool {
		var found map[string]bool
		for _, e := range entries {
			if match(e) && (final || e.Propagate) {
				if found == nil {
					found = map[string]bool{}
				}
				found[e.RoleID] = found[e.RoleID] || e.Propagate
			}
		}
		return found
	}

	roles := map[string]bool{}
	comps := aclSplitPath(path)
	for i := 0; i <= len(comps); i++ {
		entries := byPath["/"+strings.Join(comps[:i], "/")]
		final := i == len(comps)
		if r := collect(entries, final, func(e ACLEntry) bool { return e.Type == own && e.UGID == id }); r != nil {
			roles = r
			continue
		}
		if token {
			continue
		}
		if r := collect(entries, final, func(e ACLEntry) bool { return e.Type == "group" && member[e.UGID] }); r != nil {
			roles = r
		}
	}
	if flag, ok := roles[roleNoAccess]; ok {
		return map[string]bool{roleNoAccess: flag}
	}
	return roles
}

// rolePrivs turns roles (→ propagate flag) into privileges (→ flag); a
// privilege is propagated if any role carrying it is.
func (a *Access) rolePrivs(roles map[string]bool) map[string]bool {
	out := map[string]bool{}
	for id, flag := range roles {
		r := a.Roles[id]
		if r == nil {
			continue
		}
		for p, set := range r.Privs {
			if set {
				out[p] = out[p] || flag
			}
		}
	}
	return out
}

// aclFlags converts privilege → propagate into PVE's 1|0 wire form.
func aclFlags(privs map[string]bool) map[string]int {
	out := make(map[string]int, len(privs))
	for p, f := range privs {
		out[p] = 0
		if f {
			out[p] = 1
		}
	}
	return out
}

// aclSplitPath returns the non-empty components of an ACL path.
func aclSplitPath(path string) []string {
	return slices.DeleteFunc(strings.Split(path, "/"), func(s string) bool { return s == "" })
}

// aclNormalizePath is AccessControl.pm normalize_path: collapse repeated
// slashes, drop a trailing one, make it absolute, and allow only
// alphanumerics and "._-/".
func aclNormalizePath(path string) (string, bool) {
	if path == "" {
		return "", false
	}
	for strings.Contains(path, "//") {
		path = strings.ReplaceAll(path, "//", "/")
	}
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if !aclPathCharsRe.MatchString(path) {
		return "", false
	}
	return path, true
}

// aclSort orders entries as GET /access/acl lists them: the ACL tree
// depth-first with sorted children, then by type, principal and role.
func aclSort(acl []ACLEntry) {
	typeRank := map[string]int{"user": 0, "group": 1, "token": 2}
	slices.SortStableFunc(acl, func(x, y ACLEntry) int {
		if c := slices.Compare(aclSplitPath(x.Path), aclSplitPath(y.Path)); c != 0 {
			return c
		}
		if c := typeRank[x.Type] - typeRank[y.Type]; c != 0 {
			return c
		}
		if c := strings.Compare(x.UGID, y.UGID); c != 0 {
			return c
		}
		return strings.Compare(x.RoleID, y.RoleID)
	})
}

// accessVerifyUsername is PVE::Auth::Plugin verify_username; it returns the
// realm, or an error whose text is PVE's die message.
func accessVerifyUsername(userid string) (realm string, err error) {
	switch n := len(userid); {
	case n < 3:
		return "", fmt.Errorf("user name '%s' is too short\n", userid)
	case n > 64:
		return "", fmt.Errorf("user name '%s' is too long (%d > 64)\n", userid, n)
	}
	_, realm, ok := accessSplitUserID(userid)
	if !ok {
		return "", fmt.Errorf("value '%s' does not look like a valid user name\n", userid)
	}
	return realm, nil
}

// accessSplitTokenID splits "user@realm!tok" (split_tokenid).
func accessSplitTokenID(id string) (user, tok string, ok bool) {
	i := strings.LastIndexByte(id, '!')
	if i < 0 {
		return "", "", false
	}
	user, tok = id[:i], id[i+1:]
	if _, _, ok := accessSplitUserID(user); !ok || !accessRealmLike(tok) {
		return "", "", false
	}
	return user, tok, true
}

// accessSplitUserID splits "name@realm" as pve-access-control's pattern
// ^([^\s:/]+)@([A-Za-z][A-Za-z0-9.\-_]+)$ matches it, without a regular
// expression: every authenticated request and every privilege
// check verifies its user ID, and the match was 2-3% of the emulator's CPU
// under internal/cli's tests. The realm cannot hold '@', so the split is at
// the last one; the name is one or more characters, none of them RE2's \s
// (tab, newline, form feed, carriage return, space), ':' or '/'.
// TestAccessSplitUserID checks it against the pattern.
func accessSplitUserID(id string) (name, realm string, ok bool) {
	i := strings.LastIndexByte(id, '@')
	if i <= 0 || !accessRealmLike(id[i+1:]) {
		return "", "", false
	}
	name, realm = id[:i], id[i+1:]
	if strings.ContainsAny(name, "\t\n\f\r :/") {
		return "", "", false
	}
	return name, realm, true
}

// accessRealmLike reports whether s matches [A-Za-z][A-Za-z0-9.\-_]+, the
// form of a realm and of a token's name (the token-subid format).
func accessRealmLike(s string) bool {
	if len(s) < 2 || !('a' <= s[0]|0x20 && s[0]|0x20 <= 'z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// accessLockedFail is how PVE reports a plain die inside
// lock_user_config(code, op): 500 "<op>: <msg>". Since PVE 7, pve-cluster's
// cfs_lock re-raises an error of the locked code as it is (no "error
// during cfs-locked 'file-user_cfg' operation:" in between).
func accessLockedFail(op, msg string) *Error {
	return Failf("%s: %s", op, msg)
}

// accessAuthFail is an authentication failure: 401 with PVE's message.
func accessAuthFail(msg string) *Error {
	return &Error{Kind: ErrAuth, Message: msg}
}

// accessNewUUID returns a random version 4 UUID, the form of PVE's token
// secrets.
func accessNewUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// accessHashSecret is the stored form of a token secret.
func accessHashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// accessHashPassword is the stored form of a password: salted PBKDF2.
func accessHashPassword(password string) string {
	return accessHashPasswordWork(password, accessPasswordIterations)
}

// accessHashPasswordWork is accessHashPassword at work factor iter.
func accessHashPasswordWork(password string, iter int) string {
	salt := make([]byte, 16)
	rand.Read(salt)
	key, err := pbkdf2.Key(sha256.New, password, salt, iter, 32)
	if err != nil {
		panic(fmt.Sprintf("access: pbkdf2: %v", err)) // only for invalid parameters, which are constant
	}
	enc := base64.RawStdEncoding
	return fmt.Sprintf("pbkdf2-sha256$%d$%s$%s", iter, enc.EncodeToString(salt), enc.EncodeToString(key))
}

// accessCheckPassword compares password with a stored hash in constant time.
func accessCheckPassword(stored, password string) bool {
	parts := strings.Split(stored, "$")
	if len(parts) != 4 || parts[0] != "pbkdf2-sha256" {
		return false
	}
	iter, err := strconv.Atoi(parts[1])
	if err != nil || iter < 1 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[2])
	want, err2 := enc.DecodeString(parts[3])
	if err1 != nil || err2 != nil {
		return false
	}
	got, err := pbkdf2.Key(sha256.New, password, salt, iter, len(want))
	return err == nil && hmac.Equal(got, want)
}
