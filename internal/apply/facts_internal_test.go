package apply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/plan"
)

// TestForEachApp_factOrder: a change whose guest work reads another
// app's facts (Change.After) starts only once that app's change is
// finished, though the manifest lists it first and both could run at
// once; when that change fails, the dependent one is not made, and
// says why. Other changes do not wait.
func TestForEachApp_factOrder(t *testing.T) {
	changes := factOrdered([]plan.Change{{App: "web", After: []string{"db"}}, {App: "cache"}, {App: "db"}})
	if got := []string{changes[0].App, changes[1].App, changes[2].App}; !slices.Equal(got, []string{"db", "web", "cache"}) {
		t.Fatalf("factOrdered = %v, want db before web, cache after", got)
	}
	for _, dbFails := range []bool{false, true} {
		var mu sync.Mutex
		var events []string
		note := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, s)
		}
		e := &Executor{Parallelism: 10}
		err := e.forEachApp(context.Background(), changes, func(c plan.Change) error {
			note(c.App + " start")
			if c.App == "db" {
				// Long enough for web to start too, were it not held.
				time.Sleep(100 * time.Millisecond)
				note("db end")
				if dbFails {
					return errors.New("db: create failed")
				}
			}
			return nil
		})
		mu.Lock()
		got := slices.Clone(events)
		mu.Unlock()
		webAt, dbEnd := slices.Index(got, "web start"), slices.Index(got, "db end")
		switch {
		case dbFails && (webAt >= 0 || err == nil || !strings.Contains(err.Error(), "web: not changed: its provisioning reads facts of app db, whose change failed")):
			t.Errorf("db failed: events %v, error %v; want web not started and said so", got, err)
		case !dbFails && (err != nil || webAt < dbEnd):
			t.Errorf("events %v (error %v): web started before db's change ended", got, err)
		case !slices.Contains(got, "cache start"):
			t.Errorf("events %v: cache did not run", got)
		}
	}
}
