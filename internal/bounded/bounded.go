// Package bounded checks JSON from outside (PVE's answers, the agent's
// API, request bodies to the emulator) against limits of size, depth and
// value count before encoding/json allocates for it (issue 27). The check
// scans the raw bytes once and builds nothing, so what it refuses costs
// no more memory than the bytes already read. It imports nothing of
// corral's, so any package may use it. The manifest's YAML has its own
// scan (manifest's checkBounds), since YAML's block structure and quoting
// differ from JSON's.
package bounded

import "fmt"

// Limits bound one JSON input. A zero field is no limit.
type Limits struct {
	// Size bounds the input in bytes.
	Size int
	// Depth bounds the nesting of arrays and objects.
	Depth int
	// Values bounds the array elements and object members, counted as
	// the commas and the opening brackets outside strings.
	Values int
}

// Error says which limit an input crossed and where.
type Error struct {
	// Limit is "size", "depth" or "values".
	Limit string
	// Max is the limit's value.
	Max int
	// Offset is the byte offset where the limit fired.
	Offset int
}

func (e *Error) Error() string {
	switch e.Limit {
	case "size":
		return fmt.Sprintf("more than %d bytes", e.Max)
	case "depth":
		return fmt.Sprintf("nested more than %d levels deep at byte %d", e.Max, e.Offset)
	}
	return fmt.Sprintf("more than %d values at byte %d", e.Max, e.Offset)
}

// JSON checks data, a JSON text, against l without decoding it. Brackets
// and commas inside strings do not count; a closing bracket never takes
// the depth below zero, so stray closers cannot buy depth back. It does
// not check that data is valid JSON: the decoder does that, within the
// limits.
func JSON(data []byte, l Limits) error {
	if l.Size > 0 && len(data) > l.Size {
		return &Error{Limit: "size", Max: l.Size, Offset: l.Size}
	}
	depth, values := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			// Skip the string: to the next quote not escaped.
			for i++; i < len(data); i++ {
				if data[i] == '\\' {
					i++
				} else if data[i] == '"' {
					break
				}
			}
		case '[', '{':
			if depth++; l.Depth > 0 && depth > l.Depth {
				return &Error{Limit: "depth", Max: l.Depth, Offset: i}
			}
			if values++; l.Values > 0 && values > l.Values {
				return &Error{Limit: "values", Max: l.Values, Offset: i}
			}
		case ']', '}':
			depth = max(depth-1, 0)
		case ',':
			if values++; l.Values > 0 && values > l.Values {
				return &Error{Limit: "values", Max: l.Values, Offset: i}
			}
		}
	}
	return nil
}
