package manifest_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/testenv"
)

// TestParse_bad parses every testdata/bad/*.yaml and compares the full
// diagnostic text with the .txt beside it (go test -update rewrites them).
func TestParse_bad(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("only %d broken manifests in testdata/bad", len(files))
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := manifest.Parse(path, data, testOptions())
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", f)
			}
			var diags *manifest.Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("error is %T, want *manifest.Diagnostics: %v", err, err)
			}
			for _, d := range diags.Items {
				if d.Pos.File != path || d.Pos.Line == 0 {
					t.Errorf("diagnostic without a position in the file: %+v", d)
				}
			}
			for _, s := range secretValues {
				if strings.Contains(err.Error(), s) {
					t.Errorf("diagnostics leak the secret %q:\n%s", s, err)
				}
			}
			testenv.Golden(t, strings.TrimSuffix(path, ".yaml")+".txt", []byte(err.Error()+"\n"))
		})
	}
}

func TestLoad_missingFile(t *testing.T) {
	_, err := manifest.Load(filepath.Join(t.TempDir(), "corral.yaml"), manifest.LoadOptions{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v, want os.ErrNotExist", err)
	}
	if got, want := err.Error(), "read manifest: stat "; !strings.HasPrefix(got, want) {
		t.Errorf("error %q, want prefix %q", got, want)
	}
}

// TestParse_aliasBudget: YAML aliases cannot make Parse walk an unbounded
// tree; past the budget it stops with one diagnostic.
func TestParse_aliasBudget(t *testing.T) {
	t.Parallel() // measures no allocation: it may overlap the other parallel tests
	var b strings.Builder
	b.WriteString("apps:\n  - name: a\n    template: a.tar.gz\n    volumes: &v\n")
	for i := range 250 { // under the 256 volumes an app may have
		fmt.Fprintf(&b, "      - {name: v%d, size: 1G, mount: /v%d}\n", i, i)
	}
	for i := range 200 {
		fmt.Fprintf(&b, "  - {name: a%d, template: a.tar.gz, volumes: *v}\n", i)
	}
	_, err := manifest.Parse("bomb.yaml", []byte(b.String()), testOptions())
	var diags *manifest.Diagnostics
	if !errors.As(err, &diags) {
		t.Fatalf("Parse: %v, want *Diagnostics", err)
	}
	if got, want := err.Error(), "the manifest holds more than 100000 values; are YAML aliases nested too deeply?"; len(diags.Items) != 1 || !strings.Contains(got, want) {
		t.Errorf("got %d diagnostics:\n%s\nwant one saying %q", len(diags.Items), got, want)
	}
}

// TestParse_yamlErrorPosition: YAML syntax errors name the line and
// column of the problem itself, whatever line yaml.v3's message names.
func TestParse_yamlErrorPosition(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"tab on line 3 after a scalar on line 2", "apps:\n  - name: a\n\ttemplate: x\n",
			"m.yaml:3:1: invalid YAML: found a tab character that violates indentation"},
		{"tab after spaces on line 4", "apps:\n  - name: a\n    template: x\n  \tmemory: 1G\n",
			"m.yaml:4:3: invalid YAML: found a tab character that violates indentation"},
		{"tab on line 2 after a scalar on line 1", "a: 1\n\tb: 2\n",
			"m.yaml:2:1: invalid YAML: found a tab character that violates indentation"},
		{"tab opening the file", "\tapps: []\n",
			"m.yaml:1:1: invalid YAML: found character that cannot start any token"},
		{"tab opening a line in a block", "apps:\n  - name: a\n\n\t- name: b\n",
			"m.yaml:4:1: invalid YAML: found a tab character that violates indentation"},
		{"a character that is not a tab", "apps:\n  - name: @a\n",
			"m.yaml:2:11: invalid YAML: found character that cannot start any token"},
		{"a parser error names the problem, not the block's line", "apps:\n  - name: a\n   template: x\n",
			"m.yaml:3:4: invalid YAML: did not find expected '-' indicator"},
		{"an unterminated quote names the opening quote", "apps:\n  - name: \"a\n",
			"m.yaml:2:11: invalid YAML: found unexpected end of stream"},
		{"an unclosed flow mapping", "apps:\n  - {name: a\n  - name: b\n",
			"m.yaml:3:3: invalid YAML: did not find expected ',' or '}'"},
		{"an unknown anchor", "apps:\n  - name: a\n    tags: *common\n",
			"m.yaml:3:11: invalid YAML: unknown anchor 'common' referenced"},
		{"a mapping value in a plain scalar", "apps:\n  - name: a: b\n",
			"m.yaml:2:11: invalid YAML: mapping values are not allowed in this context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.Parse("m.yaml", []byte(tc.yaml), testOptions())
			if err == nil || err.Error() != tc.want {
				t.Errorf("Parse: %v\nwant %s", err, tc.want)
			}
		})
	}
}
