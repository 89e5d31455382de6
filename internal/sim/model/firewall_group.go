package model

import (
	"crypto/sha1"
	"encoding/hex"
	"hash"
	"maps"
	"slices"
)

// Security groups (API2/Firewall/Groups.pm): named rule lists in the
// cluster's config that a guest's, the cluster's or a node's rules use
// with type "group". The config file gives them back by lower-cased
// name (parse_clusterfw_conf).

// fwGroups answers for the security groups; their rules are fwRules'.
type fwGroups struct{ fwParts }

// FirewallGroup is one [group <name>] section.
type FirewallGroup struct {
	Comment string         `json:"comment,omitempty"`
	Rules   []FirewallRule `json:"rules,omitempty"`
}

// GroupChange is POST /cluster/firewall/groups: a new group, or with
// Rename the group Rename renamed to Group.
type GroupChange struct {
	Group, Rename, Digest string
	Comment               *string
}

// groupList is $get_security_group_list: by name, with the comment and
// the list's digest.
func groupList(groups map[string]*FirewallGroup) []map[string]any {
	var rows []map[string]any
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		row := map[string]any{"group": name}
		if cm := groups[name].Comment; cm != "" {
			row["comment"] = cm
		}
		rows = append(rows, row)
	}
	return withListDigest(rows)
}

// withListDigest is copy_list_with_digest over rows of strings: each
// row gets the digest of all of them.
func withListDigest(rows []map[string]any) []map[string]any {
	h := sha1New()
	for _, row := range rows {
		for _, k := range slices.Sorted(maps.Keys(row)) {
			h.Write([]byte(k + ":" + row[k].(string) + "\n"))
		}
	}
	digest := hexSum(h)
	out := []map[string]any{}
	for _, row := range rows {
		row["digest"] = digest
		out = append(out, row)
	}
	return out
}

// FirewallGroups is GET /cluster/firewall/groups.
func (fg *fwGroups) FirewallGroups() []map[string]any {
	fg.stateMu.RLock()
	defer fg.stateMu.RUnlock()
	return groupList(fg.state().clusterFirewallView().Groups)
}

// CreateFirewallGroup is create_security_group: a new empty group (400
// {group: "Security group '<x>' already exists"}), or a rename that
// checks the digest, moves the rules and comment and renames the group
// in every rule that uses it.
func (fg *fwGroups) CreateFirewallGroup(ch GroupChange) error {
	fg.stateMu.Lock()
	defer fg.stateMu.Unlock()
	groups := fg.state().clusterFirewallView().Groups
	if ch.Rename == "" {
		if groups[ch.Group] != nil {
			return ParamError(map[string]string{"group": "Security group '" + ch.Group + "' already exists"})
		}
		g := &FirewallGroup{}
		if ch.Comment != nil {
			g.Comment = *ch.Comment
		}
		fg.setGroupLocked(lowerName(ch.Group), g)
		return fg.saveLocked()
	}
	if ch.Digest != "" && ch.Digest != firstDigest(groupList(groups)) {
		return Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	old := groups[ch.Rename]
	if old == nil {
		return ParamError(map[string]string{"group": "Security group '" + ch.Rename + "' does not exist"})
	}
	if groups[ch.Group] != nil && ch.Group != ch.Rename {
		return ParamError(map[string]string{"group": "Security group '" + ch.Group + "' does already exist"})
	}
	if ch.Comment != nil {
		old.Comment = *ch.Comment
	}
	if ch.Group != ch.Rename {
		delete(groups, ch.Rename)
		fg.setGroupLocked(lowerName(ch.Group), old)
		fg.state().renameGroupRefs(ch.Rename, ch.Group)
	}
	return fg.saveLocked()
}

// firstDigest is a listed digest, or the digest of nothing.
func firstDigest(rows []map[string]any) string {
	if len(rows) == 0 {
		return hexSum(sha1New())
	}
	return rows[0]["digest"].(string)
}

func (fg *fwGroups) setGroupLocked(name string, g *FirewallGroup) {
	cf := fg.state().clusterFirewall()
	if cf.Groups == nil {
		cf.Groups = map[string]*FirewallGroup{}
	}
	cf.Groups[name] = g
}

// DeleteFirewallGroup is delete_security_group: only an empty group goes.
func (fg *fwGroups) DeleteFirewallGroup(name string) error {
	fg.stateMu.Lock()
	defer fg.stateMu.Unlock()
	g := fg.state().clusterFirewallView().Groups[name]
	if g == nil {
		return Failf("no such security group '%s'\n", name)
	}
	if len(g.Rules) > 0 {
		return Failf("Security group '%s' is not empty\n", name)
	}
	delete(fg.state().clusterFirewall().Groups, name)
	return fg.saveLocked()
}

func sha1New() hash.Hash { return sha1.New() }

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }
