package pve_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/pve"
)

// nodeTasks serves tasks of one node that end at given times (real
// clock), counting status and list reads.
type nodeTasks struct {
	mu             sync.Mutex
	end            map[string]time.Time
	status, listed int
}

func (f *nodeTasks) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api2/json/nodes/{node}/tasks/{upid}/status", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.status++
		upid := r.PathValue("upid")
		st := map[string]any{"upid": upid, "node": "pve", "status": "running", "type": "vzcreate"}
		if !time.Now().Before(f.end[upid]) {
			st["status"], st["exitstatus"] = "stopped", "OK"
		}
		writeData(w, st)
	})
	mux.HandleFunc("GET /api2/json/nodes/{node}/tasks", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.listed++
		if r.URL.Query().Get("source") != "active" {
			http.Error(w, "want source=active", http.StatusBadRequest)
			return
		}
		// As pve-manager's node_tasks: a running task has status
		// RUNNING and an endtime of now; one that ended shows its exit
		// status until it is archived.
		rows := []map[string]any{}
		for upid, end := range f.end {
			row := map[string]any{"upid": upid, "node": "pve", "type": "vzcreate", "status": "OK", "endtime": end.Unix()}
			if time.Now().Before(end) {
				row["status"], row["endtime"] = "RUNNING", time.Now().Unix()
			}
			rows = append(rows, row)
		}
		writeData(w, rows)
	})
	return mux
}

// Ten vzcreates waited for at once on one node share their halfway
// reads: one GET of the node's running tasks answers "still running?"
// for all of them, instead of a status read each (issue 30). A task the
// list no longer shows is read alone and its end seen. At time scale
// 0.1 a vzcreate is expected to take 1.1 s; half of these end at 0.3 s,
// before the halfway read, half at 1.1 s.
func TestWaitTaskSharesANodesListReads(t *testing.T) {
	f := &nodeTasks{end: map[string]time.Time{}}
	scale := 0.1
	c := newTestClient(t, f.handler(), func(cfg *pve.Config) { cfg.TaskTimeScale = &scale })
	start := time.Now()
	var upids []string
	for i := range 10 {
		upid := fmt.Sprintf("UPID:pve:%08X:0151D001:69F479DC:vzcreate:%d:ctl@pve!ctl:", 0x3A2F0+i, 101+i)
		run := 1100 * time.Millisecond
		if i%2 == 0 {
			run = 300 * time.Millisecond
		}
		f.end[upid] = start.Add(run)
		upids = append(upids, upid)
	}
	var wg sync.WaitGroup
	seen := make([]time.Duration, len(upids))
	for i, upid := range upids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.WaitTask(ctx(t), upid, pve.WaitOptions{}); err != nil {
				t.Errorf("WaitTask %s: %v", upid, err)
			}
			seen[i] = time.Since(start)
		}()
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Logf("%d status reads, %d list reads; ends seen at %v", f.status, f.listed, seen)
	for i, upid := range upids {
		if seen[i] < f.end[upid].Sub(start) {
			t.Errorf("task %d seen ended at %v, before its end at %v", i, seen[i], f.end[upid].Sub(start))
		}
	}
	// Alone: 3 status reads each (10 ms in, halfway, the expected end)
	// but the early ones' last, 25 in all. Shared: the halfway reads of
	// the tasks still running come from a few list reads.
	if f.listed > 4 || f.status > 21 {
		t.Errorf("%d status reads and %d list reads for 10 tasks, want at most 21 and 4", f.status, f.listed)
	}
	if f.listed == 0 {
		t.Errorf("no list read: the waits did not share their halfway reads")
	}
}
