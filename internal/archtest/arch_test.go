package archtest

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/corralhq/corral"

type pkg struct {
	ImportPath string
	Dir        string
	Doc        string
	GoFiles    []string
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
// never imports sim (a wrong wire type would look right to both), the
// planner stays pure, and hostcheck and testenv import nothing of
// corral's.
func TestImportRules(t *testing.T) {
	rules := []struct {
		from      string
		forbidden []string
	}{
		{module + "/internal/sim", []string{module + "/internal/pve", module + "/internal/apply", module + "/internal/plan", module + "/internal/manifest"}},
		{module + "/internal/pve", []string{module + "/internal/sim"}},
		{module + "/internal/plan", []string{"net/http", "os/exec", module + "/internal/pve", module + "/internal/sim", module + "/internal/apply"}},
		{module + "/internal/manifest", []string{"net/http", module + "/internal/pve", module + "/internal/sim"}},
		// The servers' Host check is shared by the agent and the
		// emulator: a leaf, so neither reaches the other through it.
		{module + "/internal/hostcheck", []string{module + "/internal"}},
		// The test environment layer is imported by every package's
		// tests, internal/sim's and its model's included: a leaf of the
		// standard library, without net/http (the model speaks none).
		{module + "/internal/testenv", []string{module + "/internal", "net/http"}},
		// Lazily compiled regular expressions, used everywhere the
		// shared leaves and the model included: a leaf of the standard
		// library, without net/http.
		{module + "/internal/lazyre", []string{module + "/internal", "net/http"}},
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

// sharedLeaves are the packages of PVE's own rules that the client side
// (pve, plan) and the emulator's model share, so that one implementation
// serves both: each imports nothing of corral's (checked below), so the
// import graph stays a tree and neither side reaches the other through
// them.
var sharedLeaves = []string{module + "/internal/pvesize", module + "/internal/pvefw"}

// utilityLeaves are packages of the standard library's kind that any
// package may import, the shared leaves and the model included: each
// imports nothing of corral's (TestImportRules), so it joins no two
// sides.
var utilityLeaves = []string{module + "/internal/lazyre"}

// TestSharedLeaves: a shared leaf depends on no package of corral's and
// speaks no HTTP.
func TestSharedLeaves(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		if !slices.Contains(sharedLeaves, p.ImportPath) {
			continue
		}
		seen[p.ImportPath] = true
		for _, dep := range p.Deps {
			if strings.HasPrefix(dep, module+"/") && !strings.HasPrefix(dep, module+"/internal/testutil") && !slices.Contains(utilityLeaves, dep) {
				t.Errorf("%s depends on %s: a package the client and the emulator share must be a leaf", p.ImportPath, dep)
			}
			if dep == "net/http" {
				t.Errorf("%s depends on net/http: the model imports it, and the model speaks no HTTP", p.ImportPath)
			}
		}
	}
	for _, leaf := range sharedLeaves {
		if !seen[leaf] {
			t.Errorf("no package %s", leaf)
		}
	}
}

// TestModelSpeaksNoHTTP: the emulator's model (internal/sim/model) is the
// cluster in domain terms; HTTP belongs to internal/sim, which serves it.
// The model depends on no other package under internal/sim nor on
// net/http (not even through a library), and no file of it (tests aside)
// imports net/http: a model failure is a *model.Error
// of a domain kind, which internal/sim maps to PVE's HTTP answer. Of
// corral's other packages it may use only the shared and utility leaves.
func TestModelSpeaksNoHTTP(t *testing.T) {
	model := module + "/internal/sim/model"
	seen := false
	for _, p := range listPackages(t) {
		if p.ImportPath != model && !strings.HasPrefix(p.ImportPath, model+"/") {
			continue
		}
		seen = true
		for _, dep := range p.Deps {
			if strings.HasPrefix(dep, module+"/internal/sim") && dep != model && !strings.HasPrefix(dep, model+"/") {
				t.Errorf("%s depends on %s: the model must not reach into the emulator's HTTP side", p.ImportPath, dep)
			}
			if strings.HasPrefix(dep, module+"/") && !strings.HasPrefix(dep, module+"/internal/sim") && !slices.Contains(sharedLeaves, dep) && !slices.Contains(utilityLeaves, dep) {
				t.Errorf("%s depends on %s: the model stands alone", p.ImportPath, dep)
			}
			if dep == "net/http" {
				t.Errorf("%s depends on net/http, through a package it imports: the model speaks no HTTP", p.ImportPath)
			}
		}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			http := false
			for _, imp := range f.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				http = http || path == "net/http" || strings.HasPrefix(path, "net/http/")
			}
			if http {
				t.Errorf("%s/%s imports net/http: the model speaks in domain errors; internal/sim maps them to HTTP answers", p.ImportPath, name)
			}
		}
	}
	if !seen {
		t.Fatalf("no package %s", model)
	}
}

// TestLazyRegexpsLinkedByCLI: every package that holds lazily compiled
// regular expressions (internal/lazyre) is linked by internal/cli, whose
// TestLazyRegexpsCompile compiles all of them, so a bad pattern fails
// there instead of at its first use.
func TestLazyRegexpsLinkedByCLI(t *testing.T) {
	const lazyre, cli = module + "/internal/lazyre", module + "/internal/cli"
	pkgs := listPackages(t)
	var cliDeps []string
	for _, p := range pkgs {
		if p.ImportPath == cli {
			cliDeps = p.Deps
		}
	}
	if cliDeps == nil {
		t.Fatalf("no package %s", cli)
	}
	for _, p := range pkgs {
		if slices.Contains(p.Imports, lazyre) && p.ImportPath != cli && !slices.Contains(cliDeps, p.ImportPath) {
			t.Errorf("%s imports %s but %s does not link it: its patterns are never compiled by a test", p.ImportPath, lazyre, cli)
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
