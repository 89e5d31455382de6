package manifest

import (
	"encoding/json"
	"slices"
)

// JSONSchema returns a JSON Schema (draft 2020-12) of corral.yaml for
// editors, generated from the same field table the decoder validates
// against: the same keys, types, enums, ranges, patterns, defaults and
// descriptions. A few checks are exact only in the decoder (IPv6
// addresses, SSH key syntax, sizes being whole MiB, durations above 0,
// octal digits of an unquoted mode, cross-field rules);
// the schema approximates them with patterns.
func JSONSchema() []byte {
	s := schemaOf(manifestSpec)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["title"] = "corral manifest (corral.yaml)"
	s["$defs"] = map[string]any{
		"reference": map[string]any{
			"type":        "string",
			"description": "A string with references read at load time: " + referenceAllowed + ".",
			"pattern":     templatePattern,
		},
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic("manifest: schema does not encode: " + err.Error()) // only maps, strings and numbers
	}
	return append(b, '\n')
}

// durationPattern approximates what time.ParseDuration accepts.
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// schemaOf describes one field. encoding/json sorts map keys, so the
// output is stable.
func schemaOf(f *field) map[string]any {
	s := map[string]any{}
	if f.doc != "" {
		s["description"] = f.doc
	}
	if f.def != nil {
		s["default"] = f.def
	}
	switch f.kind {
	case kindObject:
		objectSchema(f, s)
	case kindList:
		s["type"] = "array"
		s["items"] = schemaOf(f.items)
		if f.minItems > 0 {
			s["minItems"] = f.minItems
		}
		if f.maxItems > 0 {
			s["maxItems"] = f.maxItems
		}
	case kindInt:
		s["type"] = "integer"
		s["minimum"] = f.min
		if f.max > 0 {
			s["maximum"] = f.max
		}
	case kindBool:
		s["type"] = "boolean"
	case kindSize:
		s["type"] = "string"
		s["anyOf"] = []any{map[string]any{"pattern": sizePattern}, map[string]any{"$ref": "#/$defs/reference"}}
	case kindDuration:
		s["type"] = "string"
		s["anyOf"] = []any{map[string]any{"pattern": durationPattern}, map[string]any{"$ref": "#/$defs/reference"}}
	case kindMode:
		// An unquoted 0644 reaches JSON as the integer 420.
		s["anyOf"] = []any{
			map[string]any{"type": "string", "pattern": modePattern},
			map[string]any{"type": "integer", "minimum": 0, "maximum": 0o7777},
		}
	case kindString:
		stringSchema(f, s)
	}
	return s
}

// objectSchema adds an object field's properties to s: a root-only key
// is described and refused, the required keys are listed, and a oneOf
// names the keys of which exactly one must be set.
func objectSchema(f *field, s map[string]any) {
	s["type"] = "object"
	s["additionalProperties"] = false
	props := map[string]any{}
	var required []string
	for _, c := range f.fields {
		if c.rootOnly {
			props[c.key] = map[string]any{
				"description": "Only root@pam can set " + c.key + "; corral works with an API token, so it is rejected.",
				"not":         map[string]any{},
			}
			continue
		}
		props[c.key] = schemaOf(c)
		if c.required {
			required = append(required, c.key)
		}
	}
	s["properties"] = props
	if required != nil {
		slices.Sort(required)
		s["required"] = required
	}
	if f.oneOf != nil {
		var branches []any
		for _, k := range f.oneOf {
			branches = append(branches, map[string]any{"required": []string{k}})
		}
		s["oneOf"] = branches
	}
	if f.anyOf != nil {
		s["anyOf"] = f.anyOf
	}
}

// stringSchema adds a string field's literal constraints to s, or'ed
// with a reference: a reference is checked after it is resolved, so it
// stands in for any literal.
func stringSchema(f *field, s map[string]any) {
	s["type"] = "string"
	literal := map[string]any{}
	if f.enum != nil {
		literal["enum"] = f.enum
	}
	if f.pattern != "" {
		literal["pattern"] = f.pattern
	}
	if f.minLen > 0 {
		literal["minLength"] = f.minLen
	}
	if f.maxLen > 0 {
		literal["maxLength"] = f.maxLen
	}
	if f.forbid != "" {
		literal["not"] = map[string]any{"pattern": f.forbid}
	}
	if len(literal) > 0 {
		s["anyOf"] = []any{literal, map[string]any{"$ref": "#/$defs/reference"}}
	}
}
