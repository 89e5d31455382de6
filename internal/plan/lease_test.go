package plan

import (
	"testing"
	"time"
)

// TestLeaseLifeRoundTrip: the life a keeper's create writes with its
// lease survives the Notes (whole seconds), a lease without one reads
// back without one, and an older corral's line (no life) still parses.
func TestLeaseLifeRoundTrip(t *testing.T) {
	since := time.Unix(1_800_000_000, 0)
	for _, life := range []time.Duration{0, 2 * time.Second, 2 * time.Minute} {
		in := Lease{ID: "ab12", Holder: "ops@host:42", Command: "apply", Since: since, Until: since.Add(time.Minute), Life: life}
		got := ParseLease(KeeperNotes{Lease: &in}.Render())
		if got == nil || *got != in {
			t.Errorf("life %s: read back %+v, want %+v", life, got, in)
		}
	}
	old := ParseLease("corral-lock: ab12 holder=ops@host:42 cmd=apply since=1800000000 until=1800000060\n")
	if old == nil || old.Life != 0 || !old.Until.Equal(since.Add(time.Minute)) {
		t.Errorf("a lease line without life read as %+v", old)
	}
}
