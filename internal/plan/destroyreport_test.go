package plan

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// TestProblems: a refusal's problems, also when wrapped; nil for any
// other error and for none.
func TestProblems(t *testing.T) {
	r := &RefusedError{Problems: []string{"a", "b"}}
	for _, tt := range []struct {
		err  error
		want []string
	}{
		{r, []string{"a", "b"}},
		{fmt.Errorf("plan: %w", r), []string{"a", "b"}},
		{errors.New("other"), nil},
		{nil, nil},
	} {
		if got := Problems(tt.err); !slices.Equal(got, tt.want) {
			t.Errorf("Problems(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestDestroyedAndLeftOut: Destroyed lists the containers a destroy
// removes (not a keeper's change without one), never nil; NoteLeftOut
// names the declared apps with containers that names leave out.
func TestDestroyedAndLeftOut(t *testing.T) {
	p := &Plan{Changes: []Change{{App: "a", Action: Delete, OldVMID: 101}, {App: "b", Action: Delete}, {App: "c", Action: NoOp, OldVMID: 103}}}
	if got := p.Destroyed(); !slices.Equal(got, []int{101}) {
		t.Errorf("Destroyed = %v, want [101]", got)
	}
	if got := (&Plan{}).Destroyed(); got == nil || len(got) != 0 {
		t.Errorf("Destroyed of an empty plan = %#v, want []", got)
	}
	f := &manifest.File{Apps: []manifest.App{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	obs := &Observed{Apps: map[string][]*CT{"a": {{VMID: 101}}, "b": {{VMID: 102}, {VMID: 104}}}}
	p.NoteLeftOut(f, obs, []string{"a"})
	if !slices.Equal(p.Targets, []string{"a"}) || !slices.Equal(p.LeftOut, []string{"b"}) || p.LeftOutChanges != 2 {
		t.Errorf("NoteLeftOut: targets %q, left out %q (%d changes); want [a], [b] (2)", p.Targets, p.LeftOut, p.LeftOutChanges)
	}
	var none *Plan
	none.NoteLeftOut(f, obs, []string{"a"}) // a refused plan may be nil
}
