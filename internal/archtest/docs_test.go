package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureDocNamesWhatExists keeps docs/architecture.md's
// walk-throughs true: in each row of its tables, every Go file named
// exists and every function named is declared in one of the row's files
// (a method counts by its name). A function renamed or moved to another
// file fails here until the document follows.
func TestArchitectureDocNamesWhatExists(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	ticks := regexp.MustCompile("`([^`]+)`")
	ident := regexp.MustCompile(`^(?:[a-z]+\.)?([A-Za-z_][A-Za-z0-9_]*)$`)
	rows := 0
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 || strings.Contains(line, "---") {
			continue
		}
		where := cells[len(cells)-2] // the last column says where
		var files, funcs []string
		for _, m := range ticks.FindAllStringSubmatch(where, -1) {
			switch tok := m[1]; {
			case strings.HasSuffix(tok, ".go"):
				files = append(files, tok)
			case ident.MatchString(tok):
				funcs = append(funcs, ident.FindStringSubmatch(tok)[1])
			}
		}
		if len(files) == 0 {
			continue
		}
		rows++
		declared := map[string]bool{}
		for _, f := range files {
			parsed, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, f), nil, 0)
			if err != nil {
				t.Errorf("docs/architecture.md names %s: %v", f, err)
				continue
			}
			for _, d := range parsed.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					declared[fd.Name.Name] = true
				}
			}
		}
		for _, fn := range funcs {
			if !declared[fn] {
				t.Errorf("docs/architecture.md: %s is not declared in %s (row %q)", fn, strings.Join(files, ", "), strings.TrimSpace(line))
			}
		}
	}
	if rows < 5 {
		t.Errorf("found %d table rows naming files in docs/architecture.md, want the walk-through's 5 or more", rows)
	}
}

// TestREADMELayoutListsEveryPackage: the README's layout names every
// package of the tree (the test helpers under internal/testutil and the
// schema generator together with their parent).
func TestREADMELayoutListsEveryPackage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if !strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "internal/testutil/") || rel == "internal/sim/schema/gen" {
			continue
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(rel) + `\s`).Match(readme) {
			t.Errorf("README.md's layout does not list %s", rel)
		}
	}
}
