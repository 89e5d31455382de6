package schema

import (
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Small pieces of Perl semantics that PVE's validation code relies on.

var (
	reIsNumber  = mustPerl(`^[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?$`)
	reIsInteger = mustPerl(`^[+-]?\d+$`)
)

// isNumber is JSONSchema.pm's is_number.
func isNumber(s string) bool { return reIsNumber.MatchString(s) }

// isInteger is JSONSchema.pm's is_integer.
func isInteger(s string) bool { return reIsInteger.MatchString(s) }

// perlTruthy is Perl's truth of a string: false for "" and "0".
func perlTruthy(s string) bool { return s != "" && s != "0" }

// perlLength is Perl's length() of a decoded string: characters.
func perlLength(s string) int { return utf8.RuneCountInString(s) }

// perlNumCmp compares two strings that pass isNumber the way Perl's
// numeric operators do: exactly when both are integers, else as doubles.
func perlNumCmp(a, b string) int {
	a, b = strings.TrimSuffix(a, "\n"), strings.TrimSuffix(b, "\n")
	if isInteger(a) && isInteger(b) {
		x, okx := new(big.Int).SetString(strings.TrimPrefix(a, "+"), 10)
		y, oky := new(big.Int).SetString(strings.TrimPrefix(b, "+"), 10)
		if okx && oky {
			return x.Cmp(y)
		}
	}
	x, _ := strconv.ParseFloat(a, 64)
	y, _ := strconv.ParseFloat(b, 64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// perlSplit is Perl's split on a literal separator: trailing empty fields
// are dropped, and an empty string gives no fields.
func perlSplit(s, sep string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, sep)
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// isPerlSpace is Perl's \s.
func isPerlSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\f', '\v':
		return true
	}
	return false
}

// splitList is PVE::Tools::split_list, how "-list" formats are split:
// on NUL if the text has one, else on runs of commas, semicolons and
// whitespace. "0" counts as empty, as in the Perl (shift || ”).
func splitList(s string) []string {
	if !perlTruthy(s) {
		return nil
	}
	if strings.Contains(s, "\x00") {
		return perlSplit(s, "\x00")
	}
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || isPerlSpace(r) })
}

// splitFormatName splits a format name the way check_format does,
// m/^(.*?)(?:-(list|opt))?$/: "pve-configid-list" is the "pve-configid"
// format applied to every list element.
func splitFormatName(format string) (name, kind string) {
	if n, ok := strings.CutSuffix(format, "-list"); ok && n != "" {
		return n, "list"
	}
	if n, ok := strings.CutSuffix(format, "-opt"); ok && n != "" {
		return n, "opt"
	}
	return format, ""
}
