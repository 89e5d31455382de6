package doctor

import (
	"fmt"
	"slices"
	"strings"
)

// Severity grades a finding.
type Severity string

const (
	// SevError blocks apply: it would fail with this token.
	SevError Severity = "error"
	// SevRoot needs a one-time command by root@pam on the host; apply
	// gets as far as it can and stops there.
	SevRoot Severity = "root"
	// SevWarning may bite later but does not stop apply.
	SevWarning Severity = "warning"
	// SevInfo is a note.
	SevInfo Severity = "info"
)

// Finding is one problem or note. For a missing privilege Path,
// Privilege, Operation and Why are set; Fix holds the commands that
// repair it.
type Finding struct {
	Severity  Severity `json:"severity"`
	Kind      string   `json:"kind"` // privilege, intersection, root-only, tls, auth, connection, storage, template, network, space, vmid, version
	App       string   `json:"app,omitempty"`
	Path      string   `json:"path,omitempty"`
	Privilege string   `json:"privilege,omitempty"`
	Operation string   `json:"operation,omitempty"`
	Why       string   `json:"why,omitempty"`
	Message   string   `json:"message"`
	Fix       []string `json:"fix,omitempty"`
}

// Perms are effective privileges as GET /access/permissions returns
// them: path → privilege → propagate flag (1 inherited by children, 0 not).
type Perms map[string]map[string]int

// has reports whether priv is held on path (and inherited, if prop).
func (p Perms) has(path, priv string, prop bool) bool {
	f, ok := p[path][priv]
	return ok && (!prop || f == 1)
}

// Grant is one ACL entry with its role's privileges.
type Grant struct {
	Path      string   `json:"path"`
	Role      string   `json:"role"`
	Propagate bool     `json:"propagate"`
	Privs     []string `json:"privs"`
	// Special marks a built-in role (PVEAdmin, PVEVMUser, …), which
	// pveum role modify refuses to change.
	Special bool `json:"special,omitempty"`
}

// Access is what PVE told about the token: its effective privileges, and
// when the token may read them, its user's and its own ACL entries.
type Access struct {
	TokenID string // user@realm!name
	Token   Perms
	// User are the owning user's privileges; nil when the token may not
	// read them (that needs Sys.Audit on /access).
	User Perms
	// TokenGrants are the ACL entries naming the token; valid only when
	// GrantsKnown (reading the ACL needs Sys.Audit).
	TokenGrants []Grant
	GrantsKnown bool
	// Role is the role the fixes name when no granted role is known
	// (default DefaultRole).
	Role string
}

// DefaultRole, DefaultUser and DefaultToken name what Setup creates.
const (
	DefaultRole  = "CorralOperator"
	DefaultUser  = "corral@pve"
	DefaultToken = "corral"
)

func (a Access) user() string {
	u, _, _ := strings.Cut(a.TokenID, "!")
	return u
}

func (a Access) role() string {
	if a.Role != "" {
		return a.Role
	}
	return DefaultRole
}

// tokenGrantAt returns the token's own ACL entries that decide path, as
// PVE's AccessControl roles() walks it: from / down, the entries at the
// deepest level that applies (the path itself, or an ancestor with
// propagate) replace what was inherited.
func tokenGrantAt(grants []Grant, path string) []Grant {
	comps := strings.Split(strings.Trim(path, "/"), "/")
	levels := []string{"/"}
	for i := range comps {
		if comps[i] != "" {
			levels = append(levels, "/"+strings.Join(comps[:i+1], "/"))
		}
	}
	var cur []Grant
	for i, lvl := range levels {
		final := i == len(levels)-1
		var here []Grant
		for _, g := range grants {
			if g.Path == lvl && (final || g.Propagate) {
				here = append(here, g)
			}
		}
		if len(here) > 0 {
			cur = here
		}
	}
	return cur
}

// aclPathFor is where a fix grants a privilege: VM privileges on /vms,
// because PVE removes every ACL on /vms/<vmid> when it destroys the
// container (behaviour.md (a), remove_vm_access), and corral replaces
// containers by destroying them.
func aclPathFor(path string) string {
	if path == "/vms" || strings.HasPrefix(path, "/vms/") {
		return "/vms"
	}
	return path
}

// Evaluate compares the requirements with the token's access and returns
// one finding per missing (path, privilege), in requirement order, each
// with every operation that needs it, an explanation, and the fix. A
// privsep token's privilege that its own ACL grants but its user lacks is
// explained by the intersection rule (seed 004 §3.3).
func Evaluate(reqs []Requirement, acc Access) []Finding {
	groups := groupRequirements(reqs)
	var out []Finding
	missingAny := false
	for _, g := range groups {
		if acc.holds(g.r) {
			continue
		}
		f := missingFinding(g, acc)
		if f.Severity == SevError {
			missingAny = true
		}
		out = append(out, f)
	}
	out = append(out, replaceWarnings(groups, acc)...)
	if missingAny && acc.User == nil && !acc.GrantsKnown && emptyPerms(acc.Token) {
		out = append([]Finding{privsepHint(acc)}, out...)
	}
	return out
}

// privGroup is one (path, privilege) a manifest needs, with every
// operation and app that needs it: one finding says it all.
type privGroup struct {
	r    Requirement
	ops  []string
	apps []string
}

// groupRequirements merges the requirements of one (path, privilege), in
// the order they first appear: it propagates if any needs it to, and it
// is needed now (not Later) if any needs it now.
func groupRequirements(reqs []Requirement) []*privGroup {
	var order []*privGroup
	groups := map[string]*privGroup{}
	for _, r := range reqs {
		k := r.Path + "\x00" + r.Priv
		g := groups[k]
		if g == nil {
			g = &privGroup{r: r}
			groups[k] = g
			order = append(order, g)
		} else {
			if r.Propagate {
				g.r.Propagate = true
			}
			if !r.Later {
				g.r.Later = false // needed now by another operation
			}
		}
		if !slices.Contains(g.ops, r.Operation) {
			g.ops = append(g.ops, r.Operation)
		}
		if r.App != "" && !slices.Contains(g.apps, r.App) {
			g.apps = append(g.apps, r.App)
		}
	}
	return order
}

// holds reports whether the token holds r's privilege, or one of its
// alternatives, where r needs it.
func (a Access) holds(r Requirement) bool {
	if a.Token.has(r.Path, r.Priv, r.Propagate) {
		return true
	}
	for _, p := range r.Alt {
		if a.Token.has(r.Path, p, r.Propagate) {
			return true
		}
	}
	return false
}

// missingFinding is the finding for g's privilege, which the token lacks:
// an error, or a warning when only a later operation needs it.
func missingFinding(g *privGroup, acc Access) Finding {
	r := g.r
	f := Finding{
		Severity: SevError, Kind: "privilege", App: strings.Join(g.apps, ","),
		Path: r.Path, Privilege: r.Priv, Operation: strings.Join(g.ops, "; "), Why: r.Why,
	}
	if r.Later {
		f.Severity = SevWarning
	}
	held := "lacks"
	if _, ok := acc.Token[r.Path][r.Priv]; ok && r.Propagate {
		held = "holds without propagation (so new VMIDs do not inherit it)"
	}
	f.Message = fmt.Sprintf("token %s %s %s on %s", acc.TokenID, held, r.Priv, r.Path)
	if len(r.Alt) > 0 {
		f.Message += " (or " + strings.Join(r.Alt, ", ") + ")"
	}
	explainMissing(&f, r, acc)
	return f
}

// explainMissing adds to f why the token lacks r's privilege and the fix:
// a grant that does not propagate, a privsep intersection with its user,
// a role of its own without the privilege, or no grant at all. What it
// can say depends on whether the token may read its user's privileges
// (acc.User) and the ACL (acc.GrantsKnown).
func explainMissing(f *Finding, r Requirement, acc Access) {
	user, tok := acc.user(), acc.TokenID
	target := aclPathFor(r.Path)
	propagate := ""
	if r.Propagate || target != r.Path {
		propagate = " --propagate 1"
	}
	userHas := acc.User != nil && acc.User.has(r.Path, r.Priv, r.Propagate)
	var ownRoles []Grant
	var own *Grant
	if acc.GrantsKnown {
		ownRoles = tokenGrantAt(acc.TokenGrants, r.Path)
		for i, gr := range ownRoles {
			if slices.Contains(gr.Privs, r.Priv) {
				own = &ownRoles[i]
				break
			}
		}
	}
	switch {
	case own != nil && r.Propagate && !own.Propagate:
		// tokenGrantAt keeps a non-propagating entry only on the
		// path itself: the grant is there, its inheritance is not.
		f.Message += fmt.Sprintf(": its ACL entry (role %s on %s) does not propagate, so VMIDs created later do not inherit it", own.Role, own.Path)
		f.Fix = []string{fmt.Sprintf("pveum acl modify %s --tokens '%s' --roles %s --propagate 1", own.Path, tok, own.Role)}
		if acc.User != nil && !userHas {
			f.Message += fmt.Sprintf(", and user %s lacks it with propagation as well", user)
			f.Fix = append(f.Fix, fmt.Sprintf("pveum acl modify %s --users %s --roles %s --propagate 1", own.Path, user, own.Role))
		}
	case own != nil && acc.User != nil && !userHas:
		f.Kind = "intersection"
		f.Message = fmt.Sprintf("token %s is privilege-separated: it holds only what both its own ACL and user %s hold. "+
			"Its ACL grants %s on %s (role %s on %s), but user %s lacks it, so the token lacks it too",
			tok, user, r.Priv, r.Path, own.Role, own.Path, user)
		f.Fix = []string{fmt.Sprintf("pveum acl modify %s --users %s --roles %s", own.Path, user, own.Role)}
	case own != nil && acc.User == nil:
		f.Kind = "intersection"
		f.Message += fmt.Sprintf(" although its own ACL grants it (role %s on %s): as a privilege-separated token it holds only what user %s also holds, so grant the role to the user too", own.Role, own.Path, user)
		f.Fix = []string{fmt.Sprintf("pveum acl modify %s --users %s --roles %s", own.Path, user, own.Role)}
	case own == nil && len(ownRoles) > 0:
		explainRoleLacks(f, r, acc, ownRoles[0], userHas, target, propagate)
	case acc.GrantsKnown && acc.User != nil && userHas:
		f.Message += fmt.Sprintf(": no ACL entry names the token on this path (user %s has it, but a privilege-separated token needs its own grant as well)", user)
		f.Fix = []string{fmt.Sprintf("pveum acl modify %s --tokens '%s' --roles %s%s", target, tok, acc.role(), propagate)}
	default:
		f.Message += fmt.Sprintf(": grant a role holding it on %s to both user %s and the token (a privilege-separated token gets the intersection of both)", target, user)
		f.Fix = []string{fmt.Sprintf("pveum acl modify %s --users %s --tokens '%s' --roles %s%s", target, user, tok, acc.role(), propagate)}
	}
}

// explainRoleLacks: the token holds role gr on r's path, and gr lacks the
// privilege. The fix extends the role, unless it is built in (PVE refuses
// to change those): then it grants a role of corral's own on target (with
// propagate, " --propagate 1" or "", as the grant needs).
func explainRoleLacks(f *Finding, r Requirement, acc Access, gr Grant, userHas bool, target, propagate string) {
	user, tok := acc.user(), acc.TokenID
	f.Message += fmt.Sprintf(": the role %s it holds there (on %s) does not include %s", gr.Role, gr.Path, r.Priv)
	f.Fix = []string{fmt.Sprintf("pveum role modify %s --privs %s --append 1", gr.Role, r.Priv)}
	if gr.Special {
		f.Message += fmt.Sprintf(" (%s is built in and cannot be changed: grant a role of your own as well)", gr.Role)
		f.Fix = []string{fmt.Sprintf("pveum acl modify %s --users %s --tokens '%s' --roles %s%s", target, user, tok, acc.role(), propagate)}
	}
	if acc.User != nil && !userHas {
		f.Message += fmt.Sprintf(", and user %s lacks it as well", user)
	}
}

// replaceWarnings warn of a VM.Allocate granted on /vms/<vmid> alone: it
// works until corral replaces the container, when PVE drops the ACL with
// the destroy and the create after it fails halfway through the replace.
// Only said when the token's privileges on /vms are known.
func replaceWarnings(groups []*privGroup, acc Access) []Finding {
	if _, known := acc.Token["/vms"]; !known {
		return nil
	}
	user, tok := acc.user(), acc.TokenID
	var out []Finding
	for _, g := range groups {
		r := g.r
		if r.Priv != "VM.Allocate" || !strings.HasPrefix(r.Path, "/vms/") || !acc.Token.has(r.Path, r.Priv, false) || acc.Token.has("/vms", r.Priv, true) {
			continue
		}
		out = append(out, Finding{
			Severity: SevWarning, Kind: "privilege", App: strings.Join(g.apps, ","), Path: r.Path, Privilege: r.Priv,
			Operation: "replace the container (destroy, then create)",
			Why:       "PVE removes every ACL on /vms/<vmid> when it destroys the container (remove_vm_access)",
			Message:   fmt.Sprintf("token %s holds %s on %s but not on /vms with propagation: the grant disappears when corral destroys the container to replace it, and the create that follows fails", tok, r.Priv, r.Path),
			Fix:       []string{fmt.Sprintf("pveum acl modify /vms --users %s --tokens '%s' --roles %s --propagate 1", user, tok, acc.role())},
		})
	}
	return out
}

// privsepHint leads the findings when the token holds nothing corral
// needs and may read neither its user's privileges nor the ACL: the
// likeliest cause is a privilege-separated token whose role was granted
// to it alone, which the per-privilege findings cannot tell.
func privsepHint(acc Access) Finding {
	user, tok := acc.user(), acc.TokenID
	return Finding{
		Severity: SevError, Kind: "intersection",
		Message: fmt.Sprintf("token %s holds no privilege on any path corral needs, and may not read its user's privileges or the ACL. "+
			"If it is privilege-separated (pveum user token add … --privsep 1, the default), it holds only what both its own ACL and user %s hold: "+
			"a role granted to the token alone gives it nothing. Grant the role to the user as well "+
			"(and to the token with --tokens '%s' if it has no ACL entry either)", tok, user, tok),
		Fix: []string{fmt.Sprintf("pveum acl modify / --users %s --roles %s", user, acc.role())},
	}
}

func emptyPerms(p Perms) bool {
	for _, privs := range p {
		if len(privs) > 0 {
			return false
		}
	}
	return true
}
