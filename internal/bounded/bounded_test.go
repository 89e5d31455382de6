package bounded_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/bounded"
)

var limits = bounded.Limits{Size: 1 << 20, Depth: 8, Values: 1000}

func TestJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // "" = passes; else the Limit that fires
		offset   int    // where it fires
	}{
		{"empty", ``, "", 0},
		{"flat object", `{"a":1,"b":[1,2,3],"c":"x"}`, "", 0},
		{"depth at the limit", strings.Repeat("[", 8) + strings.Repeat("]", 8), "", 0},
		{"one level too deep", strings.Repeat("[", 9) + strings.Repeat("]", 9), "depth", 8},
		{"brackets in strings do not count", `{"a":"` + strings.Repeat("[{", 1000) + `"}`, "", 0},
		{"escaped quote keeps the string open", `["\"` + strings.Repeat("[", 100) + `"]`, "", 0},
		{"escaped backslash closes the string", `["\\",` + strings.Repeat("[", 100) + `]`, "depth", 13},
		{"closers cannot buy depth back", strings.Repeat("]", 100) + strings.Repeat("[", 9), "depth", 108},
		{"values at the limit", "[" + strings.Repeat("0,", 998) + "0]", "", 0},
		{"too many values", "[" + strings.Repeat("0,", 1000) + "0]", "values", 2000},
		{"commas in strings do not count", `["` + strings.Repeat(",", 5000) + `"]`, "", 0},
		{"too large", `"` + strings.Repeat("x", 1<<20) + `"`, "size", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := bounded.JSON([]byte(tc.in), limits)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("JSON() = %v, want nil", err)
				}
				return
			}
			var le *bounded.Error
			if !errors.As(err, &le) {
				t.Fatalf("JSON() = %v, want *bounded.Error", err)
			}
			if got, want := le.Limit, tc.want; got != want {
				t.Errorf("Limit = %q, want %q (%v)", got, want, err)
			}
			if got, want := le.Offset, tc.offset; got != want {
				t.Errorf("Offset = %d, want %d", got, want)
			}
		})
	}
}

func TestError_message(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{strings.Repeat("[", 9), "nested more than 8 levels deep at byte 8"},
		{"[" + strings.Repeat("0,", 1001) + "]", "more than 1000 values at byte 2000"},
		{strings.Repeat(" ", 1<<20+1), "more than 1048576 bytes"},
	} {
		if err := bounded.JSON([]byte(tc.in), limits); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("JSON(%.20q…) = %v, want %q", tc.in, err, tc.want)
		}
	}
}
