package model

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "4096", want: 4096},
		{in: "8G", want: 8 << 30},
		{in: "8GiB", want: 8 << 30},
		{in: "1.5T", want: 3 << 39},
		{in: "10K", want: 10 << 10},
		{in: "9223372036854774784", want: 9223372036854774784}, // the largest float64 below 2^63
		{in: "8388607T", want: 8388607 << 40},
		// Past int64: an error, not a wrapped (negative) size.
		{in: "10000000000000000000", wantErr: true},
		{in: "9223372036854775807", wantErr: true}, // rounds to 2^63 as a float64
		{in: "8388608T", wantErr: true},
		{in: "99999999999999999999G", wantErr: true},
		{in: "Inf", wantErr: true},
		{in: "NaN", wantErr: true},
		{in: "", wantErr: true},
		{in: "G", wantErr: true},
		{in: "8X", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tt.in, got)
			} else if !strings.Contains(err.Error(), tt.in) {
				t.Errorf("ParseSize(%q): error %q does not name the input", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}
