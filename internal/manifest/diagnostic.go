package manifest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Pos is a position in a manifest file. Line and Col are 1-based; Col is 0
// when only the line is known (YAML syntax errors).
type Pos struct {
	File string
	Line int
	Col  int
}

// String formats the position as FILE:LINE:COL, or FILE:LINE without a
// column, as compilers and editors expect.
func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Diagnostic is one problem found in a manifest.
type Diagnostic struct {
	Pos Pos
	// Path names the offending value, like apps[0].volumes[1].size; it is
	// empty for problems with the file as a whole (YAML syntax).
	Path string
	// Message says what is wrong. It never holds a value that came from a
	// ${…} reference, nor a password.
	Message string
	// Allowed, when set, says what would be accepted.
	Allowed string
}

// String formats the diagnostic as
// "FILE:LINE:COL: PATH: MESSAGE (allowed: ALLOWED)".
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.Pos.String())
	b.WriteString(": ")
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	if d.Allowed != "" {
		b.WriteString(" (allowed: ")
		b.WriteString(d.Allowed)
		b.WriteString(")")
	}
	return b.String()
}

// Diagnostics is the error Parse and Load return for a manifest that is
// not valid: every problem found, sorted by position. Callers that want to
// render the problems themselves use errors.As to get at Items.
type Diagnostics struct {
	Items []Diagnostic
}

// Error lists the problems, one per line.
func (d *Diagnostics) Error() string {
	lines := make([]string, len(d.Items))
	for i, it := range d.Items {
		lines[i] = it.String()
	}
	return strings.Join(lines, "\n")
}

// add records a problem at the position of a YAML node.
func (d *Diagnostics) add(pos Pos, path, msg, allowed string) {
	d.Items = append(d.Items, Diagnostic{Pos: pos, Path: path, Message: msg, Allowed: allowed})
}

// sort orders the problems by position, then path, and drops exact
// duplicates (an aliased YAML node can be visited twice under one path).
func (d *Diagnostics) sort() {
	slices.SortStableFunc(d.Items, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
			strings.Compare(a.Path, b.Path),
			strings.Compare(a.Message, b.Message),
		)
	})
	d.Items = slices.Compact(d.Items)
}

// err returns d as an error, or nil when there are no problems.
func (d *Diagnostics) err() error {
	if len(d.Items) == 0 {
		return nil
	}
	d.sort()
	return d
}
