package manifest

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
)

// Secret holds a sensitive value, such as the root password. Every way of
// printing it (fmt verbs, JSON, YAML, slog) shows where the value came
// from, ${env:NAME} or ${file:PATH}, or "(sensitive)" for a value written
// in the manifest itself; only Reveal returns the value.
//
// The value sits behind a pointer so that even a Secret inside an
// unexported struct field, which fmt prints without calling methods, shows
// an address rather than the value.
type Secret struct {
	ref   string  // "${env:NAME}" / "${file:PATH}", "" for a literal
	value *string // nil for the zero Secret
}

// hidden is what a literal secret prints as.
const hidden = "(sensitive)"

// NewSecret wraps value; ref says where it came from ("${env:NAME}"), or is
// empty for a literal.
func NewSecret(ref, value string) Secret {
	return Secret{ref: ref, value: &value}
}

// Reveal returns the value. Call it only where the value is sent to PVE.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

// IsZero reports whether no secret was given.
func (s Secret) IsZero() bool { return s.value == nil }

// Ref is the reference the value was read through ("${env:ROOT_PW}"), or
// "" for a literal.
func (s Secret) Ref() string { return s.ref }

// Equal compares reference and value; go-cmp uses it, so tests can compare
// Apps with cmp.Diff.
func (s Secret) Equal(o Secret) bool {
	return s.ref == o.ref && s.IsZero() == o.IsZero() && s.Reveal() == o.Reveal()
}

// String returns the reference, "(sensitive)" for a literal, or "" for the
// zero Secret. It never returns the value.
func (s Secret) String() string {
	switch {
	case s.value == nil:
		return ""
	case s.ref != "":
		return s.ref
	}
	return hidden
}

// Format makes every fmt verb (%v %+v %#v %s %q %x …) print String.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		io.WriteString(f, strconv.Quote(s.String()))
		return
	}
	io.WriteString(f, s.String())
}

// MarshalJSON encodes String as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML encodes String (gopkg.in/yaml.v3 Marshaler).
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// LogValue makes log/slog print String.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

var (
	_ fmt.Formatter  = Secret{}
	_ fmt.Stringer   = Secret{}
	_ json.Marshaler = Secret{}
	_ slog.LogValuer = Secret{}
)
