package lazyre

import (
	"strings"
	"testing"
)

// TestMemoBounded: the memo holds at most memoSize subjects, none longer
// than memoLen, and answers for them as the match did.
func TestMemoBounded(t *testing.T) {
	r := New(`^a+$`)
	for i := range 3 * memoSize {
		r.MatchString(strings.Repeat("a", i%(2*memoLen)+1) + strings.Repeat("b", i/(2*memoLen)))
	}
	n := 0
	r.memo.Range(func(k, v any) bool {
		n++
		s := k.(string)
		if len(s) > memoLen {
			t.Errorf("remembered %d bytes, more than %d", len(s), memoLen)
		}
		if want := strings.Trim(s, "a") == ""; v.(bool) != want {
			t.Errorf("remembered %q -> %v, want %v", s, v, want)
		}
		return true
	})
	if n == 0 || n > memoSize {
		t.Errorf("the memo holds %d subjects, want 1 to %d", n, memoSize)
	}
}
