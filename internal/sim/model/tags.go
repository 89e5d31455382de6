package model

import (
	"sort"
	"strings"
)

// Guest tags as PVE stores them. A tag's characters are checked by the
// schema (pve-common's pve-tag format: a letter, digit or '_' first, then
// letters, digits and "_-+."); what the config then holds is decided by
// pve-guest-common PVE::GuestHelpers::get_unique_tags, which update_pct_config
// applies to every "tags" value a create or PUT config writes.

// TagStyle is the part of datacenter.cfg's tag-style property that
// get_unique_tags reads. The zero value is PVE's default, and the only
// style the emulator has (it serves no datacenter options).
type TagStyle struct {
	// CaseSensitive keeps tags as written and compares them exactly;
	// by default they are lower-cased and sorted ignoring case.
	CaseSensitive bool
	// Ordering "config" keeps the order given; anything else sorts.
	Ordering string
}

// UniqueTags is get_unique_tags: the list split as PVE::Tools::split_list
// splits (on ';', ',' and white space), lower-cased unless the style is
// case-sensitive, sorted (stably, ignoring case unless case-sensitive)
// unless the style's ordering is "config", with repeats dropped, joined
// by ';'. "Zeta;alpha;alpha" becomes "alpha;zeta".
func UniqueTags(tags string, style TagStyle) string {
	list := SplitList(tags)
	if style.Ordering != "config" {
		key := strings.ToLower
		if style.CaseSensitive {
			key = func(s string) string { return s }
		}
		sort.SliceStable(list, func(i, j int) bool { return key(list[i]) < key(list[j]) })
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(list))
	for _, t := range list {
		if !style.CaseSensitive {
			t = strings.ToLower(t)
		}
		if seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return strings.Join(out, ";")
}

// SplitList is PVE::Tools::split_list: the items of a NUL-separated
// list, or else of a list separated by ',', ';' and white space.
func SplitList(s string) []string {
	if strings.Contains(s, "\x00") {
		return strings.Split(s, "\x00")
	}
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v'
	})
}
