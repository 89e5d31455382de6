package pve_test

import (
	"encoding/json"
	"testing"

	"github.com/corralhq/corral/internal/pve"
)

func TestBool01(t *testing.T) {
	tests := []struct {
		in   string
		want bool
		ok   bool
	}{
		{`1`, true, true}, {`0`, false, true}, {`"1"`, true, true}, {`"0"`, false, true},
		{`true`, true, true}, {`false`, false, true}, {`"on"`, true, true}, {`"no"`, false, true},
		{`null`, false, true}, {`2`, false, false}, {`"maybe"`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b pve.Bool01
			err := json.Unmarshal([]byte(tt.in), &b)
			if (err == nil) != tt.ok {
				t.Fatalf("Unmarshal(%s) err = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if tt.ok && bool(b) != tt.want {
				t.Errorf("Unmarshal(%s)=%v, want %v", tt.in, b, tt.want)
			}
		})
	}
	out, _ := json.Marshal(struct{ A, B pve.Bool01 }{true, false})
	if got, want := string(out), `{"A":1,"B":0}`; got != want {
		t.Errorf("Marshal=%s, want %s", got, want)
	}
}

func TestIntOrString(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{`1777629600`, 1777629600, true}, {`"1777629600"`, 1777629600, true}, {`null`, 0, true},
		{`""`, 0, true}, {`1e+15`, 1e15, true}, {`"abc"`, 0, false}, {`[]`, 0, false},
		{`1e+19`, 0, false}, {`-1e+19`, 0, false}, {`-1e+15`, -1e15, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var n pve.IntOrString
			err := json.Unmarshal([]byte(tt.in), &n)
			if (err == nil) != tt.ok {
				t.Fatalf("Unmarshal(%s) err = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if tt.ok && int64(n) != tt.want {
				t.Errorf("Unmarshal(%s)=%d, want %d", tt.in, n, tt.want)
			}
		})
	}
}

func TestFloatOrString(t *testing.T) {
	for in, want := range map[string]float64{`"0.00"`: 0, `"1.25"`: 1.25, `0.5`: 0.5, `null`: 0} {
		var f pve.FloatOrString
		if err := json.Unmarshal([]byte(in), &f); err != nil || float64(f) != want {
			t.Errorf("Unmarshal(%s) = %v, %v, want %v", in, f, err, want)
		}
	}
	var f pve.FloatOrString
	if err := json.Unmarshal([]byte(`"high"`), &f); err == nil {
		t.Errorf("Unmarshal(\"high\") succeeded")
	}
}
