package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFmt: --check says whether a manifest is formatted (exit 1, the
// file untouched), fmt rewrites it keeping its mode and comments, and
// then --check passes.
func TestFmt(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "corral.yaml")
	const messy = "# my app\napps:\n-   name: web   # the name\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n"
	const tidy = "# my app\napps:\n  - name: web # the name\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n"
	if err := os.WriteFile(m, []byte(messy), 0o640); err != nil {
		t.Fatal(err)
	}
	r := runCorral(t, "fmt", m, "--check")
	if want := m + " is not formatted: run corral fmt " + m; r.code != ExitError || !strings.Contains(r.stderr, want) {
		t.Errorf("fmt --check: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
	if b, _ := os.ReadFile(m); string(b) != messy {
		t.Fatalf("fmt --check changed the file:\n%s", b)
	}
	// For scripts: the same verdict as a document on stdout.
	r = runCorral(t, "fmt", m, "--check", "-o", "json")
	if want := `{
  "file": "` + m + `",
  "formatted": false,
  "written": false
}
`; r.code != ExitError || r.stdout != want {
		t.Errorf("fmt --check -o json: exit %d, stdout %q; want 1 and %q", r.code, r.stdout, want)
	}
	if r := runCorral(t, "fmt", m); r.code != 0 || r.stdout != "" {
		t.Fatalf("fmt: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(m)
	if string(b) != tidy {
		t.Errorf("fmt wrote:\n%s\nwant:\n%s", b, tidy)
	}
	if fi, _ := os.Stat(m); fi.Mode().Perm() != 0o640 {
		t.Errorf("fmt changed the mode to %v", fi.Mode().Perm())
	}
	if r := runCorral(t, "fmt", m, "--check"); r.code != 0 {
		t.Errorf("fmt --check after fmt: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCorral(t, "validate", "-f", m); r.code != 0 {
		t.Errorf("the formatted manifest does not validate:\n%s", r.stderr)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("fmt left files behind: %v", entries)
	}
}

// TestFmt_refuses: a file fmt cannot read as one YAML document is left
// as it is, with why.
func TestFmt_refuses(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "corral.yaml")
	const two = "apps: []\n---\napps: []\n"
	if err := os.WriteFile(m, []byte(two), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCorral(t, "fmt", m)
	if r.code != ExitError || !strings.Contains(r.stderr, "fmt "+m+": line 2: a second YAML document") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(m); string(b) != two {
		t.Errorf("the file changed:\n%s", b)
	}
	if r := runCorral(t, "fmt", filepath.Join(dir, "missing.yaml")); r.code != ExitError || !strings.Contains(r.stderr, "missing.yaml") {
		t.Errorf("a missing file: exit %d, stderr %q", r.code, r.stderr)
	}
}
