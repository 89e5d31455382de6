package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCheckListen(t *testing.T) {
	tests := []struct {
		listen, token string
		ok            bool
	}{
		{"127.0.0.1:9120", "", true},
		{"127.0.0.2:0", "", true},
		{"[::1]:9120", "", true},
		{"localhost:9120", "", true},
		{"0.0.0.0:9120", "", false},
		{":9120", "", false},
		{"[::]:9120", "", false},
		{"192.168.1.5:9120", "", false},
		{"pve.example:9120", "", false},
		{"0.0.0.0:9120", "s3cret", true},
		{"nonsense", "", false},
		{"nonsense", "s3cret", false},
	}
	for _, tt := range tests {
		err := CheckListen(tt.listen, tt.token)
		if (err == nil) != tt.ok {
			t.Errorf("CheckListen(%q, token %v) = %v, want ok %v", tt.listen, tt.token != "", err, tt.ok)
		}
	}
}

// Events keeps the newest max events, newest first, numbered in order.
func TestEventsRing(t *testing.T) {
	e := NewEvents(3, nil)
	for i := 1; i <= 5; i++ {
		e.Add(Event{Time: time.Unix(int64(i), 0), Kind: KindHealth, Level: "info", Message: fmt.Sprint(i)})
	}
	got := e.List()
	if len(got) != 3 || got[0].Message != "5" || got[2].Message != "3" || got[0].Seq != 5 {
		t.Errorf("List() = %+v, want events 5, 4, 3", got)
	}
}

// TestPage: the status page's template, parsed at its first use, parses
// and renders an empty status (the cli tests render a full one).
func TestPage(t *testing.T) {
	var b strings.Builder
	if err := page().Execute(&b, map[string]any{"S": Status{}, "Events": []Event(nil)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "</html>") {
		t.Errorf("the page rendered no document:\n%s", b.String())
	}
}
