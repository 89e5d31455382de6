package manifest

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		name, in string
		want     []part
		problem  string
	}{
		{"plain", "plain", []part{{lit: "plain"}}, ""},
		{"empty", "", []part{{lit: ""}}, ""},
		{"whole env", "${env:ROOT_PW}", []part{{ref: "${env:ROOT_PW}"}}, ""},
		{"whole file", "${file:~/.ssh/id.pub}", []part{{ref: "${file:~/.ssh/id.pub}"}}, ""},
		{"escape", "$${env:X}", []part{{lit: "${env:X}"}}, ""},
		{"escape in text", "a $${b} c", []part{{lit: "a ${b} c"}}, ""},
		{"dollar not before brace", "$5 {x}", []part{{lit: "$5 {x}"}}, ""},
		{"three dollars: a dollar, then the escape", "$$${env:X}", []part{{lit: "$${env:X}"}}, ""},
		{"inside text", "postgres://app:${env:DB_PW}@db:5432/app",
			[]part{{lit: "postgres://app:"}, {ref: "${env:DB_PW}"}, {lit: "@db:5432/app"}}, ""},
		{"prefix", "pre${env:X}", []part{{lit: "pre"}, {ref: "${env:X}"}}, ""},
		{"suffix", "${env:X}tail", []part{{ref: "${env:X}"}, {lit: "tail"}}, ""},
		{"two, adjacent", "${env:A}${file:b}", []part{{ref: "${env:A}"}, {ref: "${file:b}"}}, ""},
		{"default with colon", "h:${env:H:-a:b}!", []part{{lit: "h:"}, {ref: "${env:H:-a:b}"}, {lit: "!"}}, ""},
		{"escape beside a reference", "$${x}=${env:X}", []part{{lit: "${x}="}, {ref: "${env:X}"}}, ""},
		{"bad env name", "${env:1X}", nil, "invalid reference"},
		{"unknown kind", "${vault:x}", nil, "invalid reference"},
		{"unknown kind inside", "a ${vault:x} b", nil, "invalid reference"},
		{"unclosed", "a ${env:X", nil, "invalid reference"},
		{"empty reference", "${}", nil, "invalid reference"},
		{"one good, one bad", "${env:X}-${env:}", nil, "invalid reference"},
		{"corral's credential inside", "x${env:PROXMOX_VE_API_TOKEN}", nil,
			"PROXMOX_VE_API_TOKEN is corral's own credential: a manifest never passes it into a container (anyone who can read the container would get corral's access); give the app a token of its own in a variable of its own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problem := parseTemplate(tt.in, nil)
			if problem != tt.problem {
				t.Fatalf("parseTemplate(%q) problem=%q, want %q", tt.in, problem, tt.problem)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(part{})); diff != "" {
				t.Errorf("parseTemplate(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestTemplatePattern: the JSON Schema's pattern accepts what
// parseTemplate reads as holding a reference, and nothing else.
func TestTemplatePattern(t *testing.T) {
	re := regexp.MustCompile(templatePattern)
	for _, s := range []string{"plain", "", "${env:X}", "pre${env:X}post", "$${env:X}", "$$${env:X}", "a${env:1X}",
		"${vault:x}", "$${x}=${env:X}", "$5 ${file:a}", "${env:A}${env:B}", "x$$", "x$", "${env:X", "${env:X}$", "a ${b} ${env:X}"} {
		parts, problem := parseTemplate(s, nil)
		want := problem == "" && len(references(parts)) > 0
		if got := re.MatchString(s); got != want {
			t.Errorf("templatePattern matches %q: %v, want %v (parts %v, problem %q)", s, got, want, parts, problem)
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
