package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/corralhq/corral/internal/sim/schema"
)

// checkReturns checks an answer's data against the "returns" schema of
// the route in the emulated release's apidoc: every key it sends is
// declared (unless the object says additionalProperties), every key the schema does
// not mark optional is there, and each value has the declared JSON type
// (PVE's booleans are 0/1 numbers on the wire).
func checkReturns(t *testing.T, version, method, path string, data json.RawMessage) {
	t.Helper()
	api, err := schema.Load(version)
	if err != nil {
		t.Fatal(err)
	}
	m, _, ok := api.Lookup(method, path)
	if !ok || m.Returns == nil {
		t.Fatalf("%s %s: no returns schema in PVE %s", method, path, version)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	for _, e := range returnsErrors(m.Returns, v, "data") {
		t.Errorf("%s %s: %s", method, path, e)
	}
}

// returnsErrors lists where v departs from p.
func returnsErrors(p *schema.Prop, v any, where string) []string {
	want := map[string]string{"string": "string", "integer": "number", "number": "number", "boolean": "number", "array": "array", "object": "object"}[p.Type]
	if want != "" && jsonKind(v) != want {
		return []string{fmt.Sprintf("%s is %s %v, the schema says %s", where, jsonKind(v), v, p.Type)}
	}
	var out []string
	switch x := v.(type) {
	case []any:
		if p.Items != nil {
			for i, e := range x {
				out = append(out, returnsErrors(p.Items, e, fmt.Sprintf("%s[%d]", where, i))...)
			}
		}
	case map[string]any:
		for k, sub := range p.Properties {
			if _, ok := x[k]; !ok && !sub.Optional {
				out = append(out, fmt.Sprintf("%s: %q missing (not optional)", where, k))
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub := p.Properties[k]
			if sub == nil {
				if len(p.Properties) > 0 && (p.AdditionalProperties == nil || !*p.AdditionalProperties) {
					out = append(out, fmt.Sprintf("%s: key %q is not in the schema", where, k))
				}
				continue
			}
			out = append(out, returnsErrors(sub, x[k], where+"."+k)...)
		}
	}
	return out
}
