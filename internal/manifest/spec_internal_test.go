package manifest

import (
	"fmt"
	"testing"

	"gopkg.in/yaml.v3"
)

// eachField calls fn for every field of the table, with its path.
func eachField(f *field, path string, fn func(f *field, path string)) {
	fn(f, path)
	if f.items != nil {
		eachField(f.items, path+"[]", fn)
	}
	for _, c := range f.fields {
		eachField(c, joinPath(path, c.key), fn)
	}
}

// TestSpec_wellFormed guards the field table: every field a user may write
// is documented, keys are unique, and every default passes its own field's
// checks (so defaults applied after validation are valid too).
func TestSpec_wellFormed(t *testing.T) {
	eachField(manifestSpec, "", func(f *field, path string) {
		if f.doc == "" && !f.rootOnly {
			t.Errorf("%s has no doc", path)
		}
		if (f.kind == kindObject) != (f.fields != nil) || (f.kind == kindList) != (f.items != nil) {
			t.Errorf("%s: kind and children disagree", path)
		}
		if f.pattern != "" && f.allowed == "" {
			t.Errorf("%s has a pattern but no allowed text", path)
		}
		seen := map[string]bool{}
		for _, c := range f.fields {
			if seen[c.key] {
				t.Errorf("%s: key %s twice", path, c.key)
			}
			seen[c.key] = true
		}
		for _, k := range f.oneOf {
			if c := f.child(k); c == nil || c.required || c.def != nil {
				t.Errorf("%s: oneOf key %s is not an optional key without default", path, k)
			}
		}
		if f.def == nil {
			return
		}
		tag := map[kind]string{kindString: "!!str", kindSize: "!!str", kindInt: "!!int", kindBool: "!!bool",
			kindDuration: "!!str", kindMode: "!!str"}[f.kind]
		d := &decoder{file: "spec"}
		v := d.walk(&yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: fmt.Sprint(f.def), Line: 1, Column: 1}, f, path)
		if !v.ok || len(d.diags.Items) > 0 {
			t.Errorf("default of %s is not valid: %v", path, d.diags.Error())
		}
	})
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"memory", "memory", 0}, {"memroy", "memory", 2}, {"", "abc", 3}, {"nesting", "nestng", 1}, {"kitten", "sitting", 3},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q)=%d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSplitReference(t *testing.T) {
	tests := []struct {
		in, lit, ref, problem string
	}{
		{"plain", "plain", "", ""},
		{"${env:ROOT_PW}", "", "${env:ROOT_PW}", ""},
		{"${file:~/.ssh/id.pub}", "", "${file:~/.ssh/id.pub}", ""},
		{"$${env:X}", "${env:X}", "", ""},
		{"a $${b} c", "a ${b} c", "", ""},
		{"${env:1X}", "", "", "invalid reference"},
		{"${vault:x}", "", "", "invalid reference"},
		{"${env:X}tail", "", "", "invalid reference"},
		{"pre${env:X}", "", "", "a reference must be the whole value"},
		{"$5 {x}", "$5 {x}", "", ""},
	}
	for _, tt := range tests {
		lit, ref, problem := splitReference(tt.in)
		if lit != tt.lit || ref != tt.ref || problem != tt.problem {
			t.Errorf("splitReference(%q)=%q,%q,%q; want %q,%q,%q", tt.in, lit, ref, problem, tt.lit, tt.ref, tt.problem)
		}
	}
}

func TestLoadOptions_resolve(t *testing.T) {
	o := LoadOptions{
		Getenv: func(n string) (string, bool) {
			switch n {
			case "HOME":
				return "/home/u", true
			case "EMPTY":
				return "", true
			case "SET":
				return "v", true
			}
			return "", false
		},
		ReadFile: func(p string) ([]byte, error) { return []byte(p + "\r\n\n"), nil },
	}
	tests := []struct {
		ref, want, wantErr string
	}{
		{"${file:~/pw}", "/home/u/pw", ""},
		{"${file:~}", "/home/u", ""},
		{"${file:pw}", "/etc/corral/pw", ""},
		{"${file:/abs/pw}", "/abs/pw", ""},
		{"${env:NOPE}", "", "environment variable NOPE is not set (write ${env:NOPE:-} for an optional one)"},
		{"${env:NOPE:-}", "", ""},
		{"${env:NOPE:-dflt}", "dflt", ""},
		{"${env:EMPTY:-dflt}", "dflt", ""},
		{"${env:SET:-dflt}", "v", ""},
		{"${env:EMPTY}", "", ""},
		{"${file:~bob/pw}", "", "cannot expand ~bob in ${file:~bob/pw}: only ~ (your home) is supported"},
	}
	for _, tt := range tests {
		got, _, err := o.resolve(tt.ref, "/etc/corral")
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tt.want || gotErr != tt.wantErr {
			t.Errorf("resolve(%q)=%q, %v; want %q, %q", tt.ref, got, err, tt.want, tt.wantErr)
		}
	}
	noHome := LoadOptions{Getenv: func(string) (string, bool) { return "", false }}
	if _, _, err := noHome.resolve("${file:~/x}", "."); err == nil || err.Error() != "cannot expand ~ in ${file:~/x}: HOME is not set" {
		t.Errorf("without HOME: %v", err)
	}
}
