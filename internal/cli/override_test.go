package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testutil/secretscan"
)

// writeOverride writes an override file in a directory of its own (not
// the manifest's), as a user keeps one beside the example it changes or
// anywhere else.
func writeOverride(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "local", "offline.override.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOverrideFiles_planApplyStatusDestroy (issue 31): -f BASE -f
// OVERRIDE on every verb works on the merged manifest, as docker
// compose's override files do: the override's memory and password are
// what apply sets, plan and status with both files find nothing to do
// while the base alone differs, a saved plan records both files and is
// refused when the override changes, and destroy takes both. The
// override's secret is never printed.
func TestOverrideFiles_planApplyStatusDestroy(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const pw = "Override-Pa55word-31"
	ownEnv(t, "CORRAL_TEST_OVERRIDE_PW", pw)
	var secrets secretscan.Set
	secrets.Add(t, "override's root password", pw)
	run := func(want int, args ...string) string {
		t.Helper()
		return c.runScanned(t, &secrets, want, args...)
	}
	base := manifestWith(t, "512")
	over := writeOverride(t, "apps:\n  - name: notes\n    memory: 1024\n    password: ${env:CORRAL_TEST_OVERRIDE_PW}\n")
	both := []string{"-f", base, "-f", over}

	if out := run(0, append([]string{"validate"}, both...)...); !strings.Contains(out, base+" with "+over+" is valid: 1 app(s)") {
		t.Errorf("validate names both files? %s", out)
	}
	run(ExitChanges, append([]string{"plan"}, both...)...)
	run(0, append([]string{"apply", "--auto-approve"}, both...)...)
	vmid := c.vmidOf(base, "notes")
	if got := c.config(vmid)["memory"]; got != "1024" {
		t.Errorf("memory %s, want the override's 1024", got)
	}
	run(0, append([]string{"plan"}, both...)...)
	if out := run(ExitChanges, "plan", "-f", base); !strings.Contains(out, "memory") {
		t.Errorf("the base alone should plan the memory back to 512:\n%s", out)
	}
	run(0, append([]string{"status", "--exit-code", "--no-health"}, both...)...)

	// A saved plan records both files, and an edit of the override
	// makes it stale.
	if err := os.WriteFile(over, []byte("apps:\n  - name: notes\n    memory: 2048\n    password: ${env:CORRAL_TEST_OVERRIDE_PW}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "notes.plan")
	run(ExitChanges, append([]string{"plan", "--out", saved}, both...)...)
	var sp savedPlan
	if b, err := os.ReadFile(saved); err != nil || json.Unmarshal(b, &sp) != nil {
		t.Fatalf("read the saved plan: %v", err)
	}
	if sp.Manifest != base || len(sp.Overrides) != 1 || sp.Overrides[0] != over {
		t.Errorf("saved plan records %s and %v, want %s and [%s]", sp.Manifest, sp.Overrides, base, over)
	}
	if err := os.WriteFile(over, []byte("apps:\n  - name: notes\n    memory: 4096\n    password: ${env:CORRAL_TEST_OVERRIDE_PW}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(ExitError, "apply", saved); !strings.Contains(out, over) || !strings.Contains(out, "changed") {
		t.Errorf("apply of the saved plan after the override changed: want a refusal naming it\n%s", out)
	}
	run(ExitChanges, append([]string{"plan", "--out", saved}, both...)...)
	run(0, "apply", saved)
	if got := c.config(vmid)["memory"]; got != "4096" {
		t.Errorf("memory %s after the saved plan, want 4096", got)
	}

	run(0, append([]string{"destroy", "--auto-approve"}, both...)...)
	if st := c.status(base); len(st.Apps) != 1 || len(st.Apps[0].Containers) != 0 {
		t.Errorf("after destroy: %+v", st.Apps)
	}
}

// TestOverrideFiles_problems: a problem in an override file is reported
// at its own file and line; a missing override and an override that
// changes the project are refused with the fix; fmt formats each file
// it is given; the agent, which keeps re-reading one file, refuses
// several.
func TestOverrideFiles_problems(t *testing.T) {
	t.Parallel()
	base := manifestWith(t, "512")
	bad := writeOverride(t, "apps:\n  - name: notes\n    memroy: 1024\n")
	if r := runCorral(t, "validate", "-f", base, "-f", bad); r.code != ExitError || !strings.Contains(r.stderr, bad+":3:5: apps[0].memroy: unknown key; did you mean memory?") {
		t.Errorf("validate with a bad override: exit %d\n%s", r.code, r.stderr)
	}
	gone := filepath.Join(t.TempDir(), "gone.yaml")
	if r := runCorral(t, "validate", "-f", base, "-f", gone); r.code != ExitError || !strings.Contains(r.stderr, "override file "+gone+" not found") {
		t.Errorf("validate with a missing override: exit %d\n%s", r.code, r.stderr)
	}
	other := writeOverride(t, "project: other\n")
	if r := runCorral(t, "validate", "-f", base, "-f", other); r.code != ExitError || !strings.Contains(r.stderr, "an override cannot change the project") {
		t.Errorf("validate with an override that changes the project: exit %d\n%s", r.code, r.stderr)
	}

	messy := writeOverride(t, "apps:\n-   name: notes\n    cores: 2\n")
	if r := runCorral(t, "fmt", "--check", base, messy); r.code != ExitError || !strings.Contains(r.stderr, messy+" is not formatted") || strings.Contains(r.stderr, base+" is not formatted") {
		t.Errorf("fmt --check of both: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCorral(t, "fmt", base, messy); r.code != 0 {
		t.Errorf("fmt of both: exit %d\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(messy); string(b) != "apps:\n  - name: notes\n    cores: 2\n" {
		t.Errorf("fmt wrote the override as %q", b)
	}
	if r := runCorral(t, "fmt", "--check", base, messy); r.code != 0 {
		t.Errorf("fmt --check after fmt: exit %d\n%s", r.code, r.stderr)
	}

	if r := runCorral(t, "agent", "uninstall", "-f", base, "-f", messy); r.code != ExitError || !strings.Contains(r.stderr, "reads one manifest file") {
		t.Errorf("agent uninstall with two files: exit %d\n%s", r.code, r.stderr)
	}
}
