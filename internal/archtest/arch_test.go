package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/corralhq/corral"

type pkg struct {
	ImportPath string
	Doc        string
	Deps       []string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportRules enforces style.md §1: sim never imports pve and pve
// never imports sim (a wrong wire type would look right to both), and
// the planner stays pure.
func TestImportRules(t *testing.T) {
	rules := []struct {
		from      string
		forbidden []string
	}{
		{module + "/internal/sim", []string{module + "/internal/pve", module + "/internal/apply", module + "/internal/plan", module + "/internal/manifest"}},
		{module + "/internal/pve", []string{module + "/internal/sim"}},
		{module + "/internal/plan", []string{"net/http", "os/exec", module + "/internal/pve", module + "/internal/sim", module + "/internal/apply"}},
		{module + "/internal/manifest", []string{"net/http", module + "/internal/pve", module + "/internal/sim"}},
	}
	for _, p := range listPackages(t) {
		for _, r := range rules {
			if p.ImportPath != r.from && !strings.HasPrefix(p.ImportPath, r.from+"/") {
				continue
			}
			for _, dep := range p.Deps {
				for _, bad := range r.forbidden {
					if dep == bad || strings.HasPrefix(dep, bad+"/") {
						t.Errorf("%s depends on %s (forbidden for %s)", p.ImportPath, dep, r.from)
					}
				}
			}
		}
	}
}

// TestPackageDocs requires a package doc comment everywhere.
func TestPackageDocs(t *testing.T) {
	for _, p := range listPackages(t) {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s has no package doc comment", p.ImportPath)
		}
	}
}
