package schema

import (
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
)

// Prop is one node of a PVE JSON schema: a parameter, a key of a
// property-string format, a return value or one of its fields. It keeps
// only the facts JSONSchema.pm acts on; the JSON tags are the table's wire
// names, which mostly follow PVE's own.
type Prop struct {
	// Type is PVE's type name: string, integer, number, boolean, array,
	// object, null or any. Empty for alias keys, which have no type.
	Type     string `json:"type,omitempty"`
	Optional bool   `json:"optional,omitempty"`
	// Default is the schema's default as PVE would print it; nil when the
	// schema has none. Some defaults are descriptive text, as in PVE.
	Default *string  `json:"default,omitempty"`
	Enum    []string `json:"enum,omitempty"`
	// Minimum and Maximum keep the number's text, because PVE prints it
	// verbatim in "value must have a minimum value of <n>".
	Minimum   json.Number `json:"minimum,omitempty"`
	Maximum   json.Number `json:"maximum,omitempty"`
	MinLength *int        `json:"minLength,omitempty"`
	MaxLength *int        `json:"maxLength,omitempty"`
	// Pattern is the Perl regular expression as the schema has it,
	// e.g. "(?^:[a-zA-Z0-9_; ]+)". PVE matches it as m/^$pattern$/.
	Pattern string `json:"pattern,omitempty"`
	// Format is a named format such as "pve-storage-id" or
	// "pve-configid-list"; see verifier.go.
	Format string `json:"format,omitempty"`
	// PropertyFormat is set when the value is a property string whose
	// format PVE inlines in its dump (mp[n], rootfs, net[n], features…).
	PropertyFormat *Format `json:"property_format,omitempty"`
	// Requires names a property that must be present when this one is.
	Requires string `json:"requires,omitempty"`
	Items    *Prop  `json:"items,omitempty"`
	// Properties of an object; indexed names appear as "mp[n]".
	Properties map[string]*Prop `json:"properties,omitempty"`
	// AdditionalProperties is nil when the schema leaves it unset, which
	// JSONSchema.pm treats as "allowed".
	AdditionalProperties *bool `json:"additionalProperties,omitempty"`
	AdditionalSchema     *Prop `json:"additionalSchema,omitempty"`
	// IndexCount is set on indexed properties ("mp[n]"): the names run
	// from mp0 to mp<IndexCount-1>, as PVE's config code defines them.
	IndexCount int `json:"index_count,omitempty"`

	// Property-string keys only.
	DefaultKey bool   `json:"default_key,omitempty"`
	Alias      string `json:"alias,omitempty"`
	KeyAlias   string `json:"keyAlias,omitempty"`

	// Typed variants (HA rules, SDN fabrics).
	TypeProperty  string   `json:"type-property,omitempty"`
	InstanceTypes []string `json:"instance-types,omitempty"`
	OneOf         []*Prop  `json:"oneOf,omitempty"`

	re *regexp.Regexp // Pattern, compiled at Load
}

// Property returns the schema of the named property of an object,
// resolving indexed names: "mp3" finds "mp[n]" when 3 < IndexCount.
// An exact name wins over an indexed one ("efidisk0" is not "efidisk[n]").
func (p *Prop) Property(name string) (key string, prop *Prop) {
	if p == nil {
		return "", nil
	}
	return lookupProperty(p.Properties, name)
}

func lookupProperty(props map[string]*Prop, name string) (string, *Prop) {
	if q, ok := props[name]; ok && q.IndexCount == 0 {
		return name, q
	}
	base, idx, ok := splitIndexed(name)
	if !ok {
		return "", nil
	}
	key := base + "[n]"
	q, found := props[key]
	if !found || idx >= q.IndexCount {
		return "", nil
	}
	return key, q
}

// splitIndexed splits "mp12" into ("mp", 12). Like PVE's config keys it
// accepts no leading zeros: "mp01" is not a name PVE defines.
func splitIndexed(name string) (string, int, bool) {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	base, digits := name[:i], name[i:]
	if base == "" || digits == "" || len(digits) > 4 || (len(digits) > 1 && digits[0] == '0') {
		return "", 0, false
	}
	for _, c := range base {
		if c < 'a' || c > 'z' {
			return "", 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return "", 0, false
	}
	return base, n, true
}

// Format is a property-string format: the keys a value like
// "local-lvm:8,mp=/data,backup=1" may carry, each with its own schema.
type Format struct {
	Keys map[string]*Prop
}

// MarshalJSON writes the format as the plain key map PVE's dump uses.
func (f *Format) MarshalJSON() ([]byte, error) { return json.Marshal(f.Keys) }

// UnmarshalJSON reads the plain key map.
func (f *Format) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &f.Keys) }

// DefaultKey names the key a bare value (no "key=") is stored under, or ""
// when the format has none.
func (f *Format) DefaultKey() string {
	for _, k := range f.keyNames() {
		if f.Keys[k].DefaultKey {
			return k
		}
	}
	return ""
}

func (f *Format) keyNames() []string {
	names := make([]string, 0, len(f.Keys))
	for k := range f.Keys {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
