package schema

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// ParamErrorMessage is the message of PVE's 400 reply to a parameter
// error (PVE::Exception raise_param_exc, JSONSchema.pm validate).
const ParamErrorMessage = "Parameter verification failed.\n"

// ParamError is a failed parameter validation: HTTP 400 with
// ParamErrorMessage and these per-parameter messages as "errors".
type ParamError struct {
	// Errors maps a parameter path ("mp0", "delete", "vmid") to PVE's
	// message, trailing newlines included where PVE has them.
	Errors map[string]string
}

func (e *ParamError) Error() string {
	keys := make([]string, 0, len(e.Errors))
	for k := range e.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("parameter verification failed:")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s: %s", k, strings.ReplaceAll(strings.TrimRight(e.Errors[k], "\n"), "\n", " "))
	}
	return b.String()
}

// Validate checks request parameters against the method's schema exactly
// as PVE does before running a handler (JSONSchema.pm validate), and
// returns a *ParamError with PVE's messages, or nil.
//
// params holds every parameter as PVE receives it: query or form values,
// with path parameters (node, vmid…) merged in. Values are the strings on
// the wire: booleans must be "1" or "0" (a JSON body's true/false become
// "1"/"0" first, as PVE accepts JSON booleans); array parameters are the
// elements joined with NUL.
func (m *Method) Validate(params map[string]string) error {
	v := &validation{api: m.api, errors: map[string]string{}}
	values := make(map[string]any, len(params))
	for k, s := range params {
		values[k] = s
		if _, p := m.Parameters.Property(k); p != nil && p.Type == "array" {
			values[k] = strings.Split(s, "\x00")
		}
	}
	p := m.Parameters
	if len(p.Properties) > 0 || p.AdditionalProperties != nil {
		v.checkObject("", p.Properties, values, p.AdditionalProperties, p.AdditionalSchema)
	}
	if len(v.errors) > 0 {
		return &ParamError{Errors: v.errors}
	}
	return nil
}

// validation collects errors like JSONSchema.pm's $errors hash.
type validation struct {
	api    *API
	errors map[string]string
}

// requiresMessage is check_object's error for a property whose
// "requires" is missing; pve-common reworded it for PVE 9 (commit
// "schema: clarify error on missing property dependency").
func (v *validation) requiresMessage(prop string) string {
	if v.api != nil && v.api.Version == "8.4" {
		return fmt.Sprintf("missing property - '%s' requires this property", prop)
	}
	return fmt.Sprintf("missing property required by '%s'", prop)
}

// addError is add_error: a second message for a path is appended after a
// literal backslash-n (the Perl joins with '\n' in single quotes).
func (v *validation) addError(path, msg string) {
	if path == "" {
		path = "_root"
	}
	if old, ok := v.errors[path]; ok && old != "" {
		v.errors[path] = old + `\n` + msg
		return
	}
	v.errors[path] = msg
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// instanceType is get_instance_type: the value of the property named by
// the schema's type-property, if any.
func instanceType(p *Prop, value map[string]any) *string {
	if p.TypeProperty == "" {
		return nil
	}
	if s, ok := value[p.TypeProperty].(string); ok {
		return &s
	}
	return nil
}

// checkObject is JSONSchema.pm's check_object. Values are strings, string
// slices (arrays) or absent. Indexed schema keys ("mp[n]") stand for all
// the names PVE's real schema lists one by one; they are all optional.
func (v *validation) checkObject(path string, schema map[string]*Prop, value map[string]any,
	additional *bool, additionalSchema *Prop) {
	valueKeys := slices.Sorted(maps.Keys(value))
	for _, k := range slices.Sorted(maps.Keys(schema)) {
		p := schema[k]
		if p.IndexCount > 0 {
			for _, vk := range valueKeys {
				if key, _ := lookupProperty(schema, vk); key == k {
					v.checkProp(value[vk], p, joinPath(path, vk), instanceType(p, value))
				}
			}
			continue
		}
		v.checkProp(value[k], p, joinPath(path, k), instanceType(p, value))
	}
	for _, k := range valueKeys {
		newPath := joinPath(path, k)
		if _, sub := lookupProperty(schema, k); sub != nil {
			if req := sub.Requires; req != "" {
				if value[req] == nil {
					v.addError(joinPath(path, req), v.requiresMessage(newPath))
				}
			}
			matched := true
			if len(sub.OneOf) > 0 {
				it := instanceType(sub, value)
				matched = false
				for _, alt := range sub.OneOf {
					if alt.InstanceTypes != nil && (it == nil || !contains(alt.InstanceTypes, *it)) {
						continue
					}
					matched = true
					break
				}
			}
			if matched {
				continue // checked in the first loop
			}
		}
		if additional != nil && !*additional {
			v.addError(newPath, "property is not defined in schema and the schema does not allow additional properties")
			continue
		}
		if additionalSchema != nil {
			v.checkProp(value[k], additionalSchema, newPath, nil)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkProp is JSONSchema.pm's check_prop for one value.
func (v *validation) checkProp(value any, p *Prop, path string, instType *string) {
	optionalForType := false
	switch {
	case len(p.OneOf) > 0 && p.TypeProperty != "":
		optionalForType = true
		for _, alt := range p.OneOf {
			if instType == nil {
				break // optional when the type is unknown
			}
			if alt.InstanceTypes == nil {
				v.addError(path, "missing 'instance-types' in oneOf alternative")
				return
			}
			if !contains(alt.InstanceTypes, *instType) {
				continue
			}
			optionalForType = alt.Optional
			v.checkProp(value, alt, path, nil)
		}
	case len(p.OneOf) > 0:
		// No schema in the dumps uses an untyped oneOf. Valid when one
		// alternative passes; otherwise the first alternative's errors.
		var first map[string]string
		for i, alt := range p.OneOf {
			sub := &validation{api: v.api, errors: map[string]string{}}
			sub.checkProp(value, alt, fmt.Sprintf("%s.oneOf[%d]", path, i), nil)
			if len(sub.errors) == 0 {
				first = nil
				break
			}
			if first == nil {
				first = sub.errors
			}
		}
		for k, msg := range first {
			v.addError(k, msg)
		}
	case instType != nil:
		if p.InstanceTypes == nil {
			v.addError(path, "missing 'instance-types'")
			return
		}
		// JSONSchema.pm then compares against the misspelt key
		// 'instance_types', which never matches: nothing else happens.
	}

	if value == nil {
		if p.Type == "null" {
			return
		}
		if !p.Optional && p.Alias == "" && !optionalForType {
			v.addError(path, "property is missing and it is not optional")
		}
		return
	}
	if !v.checkType(path, p.Type, value) {
		return
	}
	switch val := value.(type) {
	case []string:
		if p.Items != nil {
			for i, el := range val {
				v.checkProp(el, p.Items, fmt.Sprintf("%s[%d]", path, i), nil)
			}
		}
		return
	case string:
		v.checkScalar(val, p, path)
	}
}

// checkType is JSONSchema.pm's check_type for the value kinds an HTTP
// request can carry (strings and arrays of strings).
func (v *validation) checkType(path, typ string, value any) bool {
	switch typ {
	case "", "any":
		return true
	case "null":
		v.addError(path, "type check ('null') failed - value is not null")
		return false
	case "array":
		if _, ok := value.([]string); !ok {
			v.addError(path, "type check ('array') failed")
			return false
		}
		return true
	case "object", "coderef":
		v.addError(path, fmt.Sprintf("type check ('%s') failed", typ))
		return false
	}
	s, ok := value.(string)
	if !ok {
		v.addError(path, fmt.Sprintf("type check ('%s') failed - got ARRAY", typ))
		return false
	}
	switch typ {
	case "boolean":
		ok = s == "1" || s == "0"
	case "integer":
		ok = isInteger(s)
	case "number":
		ok = isNumber(s)
	}
	if !ok {
		v.addError(path, fmt.Sprintf("type check ('%s') failed - got '%s'", typ, s))
	}
	return ok
}

// checkScalar is the scalar branch of check_prop: format, pattern,
// lengths, range, enum — in that order, stopping at the first failure.
func (v *validation) checkScalar(s string, p *Prop, path string) {
	if p.PropertyFormat != nil || p.Format != "" {
		if err := v.api.checkFormat(p, s, path); err != nil {
			v.addError(path, "invalid format - "+perlText(err))
			return
		}
	}
	if p.Pattern != "" && !p.re.MatchString(s) {
		v.addError(path, "value does not match the regex pattern")
		return
	}
	if p.MaxLength != nil && perlLength(s) > *p.MaxLength {
		v.addError(path, fmt.Sprintf("value may only be %d characters long", *p.MaxLength))
		return
	}
	if p.MinLength != nil && perlLength(s) < *p.MinLength {
		v.addError(path, fmt.Sprintf("value must be at least %d characters long", *p.MinLength))
		return
	}
	if isNumber(s) {
		if p.Maximum != "" && perlNumCmp(s, p.Maximum.String()) > 0 {
			v.addError(path, "value must have a maximum value of "+p.Maximum.String())
			return
		}
		if p.Minimum != "" && perlNumCmp(s, p.Minimum.String()) < 0 {
			v.addError(path, "value must have a minimum value of "+p.Minimum.String())
			return
		}
	}
	if p.Enum != nil && !contains(p.Enum, s) {
		v.addError(path, fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", s, strings.Join(p.Enum, ", ")))
	}
}

// checkFormat is JSONSchema.pm's check_format: a property string for an
// inlined format, else the registered verifier of a named format, applied
// to each element of "-list" formats and only to true values of "-opt"
// ones. Named formats without a verifier here pass (UnverifiedFormats).
func (a *API) checkFormat(p *Prop, value, path string) error {
	if p.PropertyFormat != nil {
		_, err := a.parsePropertyString(p.PropertyFormat, value, path)
		return err
	}
	if p.Format == "regex" {
		return nil
	}
	name, kind := splitFormatName(p.Format)
	verify, ok := verifiers[name]
	if !ok {
		return nil
	}
	switch kind {
	case "list":
		for _, el := range splitList(value) {
			if err := verify(a, el); err != nil {
				return err
			}
		}
		return nil
	case "opt":
		if !perlTruthy(value) {
			return nil
		}
	}
	return verify(a, value)
}

// compile prepares the patterns of a schema tree for matching.
func (p *Prop) compile() error {
	if p == nil {
		return nil
	}
	if p.Pattern != "" && p.re == nil {
		re, err := schemaPattern(p.Pattern)
		if err != nil {
			return err
		}
		p.re = re
	}
	children := []*Prop{p.Items, p.AdditionalSchema}
	children = append(children, p.OneOf...)
	for _, k := range slices.Sorted(maps.Keys(p.Properties)) {
		children = append(children, p.Properties[k])
	}
	if p.PropertyFormat != nil {
		for _, k := range slices.Sorted(maps.Keys(p.PropertyFormat.Keys)) {
			children = append(children, p.PropertyFormat.Keys[k])
		}
	}
	for _, c := range children {
		if err := c.compile(); err != nil {
			return err
		}
	}
	return nil
}
