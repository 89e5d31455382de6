package manifest_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/internal/testutil/refdata"
)

func TestJSONSchema_golden(t *testing.T) {
	s := manifest.JSONSchema()
	var doc map[string]any
	if err := json.Unmarshal(s, &doc); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if got, want := doc["$schema"], "https://json-schema.org/draft/2020-12/schema"; got != want {
		t.Errorf("$schema=%v, want %v", got, want)
	}
	testenv.Golden(t, "testdata/corral.schema.json", s)
}

// TestJSONSchema_agrees runs the schema, through the small validator
// below, over the examples, the valid test manifests and the broken ones.
// Each broken file's first line says what the schema alone must conclude:
// "# schema: reject", "# schema: accept" (the rule is one the decoder
// checks but a JSON Schema cannot express: cross-field rules, resolved
// references, IP and SSH key syntax, whole MiB) or "# schema: n/a" (not a
// single YAML document). So the schema and the decoder cannot drift apart
// unnoticed.
func TestJSONSchema_agrees(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(manifest.JSONSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, data []byte) []string {
		t.Helper()
		var y any
		if err := yaml.Unmarshal(data, &y); err != nil {
			t.Fatalf("yaml: %v", err)
		}
		j, err := json.Marshal(y)
		if err != nil {
			t.Fatalf("json: %v", err)
		}
		var doc any
		if err := json.Unmarshal(j, &doc); err != nil {
			t.Fatal(err)
		}
		return validate(schema, schema, doc, "")
	}

	root := refdata.RepoRoot(t)
	for _, name := range []string{"quickstart", "hermes", "vm"} {
		t.Run("example/"+name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(root, "examples", name, "corral.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if errs := check(t, data); errs != nil {
				t.Errorf("schema rejects the example:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
	for _, c := range validCases {
		t.Run("valid/"+c.name, func(t *testing.T) {
			if errs := check(t, []byte(c.yaml)); errs != nil {
				t.Errorf("schema rejects a valid manifest:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	for _, path := range files {
		t.Run("bad/"+filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			verdict, ok := strings.CutPrefix(first, "# schema: ")
			if !ok {
				t.Fatalf("first line %q is not # schema: reject|accept|n/a", first)
			}
			switch verdict {
			case "n/a":
			case "reject":
				if check(t, data) == nil {
					t.Error("the schema accepts it, the decoder rejects it")
				}
			case "accept":
				if errs := check(t, data); errs != nil {
					t.Errorf("the schema rejects it, so mark it reject:\n%s", strings.Join(errs, "\n"))
				}
			default:
				t.Fatalf("unknown verdict %q", verdict)
			}
		})
	}
}

// TestValidate makes sure the validator below can fail.
func TestValidate(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(manifest.JSONSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		`{}`, `{"apps":[]}`, `{"apps":[{"name":"a"}]}`, `{"apps":[{"name":"a","template":"x.tar.gz","x":1}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","cores":1.5}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","features":{"keyctl":true}}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","volumes":[{"name":"d","mount":"/d","reclaim":"keep"}]}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","provision":[{}]}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","provision":[{"run":"x","user":{"name":"u"}}]}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","provision":[{"file":{"path":"/a"}}]}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","provision":[{"run":"x","timeout":"10"}]}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","provision":[{"file":{"path":"/a","content":"","mode":"0999"}}]}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","provision":[{"file":{"path":"/a","content":"","mode":8000}}]}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","health":[{"http":"ftp://x/"}]}]}`,
		`{"apps":[{"name":"a","template":"x.tar.gz","backup":{"mode":"live"}}]}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		if validate(schema, schema, v, "") == nil {
			t.Errorf("validator accepts %s", doc)
		}
	}
}

// validate checks v against the subset of JSON Schema 2020-12 that
// JSONSchema uses, returning the problems found.
func validate(root, s map[string]any, v any, path string) []string {
	var errs []string
	fail := func(format string, args ...any) {
		errs = append(errs, path+": "+fmt.Sprintf(format, args...))
	}
	if ref, ok := s["$ref"].(string); ok {
		name, _ := strings.CutPrefix(ref, "#/$defs/")
		return validate(root, root["$defs"].(map[string]any)[name].(map[string]any), v, path)
	}
	if not, ok := s["not"].(map[string]any); ok && validate(root, not, v, path) == nil {
		fail("matches a schema it must not")
	}
	if branches, ok := s["anyOf"].([]any); ok {
		matched := false
		for _, sub := range branches {
			if validate(root, sub.(map[string]any), v, path) == nil {
				matched = true
			}
		}
		if !matched {
			fail("matches no anyOf branch")
		}
	}
	if branches, ok := s["oneOf"].([]any); ok {
		matched := 0
		for _, sub := range branches {
			if validate(root, sub.(map[string]any), v, path) == nil {
				matched++
			}
		}
		if matched != 1 {
			fail("matches %d oneOf branches, want 1", matched)
		}
	}
	if typ, ok := s["type"].(string); ok && !hasType(v, typ) {
		fail("is %T, want %s", v, typ)
		return errs
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for k, val := range v {
			sub, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					fail("unknown key %s", k)
				}
				continue
			}
			errs = append(errs, validate(root, sub, val, path+"."+k)...)
		}
		req, _ := s["required"].([]any)
		for _, k := range req {
			if _, ok := v[k.(string)]; !ok {
				fail("missing %s", k)
			}
		}
	case []any:
		if min, ok := s["minItems"].(float64); ok && float64(len(v)) < min {
			fail("fewer than %v items", min)
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, it := range v {
				errs = append(errs, validate(root, items, it, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case string:
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(v) {
			fail("does not match %s", p)
		}
		if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, any(v)) {
			fail("not in %v", enum)
		}
		if n, ok := s["minLength"].(float64); ok && float64(utf8.RuneCountInString(v)) < n {
			fail("shorter than %v", n)
		}
		if n, ok := s["maxLength"].(float64); ok && float64(utf8.RuneCountInString(v)) > n {
			fail("longer than %v", n)
		}
	case float64:
		if n, ok := s["minimum"].(float64); ok && v < n {
			fail("below %v", n)
		}
		if n, ok := s["maximum"].(float64); ok && v > n {
			fail("above %v", n)
		}
	}
	return errs
}

func hasType(v any, typ string) bool {
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	}
	return false
}
