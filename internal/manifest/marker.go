package manifest

import (
	"strings"
	"unicode"
)

// corral keeps its own records in PVE itself, as lines of a container's
// description that start with "corral-" (the app name, the pinned SSH host
// key, the provisioning digest, the keeper's volume records). The user's
// description shares that text, so user text must never be able to hold
// a line corral would read as its own. Both sides use the two functions
// below: plan's marker parser splits and normalizes with them, and the
// manifest check refuses any description line that, normalized the same
// way, starts with "corral-" in any case. Whatever the parser can see as
// a marker, the check has refused first (FuzzMarkerLine holds both to it).

// MarkerPrefix starts every line corral reads back from a description.
const MarkerPrefix = "corral-"

// DescriptionLines splits a description into lines at every character
// anything on the way might treat as a line break: \n, \r, \v, \f, NEL
// (U+0085), and the Unicode line and paragraph separators.
func DescriptionLines(desc string) []string {
	return strings.FieldsFunc(desc, isLineBreak)
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// MarkerLine is a description line as the marker parser reads it: with
// leading and trailing white space of any kind (Unicode spaces such as
// U+00A0 included) and invisible format characters (zero-width spaces and
// joiners, the byte-order mark, bidi controls, soft hyphens) removed, as
// well as bytes that are not UTF-8.
func MarkerLine(line string) string {
	return strings.TrimFunc(line, invisible)
}

func invisible(r rune) bool {
	return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zs, r) ||
		r == unicode.ReplacementChar || unicode.IsControl(r)
}

// ReservedLine reports whether a description line would be read as one of
// corral's own: after MarkerLine, it starts with MarkerPrefix in any case.
func ReservedLine(line string) bool {
	l := MarkerLine(line)
	return len(l) >= len(MarkerPrefix) && strings.EqualFold(l[:len(MarkerPrefix)], MarkerPrefix)
}

// DescriptionProblem refuses user text holding a line corral would read as
// its own record: the problem, or "" when s may be a description.
func DescriptionProblem(s string) string {
	for _, line := range DescriptionLines(s) {
		if ReservedLine(line) {
			return "a line starts with corral-, which is reserved for corral's own lines"
		}
	}
	return ""
}
