package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/pve"
)

// installToken is the agent's API credential and how it came about.
type installToken struct {
	id, secret string
	created    bool
}

// SetupNeededError is install's refusal when this token may not create
// the agent's user, role and token: Script holds the pveum commands that
// do it as root, which the command line shows before the error.
type SetupNeededError struct {
	Script  string
	TokenID string
	Missing []string
	Token   string // the agent's token to make: user@realm!name
}

func (e *SetupNeededError) Error() string {
	return fmt.Sprintf("this token (%s) may not create the agent's user, role and token (it lacks %s): run the commands printed above as root on a node, "+
		"then run corral agent install again with CORRAL_AGENT_API_TOKEN=%s=<secret> in its environment", e.TokenID, strings.Join(e.Missing, ", "), e.Token)
}

// token gives the agent its own least-privilege token: the role, user
// and ACLs of doctor --print-setup for this manifest, and a fresh
// privilege-separated token (a re-install replaces it: PVE shows a
// secret only once). A caller that may not manage users gets a
// *SetupNeededError. dryCheck only checks that it may. The secret is
// never logged or printed.
func (in *Installation) token(ctx context.Context, c *pve.Client, dryCheck bool) (*installToken, error) {
	if v := in.GivenToken; v != "" {
		id, _, ok := strings.Cut(v, "=")
		if !ok || !strings.Contains(id, "!") {
			return nil, errors.New("CORRAL_AGENT_API_TOKEN: want user@realm!tokenid=secret")
		}
		return &installToken{id: id, secret: v}, nil
	}
	if err := in.mayMakeToken(ctx, c); err != nil || dryCheck {
		return nil, err
	}
	if err := in.grantRole(ctx, c); err != nil {
		return nil, err
	}
	return in.makeToken(ctx, c)
}

// mayMakeToken checks that this token may create users, roles, tokens
// and ACLs.
func (in *Installation) mayMakeToken(ctx context.Context, c *pve.Client) error {
	perms, err := c.Permissions(ctx, "", "")
	if err != nil {
		return err
	}
	var missing []string
	for _, need := range [][2]string{{"/access", "Sys.Modify"}, {"/access", "User.Modify"}, {"/", "Permissions.Modify"}} {
		if !hasPriv(perms, need[0], need[1]) {
			missing = append(missing, need[1]+" on "+need[0])
		}
	}
	if len(missing) > 0 {
		return &SetupNeededError{Script: in.Setup.Script(), TokenID: c.TokenID(), Missing: missing, Token: in.Setup.Token}
	}
	return nil
}

// grantRole makes the agent's role with exactly the setup's privileges
// (an existing one is set to them), and its user when it does not exist.
func (in *Installation) grantRole(ctx context.Context, c *pve.Client) error {
	plan := in.Setup
	roles, err := c.Roles(ctx)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(roles, func(r pve.Role) bool { return r.RoleID == plan.Role }) {
		err = c.SetRolePrivs(ctx, plan.Role, plan.Privileges)
	} else {
		err = c.AddRole(ctx, plan.Role, plan.Privileges)
	}
	if err != nil {
		return err
	}
	users, err := c.Users(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(users, func(u pve.UserEntry) bool { return u.UserID == plan.User }) {
		if err := c.AddUser(ctx, plan.User, "corral agent for project "+in.Manifest.Project); err != nil {
			return err
		}
	}
	return nil
}

// makeToken makes the agent's token afresh (deleting one of its name)
// and grants the role to the user and the token on the setup's paths.
func (in *Installation) makeToken(ctx context.Context, c *pve.Client) (*installToken, error) {
	plan := in.Setup
	tokens, err := c.Tokens(ctx, plan.User)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(tokens, func(t pve.TokenEntry) bool { return t.TokenID == in.TokenName }) {
		if err := c.DeleteToken(ctx, plan.User, in.TokenName); err != nil {
			return nil, err
		}
	}
	id, secret, err := c.AddToken(ctx, plan.User, in.TokenName, "corral agent for project "+in.Manifest.Project)
	if err != nil {
		return nil, err
	}
	for _, acl := range plan.ACLs {
		if err := c.SetACL(ctx, pve.ACLGrant{Path: acl.Path, Roles: []string{plan.Role}, Users: []string{plan.User}, Tokens: []string{id}, Propagate: acl.Propagate}); err != nil {
			return nil, err
		}
	}
	return &installToken{id: id, secret: id + "=" + secret, created: true}, nil
}

// hasPriv: priv on path, or inherited from a parent path in PVE's answer
// (GET /access/permissions lists each ACL path with what holds there).
func hasPriv(p pve.Permissions, path, priv string) bool {
	for q := path; ; {
		if p.Has(q, priv) {
			return true
		}
		if q == "/" {
			return false
		}
		q = filepath.Dir(q)
	}
}

// SetupFor is the setup plan for the agent of f: doctor's, named for
// it (role CorralAgent-<project> and user corral-agent-<project>@pve
// unless given).
func SetupFor(f *manifest.File, role, user, tokenName string) doctor.SetupPlan {
	if role == "" {
		role = "CorralAgent-" + f.Project
	}
	if user == "" {
		user = "corral-agent-" + f.Project + "@pve"
	}
	return doctor.Setup(doctor.Requirements(f, doctor.Targets{}), doctor.SetupOptions{Role: role, User: user, Token: tokenName})
}
