package manifest_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/corralhq/corral/internal/manifest"
)

// formatCorpus is every manifest in the repository: the examples and the
// test manifests, broken ones included.
func formatCorpus(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, glob := range []string{"../../examples/*/corral.yaml", "testdata/bad/*.yaml", "../cli/testdata/*/*.yaml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 100 {
		t.Fatalf("only %d manifests found", len(files))
	}
	return files
}

// TestFormat_keepsContent: formatting any manifest of the repository keeps
// what it means (the same File, or the same diagnostics but for their
// positions), keeps every comment, and is idempotent.
func TestFormat_keepsContent(t *testing.T) {
	for _, path := range formatCorpus(t) {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out, err := manifest.Format(data)
			if err != nil {
				// Only what is not one YAML document (testdata/bad/yaml-*)
				// may be refused.
				if !strings.HasPrefix(filepath.Base(path), "yaml-") {
					t.Fatalf("Format refused it: %v", err)
				}
				return
			}
			again, err := manifest.Format(out)
			if err != nil || string(again) != string(out) {
				t.Errorf("Format is not idempotent (%v):\n--- once ---\n%s\n--- twice ---\n%s", err, out, again)
			}
			for _, line := range strings.Split(string(data), "\n") {
				if c := strings.TrimSpace(line); strings.HasPrefix(c, "#") && !strings.Contains(string(out), c) {
					t.Errorf("comment %q lost:\n%s", c, out)
				}
			}
			var a, b any
			if yaml.Unmarshal(data, &a) == nil {
				if err := yaml.Unmarshal(out, &b); err != nil || !cmp.Equal(a, b) {
					t.Errorf("YAML values differ (%v): %s", err, cmp.Diff(a, b))
				}
			}
			fa, erra := manifest.Parse(path, data, testOptions())
			fb, errb := manifest.Parse(path, out, testOptions())
			if (erra == nil) != (errb == nil) {
				t.Fatalf("Parse before: %v, after: %v", erra, errb)
			}
			if erra != nil {
				if got, want := withoutPositions(errb.Error()), withoutPositions(erra.Error()); got != want {
					t.Errorf("diagnostics changed:\n%s", cmp.Diff(want, got))
				}
				return
			}
			if diff := cmp.Diff(fa, fb, cmp.AllowUnexported(manifest.File{}), cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().Type() == reflect.TypeOf(manifest.Pos{})
			}, cmp.Ignore())); diff != "" {
				t.Errorf("the manifest changed (-before +after):\n%s", diff)
			}
		})
	}
}

// withoutPositions drops each diagnostic's FILE:LINE:COL.
func withoutPositions(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		parts := strings.SplitN(line, ": ", 2)
		out = append(out, parts[len(parts)-1])
	}
	return strings.Join(out, "\n")
}

func TestFormat(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"already canonical", "apps:\n  - name: a\n    template: t\n", "apps:\n  - name: a\n    template: t\n"},
		{"indentation", "apps:\n-   name: a\n    volumes:\n        -   name: d\n            size: 1G\n",
			"apps:\n  - name: a\n    volumes:\n      - name: d\n        size: 1G\n"},
		{"comments and blank lines kept, end comments aligned",
			"# top\n\napps:\n    # the app\n    - name: a    # its name\n      cores: 2 # two\n\n      memory: 512   # MiB\n",
			"# top\n\napps:\n  # the app\n  - name: a  # its name\n    cores: 2 # two\n\n    memory: 512 # MiB\n"},
		{"styles kept", "apps:\n  - name: 'a'\n    run: |\n      echo \"hi\"\n    tags: [x, y]\n",
			"apps:\n  - name: 'a'\n    run: |\n      echo \"hi\"\n    tags: [x, y]\n"},
		{"anchors kept", "x: &v {size: 1G}\napps:\n  - volumes: [*v]\n", "x: &v {size: 1G}\napps:\n  - volumes: [*v]\n"},
		{"one blank line in a row", "a: 1\n\n\n\nb: 2\n", "a: 1\n\nb: 2\n"},
		{"a comment after a block scalar", "a: >\n  folded\n  text\n# end\n", "a: >\n  folded text\n\n# end\n"},
		{"blank lines in a block scalar are its content", "run: |\n  a\n\n\n  b\nx: 1\n", "run: |\n  a\n\n\n  b\nx: 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := manifest.Format([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Format (-want +got):\n%s", diff)
			}
			if again, err := manifest.Format(got); err != nil || string(again) != string(got) {
				t.Errorf("Format is not idempotent (%v): %q, then %q", err, got, again)
			}
		})
	}
}

func TestFormat_refuses(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "the file is empty"},
		{"two documents", "apps: []\n---\napps: []\n", "a second YAML document: a manifest holds one"},
		{"syntax", "apps: [\n", "invalid YAML: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := manifest.Format([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) || out != nil {
				t.Errorf("Format: %q, %v; want no output and %q", out, err, tt.want)
			}
		})
	}
}
