package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// IPSetChange is a create or rename of an IP set (POST .../ipset).
type IPSetChange struct {
	Name, Rename, Digest string
	Comment              *string
}

// changeIPSets applies change to a copy of the scope's IP sets and keeps
// it only when change succeeds; change sees the aliases too, for
// references.
func (fi *fwIPSets) changeIPSets(s AliasScope, change func(sets map[string]*FirewallIPSet) error) error {
	fi.stateMu.Lock()
	defer fi.stateMu.Unlock()
	if err := fi.scopeLocked(s); err != nil {
		return err
	}
	next := map[string]*FirewallIPSet{}
	for k, set := range fi.state().fwIPSets(s, false) {
		next[k] = &FirewallIPSet{Comment: set.Comment, Entries: slices.Clone(set.Entries)}
	}
	if err := change(next); err != nil {
		return err
	}
	// The file gives the sets back by lower-cased name, the entries
	// sorted by CIDR (format_ipsets); a name taken twice in different
	// case is read back as one set, the later section's entries kept.
	sets := fi.state().fwIPSets(s, true)
	clear(sets)
	for _, k := range slices.Sorted(maps.Keys(next)) {
		set := next[k]
		slices.SortStableFunc(set.Entries, func(a, b FirewallIPSetEntry) int { return strings.Compare(a.CIDR, b.CIDR) })
		lk := strings.ToLower(k)
		if old := sets[lk]; old != nil && set.Comment == "" {
			set.Comment = old.Comment
		}
		sets[lk] = set
	}
	return fi.saveLocked()
}

// CreateIPSet is POST .../ipset: a new empty set, or with rename the set
// rename renamed to name (digest checked), its comment kept unless one is
// given. 400 {name: "IPSet '<x>' already exists" | "does already exist" |
// "does not exist"} as IPSet.pm raises them.
func (fi *fwIPSets) CreateIPSet(s AliasScope, ch IPSetChange) error {
	return fi.changeIPSets(s, func(sets map[string]*FirewallIPSet) error {
		if ch.Rename != "" {
			if _, digest := ipsetList(sets); ch.Digest != "" && ch.Digest != digest {
				return Failf("detected modified configuration - file changed by other user? Try again.\n")
			}
			if sets[ch.Rename] == nil {
				return ParamError(map[string]string{"name": "IPSet '" + ch.Rename + "' does not exist"})
			}
			if sets[ch.Name] != nil && ch.Name != ch.Rename {
				return ParamError(map[string]string{"name": "IPSet '" + ch.Name + "' does already exist"})
			}
			set := sets[ch.Rename]
			delete(sets, ch.Rename)
			sets[ch.Name] = set
			if ch.Comment != nil {
				set.Comment = *ch.Comment
			}
			return nil
		}
		if sets[ch.Name] != nil {
			return ParamError(map[string]string{"name": "IPSet '" + ch.Name + "' already exists"})
		}
		set := &FirewallIPSet{}
		if ch.Comment != nil {
			set.Comment = *ch.Comment
		}
		sets[ch.Name] = set
		return nil
	})
}

// DeleteIPSet is DELETE .../ipset/{name}: 500 "IPSet '<name>' is not
// empty\n" unless force.
func (fi *fwIPSets) DeleteIPSet(s AliasScope, name string, force bool) error {
	return fi.changeIPSets(s, func(sets map[string]*FirewallIPSet) error {
		set := sets[name]
		if set == nil {
			return Failf("no such IPSet '%s'\n", name)
		}
		if len(set.Entries) > 0 && !force {
			return Failf("IPSet '%s' is not empty\n", name)
		}
		delete(sets, name)
		return nil
	})
}

// IPSetEntry is an add, update or delete of an IP set entry.
type IPSetEntry struct {
	Name, CIDR, Comment, Digest string
	NoMatch                     bool
}

// AddIPSetEntry is POST .../ipset/{name}: an alias reference must resolve
// (500 "no such alias '<x>'\n"), an address is normalized as the parser
// does (/32, /128 dropped); 400 for a duplicate or a zero prefix.
func (fi *fwIPSets) AddIPSetEntry(s AliasScope, e IPSetEntry) error {
	return fi.changeIPSets(s, func(sets map[string]*FirewallIPSet) error {
		set := sets[e.Name]
		if set == nil {
			return Failf("no such IPSet '%s'\n", e.Name)
		}
		cidr := e.CIDR
		if m := fwAliasRefRe.FindStringSubmatch(cidr); m != nil {
			if !fi.aliasResolvesLocked(s, m[2], m[1]) {
				return Failf("no such alias '%s'\n", m[2])
			}
		} else {
			cidr = newAlias("", cidr, "").CIDR
		}
		for _, en := range set.Entries {
			if en.CIDR == cidr {
				return ParamError(map[string]string{"cidr": fmt.Sprintf("address '%s' already exists", cidr)})
			}
		}
		if i := strings.LastIndexByte(cidr, '/'); i >= 0 && strings.Trim(cidr[i+1:], "0") == "" {
			return ParamError(map[string]string{"cidr": "a zero prefix is not allowed in ipset entries"})
		}
		set.Entries = slices.Insert(set.Entries, 0, FirewallIPSetEntry{CIDR: cidr, NoMatch: e.NoMatch, Comment: e.Comment})
		return nil
	})
}

// aliasResolvesLocked is resolve_alias: the guest's alias (unless scope
// is dc/), else the cluster's (unless guest/).
func (fi *fwIPSets) aliasResolvesLocked(s AliasScope, name, scope string) bool {
	st := fi.state()
	key := strings.ToLower(name)
	if s.VMID != 0 && scope != "dc/" && st.fwAliases(s, false)[key] != nil {
		return true
	}
	return scope != "guest/" && st.fwAliases(AliasScope{}, false)[key] != nil
}

// IPSetEntryInfo is GET .../ipset/{name}/{cidr}: the entry with the set's
// digest; 400 {cidr: "no such IP/Network"}.
func (fi *fwIPSets) IPSetEntryInfo(s AliasScope, name, cidr string) (map[string]any, error) {
	list, err := fi.IPSet(s, name)
	if err != nil {
		return nil, err
	}
	for _, e := range list {
		if e["cidr"] == cidr {
			return e, nil
		}
	}
	return nil, ParamError(map[string]string{"cidr": "no such IP/Network"})
}

// UpdateIPSetEntry is PUT .../ipset/{name}/{cidr}: digest checked, then
// the entry's nomatch and comment replaced.
func (fi *fwIPSets) UpdateIPSetEntry(s AliasScope, e IPSetEntry) error {
	return fi.changeIPSets(s, func(sets map[string]*FirewallIPSet) error {
		set := sets[e.Name]
		if set == nil {
			return Failf("no such IPSet '%s'\n", e.Name)
		}
		if _, digest := ipsetEntries(set); e.Digest != "" && e.Digest != digest {
			return Failf("detected modified configuration - file changed by other user? Try again.\n")
		}
		for i := range set.Entries {
			if set.Entries[i].CIDR == e.CIDR {
				set.Entries[i].NoMatch, set.Entries[i].Comment = e.NoMatch, e.Comment
				return nil
			}
		}
		return ParamError(map[string]string{"cidr": "no such IP/Network"})
	})
}

// DeleteIPSetEntry is DELETE .../ipset/{name}/{cidr}: digest checked; an
// entry that is not there is no error.
func (fi *fwIPSets) DeleteIPSetEntry(s AliasScope, name, cidr, digest string) error {
	return fi.changeIPSets(s, func(sets map[string]*FirewallIPSet) error {
		set := sets[name]
		if set == nil {
			return Failf("no such IPSet '%s'\n", name)
		}
		if _, d := ipsetEntries(set); digest != "" && digest != d {
			return Failf("detected modified configuration - file changed by other user? Try again.\n")
		}
		set.Entries = slices.DeleteFunc(set.Entries, func(en FirewallIPSetEntry) bool { return en.CIDR == cidr })
		return nil
	})
}
