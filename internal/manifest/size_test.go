package manifest_test

import (
	"encoding/json"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    manifest.Size
		wantErr string
	}{
		{"512M", 512 * manifest.MiB, ""},
		{"10G", 10 * manifest.GiB, ""},
		{"10GiB", 10 * manifest.GiB, ""},
		{"1.5G", 1536 * manifest.MiB, ""},
		{"0.5G", 512 * manifest.MiB, ""},
		{"2T", 2 * manifest.TiB, ""},
		{"1024T", 1024 * manifest.TiB, ""},
		{"1025T", 0, "must be at most 1024T"},
		{"0.1G", 0, "must be a whole number of MiB"},
		{"0M", 0, "must be more than 0"},
		{"10", 0, "not a size"},
		{"10K", 0, "not a size"},
		{"10g", 0, "not a size"},
		{"10GB", 0, "not a size"},
		{"-1G", 0, "not a size"},
		{".5G", 0, "not a size"},
		{"", 0, "not a size"},
		{"99999999999999999999999T", 0, "must be at most 1024T"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := manifest.ParseSize(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseSize(%q) error %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSize(%q)=%d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestSize_String(t *testing.T) {
	tests := []struct {
		s    manifest.Size
		want string
		gib  float64
	}{
		{8 * manifest.GiB, "8G", 8},
		{512 * manifest.MiB, "512M", 0.5},
		{1536 * manifest.MiB, "1536M", 1.5},
		{manifest.TiB, "1T", 1024},
		{1000, "1000", 1000.0 / (1 << 30)},
		{0, "0", 0},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Size(%d).String()=%q, want %q", tt.s, got, tt.want)
		}
		if got := tt.s.GiB(); got != tt.gib {
			t.Errorf("Size(%d).GiB()=%v, want %v", tt.s, got, tt.gib)
		}
	}
	if got, want := (3 * manifest.GiB).MiB(), int64(3072); got != want {
		t.Errorf("MiB()=%d, want %d", got, want)
	}
	if got, want := (3 * manifest.GiB).Bytes(), int64(3<<30); got != want {
		t.Errorf("Bytes()=%d, want %d", got, want)
	}
	j, _ := json.Marshal(struct{ S manifest.Size }{10 * manifest.GiB})
	if got, want := string(j), `{"S":"10G"}`; got != want {
		t.Errorf("json %s, want %s", got, want)
	}
}

// TestSize_roundTrip: every size String prints parses back to itself.
func TestSize_roundTrip(t *testing.T) {
	for _, s := range []manifest.Size{manifest.MiB, 1536 * manifest.MiB, 20 * manifest.GiB, 3 * manifest.TiB} {
		got, err := manifest.ParseSize(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSize(%q)=%v, %v; want %v", s.String(), got, err, s)
		}
	}
}
