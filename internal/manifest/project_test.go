package manifest_test

import (
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

const oneApp = "apps:\n  - name: web\n    template: debian-12-standard_12.12-1_amd64.tar.zst\n"

// TestProject checks the project a manifest gets: written, or named after
// its directory the way a PVE tag allows.
func TestProject(t *testing.T) {
	tests := []struct {
		name, file, text, want string
	}{
		{"written", "/srv/x/corral.yaml", "project: shop_2\n" + oneApp, "shop_2"},
		{"directory", "/srv/shop/corral.yaml", oneApp, "shop"},
		{"directory lower-cased", "/srv/My Shop.v2/corral.yaml", oneApp, "my-shop-v2"},
		{"directory trimmed", "/srv/--Äpps--/corral.yaml", oneApp, "pps"},
		{"nothing left", "/srv/+++/corral.yaml", oneApp, "default"},
		{"long directory", "/srv/" + "abcdefghij-abcdefghij-abcdefghij-abcdefghij-xyz" + "/corral.yaml", oneApp, "abcdefghij-abcdefghij-abcdefghij-abcdefg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := manifest.Parse(tt.file, []byte(tt.text), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			if f.Project != tt.want {
				t.Errorf("Project = %q, want %q", f.Project, tt.want)
			}
		})
	}
}

func TestDefaultProject_relative(t *testing.T) {
	t.Chdir(t.TempDir())
	abs, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := manifest.DefaultProject("."), manifest.DefaultProject(abs); got != want || got == "" || got == "." {
		t.Errorf("DefaultProject(\".\") = %q, want %q (the working directory's name)", got, want)
	}
}
