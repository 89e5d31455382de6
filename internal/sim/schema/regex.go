package schema

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/corralhq/corral/internal/lazyre"
)

// PVE's schemas and verifiers use Perl regular expressions; Go's regexp is
// RE2. perlToRE2 rewrites the Perl constructs the schemas use so the
// match result is the same:
//
//   - "$" (outside a class) matches at the end or before a final newline
//     in Perl; it becomes (?:\n?\z). \Z likewise.
//   - "(?^flags:" (a stringified qr//) becomes "(?flags-others:".
//   - "(?>" (atomic group) becomes "(?:"; for the anchored, greedy
//     patterns in the schemas this matches the same strings.
//   - "{,n}" (Perl ≥ 5.34: zero to n) becomes "{0,n}".
//   - "\0" (NUL, or an octal escape) becomes \x{..}.
//   - bounded repeats above RE2's limit of 1000 lose their upper bound
//     (only qemu's 4096-character fields have them).
//
// Perl's \d, \w and \s follow Unicode for decoded strings; RE2's are
// ASCII. No schema value the emulator serves depends on the difference.
func perlToRE2(src string) (string, error) {
	var b strings.Builder
	inClass := false
	classStart := 0 // b.Len() just after the '[' (and '^') of the class
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\':
			out, last, err := perlEscape(src, i, inClass)
			if err != nil {
				return "", err
			}
			b.WriteString(out)
			i = last
		case inClass:
			if c == ']' && b.Len() > classStart {
				inClass = false
			}
			if c == '[' && strings.HasPrefix(src[i:], "[:") {
				end := strings.Index(src[i+2:], ":]")
				if end >= 0 {
					b.WriteString(src[i : i+2+end+2])
					i += 2 + end + 1
					continue
				}
			}
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
			if i+1 < len(src) && src[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			classStart = b.Len()
			// A ']' right after '[' or '[^' is a literal in both dialects.
		case c == '$':
			b.WriteString(`(?:\n?\z)`)
		case c == '(' && strings.HasPrefix(src[i:], "(?^"):
			out, last, err := perlFlagGroup(src[i:])
			if err != nil {
				return "", err
			}
			b.WriteString(out)
			i += last
		case c == '(' && strings.HasPrefix(src[i:], "(?>"):
			b.WriteString("(?:")
			i += 2
		case c == '{':
			out, last, err := perlRepeat(src[i:])
			if err != nil {
				return "", err
			}
			b.WriteString(out)
			i += last
		default:
			b.WriteByte(c)
		}
	}
	if inClass {
		return "", fmt.Errorf("unterminated character class")
	}
	return b.String(), nil
}

// perlEscape rewrites the escape at src[i] ('\\'): an octal \0 as \x{..},
// \Z as $ is, a backreference refused, anything else kept. last is the
// index of the escape's last byte.
func perlEscape(src string, i int, inClass bool) (out string, last int, err error) {
	if i+1 >= len(src) {
		return "", 0, fmt.Errorf("trailing backslash")
	}
	n := src[i+1]
	switch {
	case n == '0':
		j := i + 2
		for j < len(src) && j < i+4 && src[j] >= '0' && src[j] <= '7' {
			j++
		}
		v, _ := strconv.ParseUint(src[i+1:j], 8, 8)
		return fmt.Sprintf(`\x{%x}`, v), j - 1, nil
	case n == 'Z' && !inClass:
		return `(?:\n?\z)`, i + 1, nil
	case n >= '1' && n <= '9' && !inClass:
		return "", 0, fmt.Errorf("backreference \\%c not supported", n)
	}
	return src[i : i+2], i + 1, nil
}

// perlFlagGroup rewrites the "(?^flags:" that s starts with as
// "(?flags-others:"; last is the index of its ':'.
func perlFlagGroup(s string) (out string, last int, err error) {
	j := strings.IndexByte(s, ':')
	if j < 0 {
		return "", 0, fmt.Errorf("unterminated (?^ group")
	}
	flags := s[3:j]
	set, clear := "", ""
	for _, f := range "is" {
		if strings.ContainsRune(flags, f) {
			set += string(f)
		} else {
			clear += string(f)
		}
	}
	if strings.Trim(flags, "is") != "" {
		return "", 0, fmt.Errorf("unsupported regex flags %q", flags)
	}
	if clear == "" {
		return "(?" + set + ":", j, nil
	}
	return "(?" + set + "-" + clear + ":", j, nil
}

// perlRepeat rewrites the '{' that s starts with: a quantifier in RE2's
// form ({,n} as {0,n}, an upper bound above RE2's limit dropped), a brace
// that quantifies nothing as the literal it is in Perl. last is the index
// of the quantifier's '}' (0 for a literal brace).
func perlRepeat(s string) (out string, last int, err error) {
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return "{", 0, nil
	}
	body := s[1:end]
	lo, hi, isRange := strings.Cut(body, ",")
	if !isQuantNum(lo, true) || (isRange && !isQuantNum(hi, true)) || (!isRange && lo == "") {
		return `\{`, 0, nil // not a quantifier: a literal brace in Perl
	}
	if lo == "" {
		lo = "0"
	}
	if n, _ := strconv.Atoi(lo); n > 1000 {
		return "", 0, fmt.Errorf("repeat count %s above RE2 limit", lo)
	}
	switch {
	case !isRange:
		return "{" + lo + "}", end, nil
	case hi == "":
		return "{" + lo + ",}", end, nil
	}
	if n, _ := strconv.Atoi(hi); n > 1000 {
		return "{" + lo + ",}", end, nil
	}
	return "{" + lo + "," + hi + "}", end, nil
}

func isQuantNum(s string, emptyOK bool) bool {
	if s == "" {
		return emptyOK
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var perlCache sync.Map // Perl source -> *regexp.Regexp

// compilePerl compiles a Perl regular expression, cached.
func compilePerl(src string) (*regexp.Regexp, error) {
	if re, ok := perlCache.Load(src); ok {
		return re.(*regexp.Regexp), nil
	}
	conv, err := perlToRE2(src)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", src, err)
	}
	re, err := regexp.Compile(conv)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", src, err)
	}
	perlCache.Store(src, re)
	return re, nil
}

// mustPerl is a Perl regular expression written in this package. It is
// converted and compiled at its first use, not at init: the guest helper
// re-executes the binary for every guest command, and each of those
// processes would otherwise convert and compile all of them first
// (lazyre). A bad one panics at its first use, and the cli tests'
// lazyre.CompileAll finds it sooner.
func mustPerl(src string) *lazyre.Regexp {
	return lazyre.NewFunc(src, compilePerl)
}

// schemaPattern compiles a schema pattern the way check_prop applies it:
// m/^$pattern$/, the pattern interpolated without a group of its own.
func schemaPattern(pattern string) (*regexp.Regexp, error) {
	return compilePerl("^" + pattern + "$")
}
