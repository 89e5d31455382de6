package ui

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Table is corral's one table form, used by every command that lists
// things: a header row in capitals, then one row per thing, columns
// aligned and two spaces apart.
type Table struct{ tw *tabwriter.Writer }

// NewTable starts a table on w with its header row.
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.Row(header...)
	return t
}

// Row adds a row; cells are written as given (Dash marks an empty one).
func (t *Table) Row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// Flush writes the aligned table out.
func (t *Table) Flush() error { return t.tw.Flush() }

// Dash is s, or "-" when s is blank: how a table shows a missing value.
func Dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
