package model

import (
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Firewall aliases (pve-firewall API2/Firewall/Aliases.pm): names for an
// address or network, in the cluster's firewall config and in each
// guest's, which rules refer to. Keyed by the lower-cased name, as PVE's
// parser files them; the name keeps its case.

// FirewallAlias is one [ALIASES] line as parse_alias reads it back.
type FirewallAlias struct {
	Name    string `json:"name"`
	CIDR    string `json:"cidr"` // a /32 or /128 prefix is dropped
	IPv     int    `json:"ipversion"`
	Comment string `json:"comment,omitempty"`
}

// ClusterFirewall is /etc/pve/firewall/cluster.fw, as far as the emulator
// keeps it.
type ClusterFirewall struct {
	Aliases map[string]*FirewallAlias `json:"aliases,omitempty"`
	IPSets  map[string]*FirewallIPSet `json:"ipsets,omitempty"`
	// Options are [OPTIONS] as the file holds them (firewall_cluster.go).
	Options map[string]string `json:"options,omitempty"`
	// Rules are [RULES]; Groups the security groups by lower-cased name
	// (firewall_group.go); Hosts each node's host.fw rules, kept here
	// with the rest of the firewall's state.
	Rules  []FirewallRule            `json:"rules,omitempty"`
	Groups map[string]*FirewallGroup `json:"groups,omitempty"`
	Hosts  map[string][]FirewallRule `json:"hosts,omitempty"`
}

// fwAliases answers for the aliases, the cluster's and the guests'.
type fwAliases struct{ fwParts }

// AliasScope names whose aliases a call is about: the cluster's (VMID 0)
// or a guest's.
type AliasScope struct {
	Node string // the route's node, checked; "" for the cluster
	VMID int
}

// aliasList is the aliases by key with copy_list_with_digest's digest:
// SHA-1 over each entry's "key:value\n" in key order.
func aliasList(aliases map[string]*FirewallAlias) ([]map[string]any, string) {
	h := sha1.New()
	out := []map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(aliases)) {
		a := aliases[k]
		e := map[string]any{"cidr": a.CIDR}
		h.Write([]byte("cidr:" + a.CIDR + "\n"))
		if a.Comment != "" {
			e["comment"] = a.Comment
			h.Write([]byte("comment:" + a.Comment + "\n"))
		}
		e["ipversion"] = a.IPv
		h.Write([]byte("ipversion:" + strconv.Itoa(a.IPv) + "\n"))
		e["name"] = a.Name
		h.Write([]byte("name:" + a.Name + "\n"))
		out = append(out, e)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	for _, e := range out {
		e["digest"] = digest
	}
	return out, digest
}

// Aliases is GET .../aliases: every alias with the list's digest.
func (fa *fwAliases) Aliases(s AliasScope) ([]map[string]any, error) {
	fa.stateMu.RLock()
	defer fa.stateMu.RUnlock()
	if err := fa.scopeLocked(s); err != nil {
		return nil, err
	}
	list, _ := aliasList(fa.state().fwAliases(s, false))
	return list, nil
}

// Alias is GET .../aliases/{name}: the alias as stored (no digest); 400
// {name: "no such alias"}.
func (fa *fwAliases) Alias(s AliasScope, name string) (*FirewallAlias, error) {
	fa.stateMu.RLock()
	defer fa.stateMu.RUnlock()
	if err := fa.scopeLocked(s); err != nil {
		return nil, err
	}
	a := fa.state().fwAliases(s, false)[strings.ToLower(name)]
	if a == nil {
		return nil, ParamError(map[string]string{"name": "no such alias"})
	}
	return a, nil
}

// AliasChange is a create, update or delete of an alias.
type AliasChange struct {
	Name, CIDR, Comment, Rename, Digest string
}

// AddAlias is POST .../aliases: 400 {name: "alias '<name>' already
// exists"} for a name taken in any case.
func (fa *fwAliases) AddAlias(s AliasScope, ch AliasChange) error {
	return fa.changeAliases(s, func(aliases map[string]*FirewallAlias) error {
		key := strings.ToLower(ch.Name)
		if aliases[key] != nil {
			return ParamError(map[string]string{"name": "alias '" + ch.Name + "' already exists"})
		}
		aliases[key] = newAlias(ch.Name, ch.CIDR, ch.Comment)
		return nil
	})
}

// UpdateAlias is PUT .../aliases/{name}: digest checked, the alias
// replaced (a comment not given is dropped, as PVE's), then renamed.
func (fa *fwAliases) UpdateAlias(s AliasScope, ch AliasChange) error {
	return fa.changeAliases(s, func(aliases map[string]*FirewallAlias) error {
		if _, digest := aliasList(aliases); ch.Digest != "" && ch.Digest != digest {
			return Failf("detected modified configuration - file changed by other user? Try again.\n")
		}
		key := strings.ToLower(ch.Name)
		if aliases[key] == nil {
			return ParamError(map[string]string{"name": "no such alias"})
		}
		aliases[key] = newAlias(ch.Name, ch.CIDR, ch.Comment)
		if rename := strings.ToLower(ch.Rename); rename != "" && rename != key {
			if aliases[rename] != nil {
				return ParamError(map[string]string{"name": "alias '" + ch.Rename + "' already exists"})
			}
			aliases[key].Name = ch.Rename
			aliases[rename] = aliases[key]
			delete(aliases, key)
		}
		return nil
	})
}

// DeleteAlias is DELETE .../aliases/{name}: digest checked; a missing
// alias is no error, as in PVE.
func (fa *fwAliases) DeleteAlias(s AliasScope, name, digest string) error {
	return fa.changeAliases(s, func(aliases map[string]*FirewallAlias) error {
		if _, d := aliasList(aliases); digest != "" && digest != d {
			return Failf("detected modified configuration - file changed by other user? Try again.\n")
		}
		delete(aliases, strings.ToLower(name))
		return nil
	})
}

// changeAliases applies change to a copy of the scope's aliases and keeps
// it only when change succeeds.
func (fa *fwAliases) changeAliases(s AliasScope, change func(map[string]*FirewallAlias) error) error {
	fa.stateMu.Lock()
	defer fa.stateMu.Unlock()
	if err := fa.scopeLocked(s); err != nil {
		return err
	}
	next := map[string]*FirewallAlias{}
	for k, a := range fa.state().fwAliases(s, false) {
		cp := *a
		next[k] = &cp
	}
	if err := change(next); err != nil {
		return err
	}
	aliases := fa.state().fwAliases(s, true)
	clear(aliases)
	maps.Copy(aliases, next)
	return fa.saveLocked()
}

// newAlias is an alias as the config file gives it back: the CIDR without
// a host prefix (/32, /128), with its IP version (parse_ip_or_cidr).
func newAlias(name, cidr, comment string) *FirewallAlias {
	v := 4
	if strings.Contains(cidr, ":") {
		v = 6
	}
	cidr = strings.TrimSuffix(cidr, map[int]string{4: "/32", 6: "/128"}[v])
	return &FirewallAlias{Name: name, CIDR: cidr, IPv: v, Comment: strings.TrimSpace(comment)}
}
