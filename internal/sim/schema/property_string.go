package schema

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/pvesize"
)

// FormatError is what pve-common's parse_property_string dies with: either
// a parse failure ("invalid key in comma-separated list property: foo") or
// "format error" with a message per key path ("mp0.mp: property is missing
// and it is not optional"). As a parameter error PVE reports it as
// "invalid format - " followed by its text (fixtures/error-400-param.json).
type FormatError struct {
	// Msg is the first line, without its newline.
	Msg string
	// Errors are the per-key messages of a "format error", keyed by path.
	Errors map[string]string
}

func (e *FormatError) Error() string { return strings.TrimRight(e.text(), "\n") }

// text is PVE::Exception's stringification: the message line, then one
// "path: message" line per error. Perl lists them in hash order; here
// they are sorted.
func (e *FormatError) text() string {
	var b strings.Builder
	b.WriteString(e.Msg)
	b.WriteByte('\n')
	for _, k := range slices.Sorted(maps.Keys(e.Errors)) {
		b.WriteString(k + ": " + e.Errors[k] + "\n")
	}
	return b.String()
}

func formatDie(format string, args ...any) *FormatError {
	return &FormatError{Msg: fmt.Sprintf(format, args...)}
}

var (
	reBlankPart = mustPerl(`^\s*$`)
	reKeyValue  = mustPerl(`^([^=]+)=(.+)$`)
	reBoolTrue  = mustPerl(`^(?i:1|on|yes|true)$`)
	reBoolFalse = mustPerl(`^(?i:0|off|no|false)$`)
)

// ParseBoolean is JSONSchema.pm's parse_boolean: "1", "on", "yes", "true"
// (any case) give "1"; "0", "off", "no", "false" give "0".
func ParseBoolean(s string) (string, bool) {
	switch {
	case reBoolTrue.MatchString(s):
		return "1", true
	case reBoolFalse.MatchString(s):
		return "0", true
	}
	return "", false
}

// ParseProperty parses a property-string value of this parameter ("mp0",
// "rootfs", "net0", "features", …) the way PVE's parse_property_string
// does, and validates every key. Booleans come back as "1"/"0"; a
// keyAlias key is stored under its alias (qemu's "virtio=MAC" gives
// model=virtio, macaddr=MAC). Errors are *FormatError, their paths
// prefixed with the parameter's name ("mp0.mp").
func (p *Param) ParseProperty(value string) (map[string]string, error) {
	if p.PropertyFormat == nil {
		return nil, fmt.Errorf("parse %s: not a property-string parameter", p.Name)
	}
	return p.api.parsePropertyString(p.PropertyFormat, value, p.Name)
}

func (a *API) parsePropertyString(f *Format, data, path string) (map[string]string, error) {
	res := map[string]string{}
	defaultKey := ""
	for _, part := range perlSplit(data, ",") {
		if reBlankPart.MatchString(part) {
			continue
		}
		if m := reKeyValue.FindStringSubmatch(part); m != nil {
			k, v := m[1], m[2]
			if _, dup := res[k]; dup {
				return nil, formatDie("duplicate key in comma-separated list property: %s", k)
			}
			schema := f.Keys[k]
			if schema != nil && schema.Alias != "" {
				if ka := schema.KeyAlias; ka != "" {
					if _, dup := res[ka]; dup {
						return nil, formatDie("key alias '%s' is already defined", ka)
					}
					res[ka] = k
				}
				k = schema.Alias
				schema = f.Keys[k]
			}
			if schema == nil {
				return nil, formatDie("invalid key in comma-separated list property: %s", k)
			}
			if schema.Type == "boolean" {
				if b, ok := ParseBoolean(v); ok {
					v = b
				}
			}
			res[k] = v
			continue
		}
		if strings.Contains(part, "=") {
			return nil, formatDie("missing key in comma-separated list property")
		}
		if defaultKey != "" {
			return nil, formatDie("duplicate key in comma-separated list property: %s", defaultKey)
		}
		defaultKey = f.DefaultKey()
		if defaultKey == "" {
			return nil, formatDie("value without key, but schema does not define a default key")
		}
		if perlTruthy(res[defaultKey]) {
			return nil, formatDie("duplicate key in comma-separated list property: %s", defaultKey)
		}
		res[defaultKey] = part
	}
	v := &validation{api: a, errors: map[string]string{}}
	values := make(map[string]any, len(res))
	for k, s := range res {
		values[k] = s
	}
	no := false
	v.checkObject(path, f.Keys, values, &no, nil)
	if len(v.errors) > 0 {
		return nil, &FormatError{Msg: "format error", Errors: v.errors}
	}
	return res, nil
}

// PrintProperty prints a property string the way PVE normalizes it
// (print_property_string): the default key's bare value first, then the
// required keys, then the rest, each group sorted by name. disk-size
// values are printed with pvesize.Format ("8G"), as PVE does after parsing
// sizes to bytes. Pairs of a keyAlias and its alias print combined
// ("virtio=MAC"). kv is not validated; keys the format does not know are
// printed last as key=value.
func PrintProperty(f *Format, kv map[string]string) string {
	defaultKey := f.DefaultKey()
	keyAliases := map[string]string{} // keyAlias -> alias target
	for _, k := range f.keyNames() {
		if p := f.Keys[k]; p.Alias != "" && p.KeyAlias != "" {
			keyAliases[p.KeyAlias] = p.Alias
		}
	}
	var parts []string
	done := map[string]bool{}
	formatValue := func(key, value string) string {
		if p := f.Keys[key]; p != nil && p.Format == "disk-size" {
			if n, err := pvesize.Parse(value); err == nil {
				return pvesize.Format(n)
			}
		}
		return value
	}
	add := func(key string, isDefault bool) {
		if done[key] {
			return
		}
		done[key] = true
		value, ok := kv[key]
		if !ok {
			return
		}
		if combine := keyAliases[key]; combine != "" {
			if cv, ok := kv[combine]; ok {
				parts = append(parts, formatValue(key, value)+"="+formatValue(combine, cv))
				done[combine] = true
				return
			}
		}
		if isDefault {
			parts = append(parts, formatValue(key, value))
		} else {
			parts = append(parts, key+"="+formatValue(key, value))
		}
	}
	if defaultKey != "" {
		add(defaultKey, true)
	}
	keys := slices.Sorted(maps.Keys(kv))
	for _, k := range keys {
		if p := f.Keys[k]; p != nil && !p.Optional {
			add(k, false)
		}
	}
	for _, k := range keys {
		if f.Keys[k] != nil {
			add(k, false)
		}
	}
	for _, k := range keys {
		add(k, false)
	}
	return strings.Join(parts, ",")
}
