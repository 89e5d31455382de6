// Package bounded checks outside input against limits of size, depth,
// value count and line length before a decoder allocates for it (issue
// 27). Each check scans the raw bytes once and builds nothing, so what it
// refuses costs no more memory than the bytes already read. It imports
// nothing of corral's, so any package may use it.
package bounded

import (
	"bytes"
	"fmt"
)

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
	// Limit is "size", "depth", "values" or "line".
	Limit string
	// Max is the limit's value.
	Max int
	// Offset is the byte offset where the limit fired.
	Offset int
	// Line is the 1-based line where it fired (Lines only).
	Line int
}

func (e *Error) Error() string {
	switch e.Limit {
	case "size":
		return fmt.Sprintf("more than %d bytes", e.Max)
	case "depth":
		return fmt.Sprintf("nested more than %d levels deep at byte %d", e.Max, e.Offset)
	case "values":
		return fmt.Sprintf("more than %d values at byte %d", e.Max, e.Offset)
	}
	return fmt.Sprintf("line %d is longer than %d bytes", e.Line, e.Max)
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

// Lines checks that no line of data (a line break included in neither
// count: "\n" ends a line, a "\r" before it counts) is longer than max
// bytes.
func Lines(data []byte, max int) error {
	line, off := 1, 0
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n')
		if n < 0 {
			n = len(data)
		}
		if n > max {
			return &Error{Limit: "line", Max: max, Offset: off + max, Line: line}
		}
		if n == len(data) {
			break
		}
		data, off, line = data[n+1:], off+n+1, line+1
	}
	return nil
}
