package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// cliPrintExceptions are the functions of internal/cli that may print
// with fmt, by file and function (Type.method for a method), and why:
// what they print is data, not a message for people, so its words are
// not internal/ui's.
var cliPrintExceptions = map[string]string{
	"guest.go:runInGuest":          "streams the lines a command in the guest printed, as it printed them",
	"version.go:buildVersion.text": "the version text is data that scripts read, as go version's is, and the --version template's",
}

// printFuncs are fmt's printing functions, and the methods of those names
// (cobra's cmd.Println): each writes its arguments as text.
var printFuncs = map[string]bool{"Fprint": true, "Fprintf": true, "Fprintln": true, "Print": true, "Printf": true, "Println": true}

// TestCLISpellsNoMessages enforces issue 29's "every human message
// through ui": a non-test file of internal/cli calls no fmt.Fprint*,
// fmt.Print* nor a Print* method (a command parses its flags, calls a
// package and hands the result to a ui.Write… function, which words it),
// and writes no string literal with WriteString or io.WriteString (a
// sentence spelled by hand in a buffer). The exceptions above print data;
// one that no longer matches a call fails too, so the list stays true.
func TestCLISpellsNoMessages(t *testing.T) {
	var dir string
	for _, p := range listPackages(t) {
		if p.ImportPath == module+"/internal/cli" {
			dir = p.Dir
		}
	}
	if dir == "" {
		t.Fatal("no package internal/cli")
	}
	used := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		for _, v := range messageCalls(t, path) {
			if _, ok := cliPrintExceptions[v.where]; ok {
				used[v.where] = true
				continue
			}
			t.Errorf("internal/cli/%s: %s: word the message in internal/ui (a ui.Write… function) and call that; printing data belongs in cliPrintExceptions, with why", v.pos, v.what)
		}
	}
	var stale []string
	for e := range cliPrintExceptions {
		if !used[e] {
			stale = append(stale, e)
		}
	}
	sort.Strings(stale)
	for _, e := range stale {
		t.Errorf("cliPrintExceptions lists %s, which prints nothing now: drop it", e)
	}
}

// messageCall is a call that spells output in internal/cli: where is its
// file:function (the key of cliPrintExceptions), pos its file:line.
type messageCall struct{ where, pos, what string }

// messageCalls are the calls of the file at path that print or write a
// string literal (in any expression of its arguments).
func messageCalls(t *testing.T, path string) []messageCall {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Base(path)
	var out []messageCall
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		where := base + ":" + funcName(fd)
		ast.Inspect(fd, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if what := messageCallKind(call); what != "" {
				pos := fset.Position(call.Pos())
				out = append(out, messageCall{where: where, pos: base + ":" + strconv.Itoa(pos.Line), what: what})
			}
			return true
		})
	}
	return out
}

// messageCallKind says what call does when it spells output: a print, or
// a string literal written; "" when it does neither.
func messageCallKind(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	name := sel.Sel.Name
	if printFuncs[name] {
		return "calls " + name
	}
	if name != "WriteString" {
		return ""
	}
	what := ""
	for _, a := range call.Args {
		ast.Inspect(a, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && what == "" {
				what = "writes the literal " + lit.Value
			}
			return what == ""
		})
	}
	return what
}

// funcName is fd's name, Type.method for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
