package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// User-facing text states facts; it never cites corral's internal notes
// (seed files, behaviour.md sections), which users do not have (issue 16,
// item 9). Every command's help is checked.
func TestHelpCitesNoInternalNotes(t *testing.T) {
	t.Parallel()
	internal := regexp.MustCompile(`seed \d{3}|behaviour\.md|§`)
	var out, errb bytes.Buffer
	root := newRoot(context.Background(), &streams{in: strings.NewReader(""), out: &out, err: &errb})
	for _, c := range root.Commands() {
		for _, sub := range append(c.Commands(), c) {
			out.Reset()
			args := []string{c.Name(), "--help"}
			if sub != c {
				args = []string{c.Name(), sub.Name(), "--help"}
			}
			Run(context.Background(), args, strings.NewReader(""), &out, &errb)
			if m := internal.FindString(out.String()); m != "" {
				t.Errorf("corral %s cites %q:\n%s", strings.Join(args, " "), m, out.String())
			}
		}
	}
}
