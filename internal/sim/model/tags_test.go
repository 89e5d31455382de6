package model

import "testing"

func TestUniqueTags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		style TagStyle
		want  string
	}{
		{"Zeta;alpha;alpha", TagStyle{}, "alpha;zeta"},
		{"b,A c;a", TagStyle{}, "a;b;c"},
		{"  web ;; db\tprod ", TagStyle{}, "db;prod;web"},
		{"", TagStyle{}, ""},
		{"b;B;a", TagStyle{CaseSensitive: true}, "B;a;b"},
		{"Zeta;alpha;ALPHA;zeta", TagStyle{Ordering: "config"}, "zeta;alpha"},
		{"Zeta;alpha;Zeta", TagStyle{Ordering: "config", CaseSensitive: true}, "Zeta;alpha"},
		{"x\x00y;z", TagStyle{}, "x;y;z"},
	} {
		if got := UniqueTags(tc.in, tc.style); got != tc.want {
			t.Errorf("UniqueTags(%q, %+v) = %q, want %q", tc.in, tc.style, got, tc.want)
		}
	}
}
