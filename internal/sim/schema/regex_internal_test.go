package schema

import "testing"

func TestPerlToRE2(t *testing.T) {
	tests := []struct {
		perl string
		want string
	}{
		{`^abc$`, `^abc(?:\n?\z)`},
		{`(?^:[a-z]+)`, `(?-is:[a-z]+)`},
		{`(?^i:[a-z]+)`, `(?i-s:[a-z]+)`},
		{`(?>[+-]?\w+,?)+`, `(?:[+-]?\w+,?)+`},
		{`[A-Za-z0-9\-_\s]{,16}`, `[A-Za-z0-9\-_\s]{0,16}`},
		{`\w+=[^\x00-\x08]*(?:\0\w+)*`, `\w+=[^\x00-\x08]*(?:\x{0}\w+)*`},
		{`[$^]x{2,}y{3}`, `[$^]x{2,}y{3}`},
		{`[0-9a-zA-Z!=]{0,4096}`, `[0-9a-zA-Z!=]{0,}`},
		{`a{b}`, `a\{b}`},
		{`[]a]`, `[]a]`},
		{`[[:alnum:]\-.]+`, `[[:alnum:]\-.]+`},
	}
	for _, tt := range tests {
		got, err := perlToRE2(tt.perl)
		if err != nil {
			t.Errorf("perlToRE2(%q): %v", tt.perl, err)
			continue
		}
		if got != tt.want {
			t.Errorf("perlToRE2(%q)=%q, want %q", tt.perl, got, tt.want)
		}
	}
	for _, bad := range []string{`(a)\1`, `(?^x:a)`, `[abc`, `a\`} {
		if got, err := perlToRE2(bad); err == nil {
			t.Errorf("perlToRE2(%q)=%q, want an error", bad, got)
		}
	}
}

// TestSchemaPattern checks the match semantics of m/^$pattern$/.
func TestSchemaPattern(t *testing.T) {
	tests := []struct {
		pattern string
		value   string
		match   bool
	}{
		{`[-_.\w\d]+`, "vmbr0", true},
		{`[-_.\w\d]+`, "vmbr 0", false},
		// Perl's $ also matches before a final newline.
		{`[-_.\w\d]+`, "vmbr0\n", true},
		{`[-_.\w\d]+`, "vmbr0\n\n", false},
		// The pattern is interpolated without a group: alternation binds
		// the anchors to its ends only, as in PVE.
		{`/dev/parport\d+|/dev/usb/lp\d+`, "/dev/parport0-trailing", true},
		{`(/dev/.+|socket)`, "socket2", false},
		{`(?^i:[a-z0-9_][a-z0-9_\-\+\.]*)(?:;(?^i:[a-z0-9_][a-z0-9_\-\+\.]*))*`, "Web;API", true},
		{`(?^:(?:\w+=[^\x00-\x08\x10-\x1F\x7F]*)(?:\0\w+=[^\x00-\x08\x10-\x1F\x7F]*)*)`, "A=1\x00B=2", true},
		{`(?^:(?:\w+=[^\x00-\x08\x10-\x1F\x7F]*)(?:\0\w+=[^\x00-\x08\x10-\x1F\x7F]*)*)`, "A=1\x01", false},
		{`(?^:^((?>[+-]?[\w\-\._=]+,?)+)$)`, "+a=1,-b", true},
		{`[A-Za-z0-9\-_\s]{,8}`, "abc", true},
		{`[A-Za-z0-9\-_\s]{,8}`, "abcdefghi", false},
	}
	for _, tt := range tests {
		re, err := schemaPattern(tt.pattern)
		if err != nil {
			t.Errorf("schemaPattern(%q): %v", tt.pattern, err)
			continue
		}
		if got := re.MatchString(tt.value); got != tt.match {
			t.Errorf("pattern %q on %q: match=%v, want %v", tt.pattern, tt.value, got, tt.match)
		}
	}
}
