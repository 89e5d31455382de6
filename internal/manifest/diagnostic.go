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

// MaxProblems is how many problems a *Diagnostics holds (issue 27): a
// manifest with tens of thousands of mistakes reports the first
// MaxProblems by position and counts the rest, so neither the messages
// nor the output grow with them.
const MaxProblems = 100

// Diagnostics is the error Parse and Load return for a manifest that is
// not valid: the problems found, sorted by position, at most MaxProblems
// of them. Callers that want to render the problems themselves use
// errors.As to get at Items and More.
type Diagnostics struct {
	Items []Diagnostic
	// More counts the problems found past the first MaxProblems.
	More int
}

// Error lists the problems, one per line, and a last line with how many
// more there are when More is not zero.
func (d *Diagnostics) Error() string {
	lines := make([]string, len(d.Items), len(d.Items)+1)
	for i, it := range d.Items {
		lines[i] = it.String()
	}
	if m := d.MoreLine(); m != "" {
		lines = append(lines, m)
	}
	return strings.Join(lines, "\n")
}

// MoreLine is the line that ends the list when problems were left out,
// or "".
func (d *Diagnostics) MoreLine() string {
	if d.More == 0 {
		return ""
	}
	return fmt.Sprintf("… and %d more problems (fix these, then run corral validate again for the rest)", d.More)
}

// add records a problem at the position of a YAML node. Once twice
// MaxProblems are held it keeps the first MaxProblems by position and
// counts the others in More, so memory stays bounded however many
// problems a manifest has.
func (d *Diagnostics) add(pos Pos, path, msg, allowed string) {
	if d.skip(pos) {
		return
	}
	d.Items = append(d.Items, Diagnostic{Pos: pos, Path: path, Message: msg, Allowed: allowed})
	if len(d.Items) >= 2*MaxProblems {
		d.trim()
	}
}

// skip counts a problem at pos in More and says true when it falls after
// every problem kept so far and MaxProblems are already kept, so a caller
// can skip building an expensive message that would be dropped.
func (d *Diagnostics) skip(pos Pos) bool {
	if d.More == 0 || len(d.Items) < MaxProblems {
		return false
	}
	last := d.Items[MaxProblems-1].Pos
	if pos.Line > last.Line || pos.Line == last.Line && pos.Col > last.Col {
		d.More++
		return true
	}
	return false
}

// trim sorts the problems and keeps the first MaxProblems.
func (d *Diagnostics) trim() {
	d.sort()
	if n := len(d.Items) - MaxProblems; n > 0 {
		d.More += n
		clear(d.Items[MaxProblems:])
		d.Items = d.Items[:MaxProblems]
	}
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
	d.trim()
	return d
}
