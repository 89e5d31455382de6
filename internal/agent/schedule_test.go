package agent

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func TestWindowAt(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		spec, now, start, end string
	}{
		{"30 3 * * *", "2026-11-24T10:00:00Z", "2026-11-24T03:30:00Z", "2026-11-25T03:30:00Z"},
		{"30 3 * * *", "2026-11-24T03:30:00Z", "2026-11-24T03:30:00Z", "2026-11-25T03:30:00Z"},
		{"30 3 * * *", "2026-11-24T03:29:59Z", "2026-11-23T03:30:00Z", "2026-11-24T03:30:00Z"},
		{"@every 6h", "2026-11-24T10:00:00Z", "2026-11-24T06:00:00Z", "2026-11-24T12:00:00Z"},
		{"@every 6h", "2026-11-24T12:00:00Z", "2026-11-24T12:00:00Z", "2026-11-24T18:00:00Z"},
		{"0 0 1 1 *", "2026-11-24T10:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"0 4 * * 0", "2026-11-24T10:00:00Z", "2026-11-22T04:00:00Z", "2026-11-29T04:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.spec+"@"+tt.now, func(t *testing.T) {
			sched, err := cron.ParseStandard(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			w, err := WindowAt(sched, at(tt.now))
			if err != nil {
				t.Fatal(err)
			}
			if !w.Start.Equal(at(tt.start)) || !w.End.Equal(at(tt.end)) {
				t.Errorf("window = [%s, %s), want [%s, %s)", w.Start, w.End, tt.start, tt.end)
			}
			if !w.Contains(at(tt.now)) || w.Contains(w.End) || !w.Contains(w.Start) {
				t.Errorf("Contains wrong at the edges of %v", w)
			}
		})
	}
}
