package model

import (
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"

	"github.com/corralhq/corral/internal/lazyre"
)

// Firewall IP sets (pve-firewall API2/Firewall/IPSet.pm): named lists of
// addresses, networks or aliases, the cluster's and each guest's. The
// config file lower-cases a set's name when it is read back and writes
// its entries sorted by CIDR, so that is how they are kept; the API looks
// a set up by the name as given.

// fwIPSets answers for the IP sets, the cluster's and the guests'.
type fwIPSets struct{ fwParts }

// FirewallIPSet is one [IPSET name] section.
type FirewallIPSet struct {
	Comment string               `json:"comment,omitempty"`
	Entries []FirewallIPSetEntry `json:"entries,omitempty"`
}

// FirewallIPSetEntry is one line of an IP set.
type FirewallIPSetEntry struct {
	CIDR    string `json:"cidr"`
	NoMatch bool   `json:"nomatch,omitempty"`
	Comment string `json:"comment,omitempty"`
}

// fwAliasRefRe is an alias reference in an IP set: [dc/|guest/]name.
var fwAliasRefRe = lazyre.New(`^(dc/|guest/)?([A-Za-z][A-Za-z0-9\-_]+)$`)

// listDigest is copy_list_with_digest over entries already reduced to
// their defined keys: SHA-1 of "key:value\n" per entry in key order, the
// digest then added to each.
func listDigest(entries []map[string]any) string {
	h := sha1.New()
	for _, e := range entries {
		for _, k := range slices.Sorted(maps.Keys(e)) {
			h.Write([]byte(k + ":" + fmtValue(e[k]) + "\n"))
		}
	}
	d := hex.EncodeToString(h.Sum(nil))
	for _, e := range entries {
		e["digest"] = d
	}
	return d
}

func fmtValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	}
	return ""
}

// ipsetList is get_ipset_list: each set's name and comment, by name.
func ipsetList(sets map[string]*FirewallIPSet) ([]map[string]any, string) {
	out := []map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(sets)) {
		e := map[string]any{"name": name}
		if cm := sets[name].Comment; cm != "" {
			e["comment"] = cm
		}
		out = append(out, e)
	}
	return out, listDigest(out)
}

// ipsetEntries is an IP set's content with its digest.
func ipsetEntries(set *FirewallIPSet) ([]map[string]any, string) {
	out := []map[string]any{}
	for _, en := range set.Entries {
		e := map[string]any{"cidr": en.CIDR}
		if en.Comment != "" {
			e["comment"] = en.Comment
		}
		if en.NoMatch {
			e["nomatch"] = 1
		}
		out = append(out, e)
	}
	return out, listDigest(out)
}

// IPSets is GET .../ipset: the sets with the list's digest.
func (fi *fwIPSets) IPSets(s AliasScope) ([]map[string]any, error) {
	fi.stateMu.RLock()
	defer fi.stateMu.RUnlock()
	if err := fi.scopeLocked(s); err != nil {
		return nil, err
	}
	list, _ := ipsetList(fi.state().fwIPSets(s, false))
	return list, nil
}

// IPSet is GET .../ipset/{name}: the set's entries; 500 "no such IPSet
// '<name>'\n".
func (fi *fwIPSets) IPSet(s AliasScope, name string) ([]map[string]any, error) {
	fi.stateMu.RLock()
	defer fi.stateMu.RUnlock()
	if err := fi.scopeLocked(s); err != nil {
		return nil, err
	}
	set := fi.state().fwIPSets(s, false)[name]
	if set == nil {
		return nil, Failf("no such IPSet '%s'\n", name)
	}
	list, _ := ipsetEntries(set)
	return list, nil
}
