package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEncodeCommented: a value's comments land on the entry their path
// names (a key's head and end of line, a list item's head, the
// document's head apart from it), names YAML would misread are quoted,
// and a path that names nothing is an error, not a comment lost.
func TestEncodeCommented(t *testing.T) {
	type app struct {
		Name string `yaml:"name"`
		Node string `yaml:"node"`
		Size string `yaml:"size"`
	}
	v := struct {
		Apps []app `yaml:"apps"`
	}{Apps: []app{{Name: "web", Node: "no", Size: "1G"}}}
	tests := []struct {
		name     string
		comments []Comment
		want     string
		err      string
	}{
		{"none", nil, "apps:\n  - name: web\n    node: \"no\"\n    size: 1G\n", ""},
		{"every place", []Comment{
			{Head: "top\n\nmore"},
			{Path: "apps", Line: "the apps"},
			{Path: "apps.0", Head: "an app"},
			{Path: "apps.0.node", Line: "pinned"},
			{Path: "apps.0.size", Head: "two\nlines"},
		}, "# top\n#\n# more\n\napps: # the apps\n  # an app\n  - name: web\n    node: \"no\" # pinned\n    # two\n    # lines\n    size: 1G\n", ""},
		{"no such key", []Comment{{Path: "apps.0.memory", Line: "x"}}, "", "no entry apps.0.memory"},
		{"no such item", []Comment{{Path: "apps.1", Head: "x"}}, "", "no entry apps.1"},
		{"into a scalar", []Comment{{Path: "apps.0.name.x", Head: "x"}}, "", "no entry apps.0.name.x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeCommented(v, tt.comments)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b, tt.want)
			}
			if _, err := Format(b); err != nil {
				t.Errorf("Format: %v", err)
			}
		})
	}
}

// TestWriteNew: a new file is written; an existing one is left as it is
// and the error says it exists.
func TestWriteNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corral.yaml")
	if err := WriteNew(path, []byte("apps: []\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteNew(path, []byte("other\n")); !errors.Is(err, os.ErrExist) {
		t.Errorf("second WriteNew: %v, want os.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "apps: []\n" {
		t.Errorf("the existing file now holds %q", b)
	}
}
