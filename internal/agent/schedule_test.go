package agent

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/corralhq/corral/internal/apply"
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

func TestTakenIn(t *testing.T) {
	day := time.Date(2026, 11, 24, 3, 30, 0, 0, time.UTC)
	w := Window{Start: day, End: day.Add(24 * time.Hour)}
	archives := []apply.Archive{
		{App: "web", VolID: "before", Corral: true, Time: day.Add(-time.Second)},
		{App: "web", VolID: "foreign", Corral: false, Time: day.Add(time.Hour)},
		{App: "db", VolID: "other-app", Corral: true, Time: day.Add(time.Hour)},
		{App: "web", VolID: "first", Corral: true, Time: day},
		{App: "web", VolID: "newest", Corral: true, Time: day.Add(2 * time.Hour)},
		{App: "web", VolID: "next-window", Corral: true, Time: w.End},
	}
	got, ok := TakenIn(archives, "web", w)
	if !ok || got.VolID != "newest" {
		t.Errorf("TakenIn(web) = %q, %v; want newest, true", got.VolID, ok)
	}
	if got, ok := TakenIn(archives[:3], "web", w); ok {
		t.Errorf("TakenIn without corral archives of web in the window = %q, want none", got.VolID)
	}
}
