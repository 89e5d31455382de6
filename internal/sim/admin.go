package sim

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/sim/model"
)

// requestLog counts API requests per "METHOD /schema/path", for
// benchmarks (API calls per apply) and tests.
type requestLog struct {
	mu     sync.Mutex
	counts map[string]*EndpointStats
	total  int
}

// EndpointStats is one row of GET /_corral/requests.
type EndpointStats struct {
	Endpoint string        `json:"endpoint"`
	Count    int           `json:"count"`
	Errors   int           `json:"errors"`
	Time     time.Duration `json:"time_ns"`
}

func newRequestLog() *requestLog { return &requestLog{counts: map[string]*EndpointStats{}} }

// count records a request as it arrives.
func (l *requestLog) count(method, path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entry(method, path).Count++
	l.total++
}

// finish adds a request's time and outcome once it is answered.
func (l *requestLog) finish(method, path string, status int, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.counts[method+" "+path]
	if e == nil {
		return // the log was reset while the request ran
	}
	e.Time += d
	if status >= 400 || status == 0 {
		e.Errors++
	}
}

// entry is the row of method and path; l.mu must be held.
func (l *requestLog) entry(method, path string) *EndpointStats {
	key := method + " " + path
	e := l.counts[key]
	if e == nil {
		e = &EndpointStats{Endpoint: key}
		l.counts[key] = e
	}
	return e
}

// Requests returns the request counts per endpoint, sorted, and the total.
func (s *Server) Requests() ([]EndpointStats, int) {
	l := s.reqlog
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]EndpointStats, 0, len(l.counts))
	for _, e := range l.counts {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Endpoint < out[j].Endpoint })
	return out, l.total
}

// ResetRequests clears the request log.
func (s *Server) ResetRequests() {
	s.reqlog.mu.Lock()
	s.reqlog.counts = map[string]*EndpointStats{}
	s.reqlog.total = 0
	s.reqlog.mu.Unlock()
}

// SetFaults replaces the fault spec at run time.
func (s *Server) SetFaults(spec FaultSpec) { s.faults.set(spec) }

// serveAdmin is the test-control API under /_corral/ (not part of PVE):
//
//	GET  /_corral/requests        request counts per endpoint
//	POST /_corral/requests/reset  clear them
//	GET  /_corral/tasks           every task kept, with start and end to the nanosecond
//	GET  /_corral/faults          current fault spec
//	POST /_corral/faults          set it (JSON FaultSpec)
//	POST /_corral/lock            hold a CT lock: {"vmid":105,"lock":"backup","seconds":5}
//	POST /_corral/unlock          pct unlock on the node (any lock, e.g. a failed create's): {"vmid":105}
//	POST /_corral/node            take a node offline or back: {"node":"pve2","online":false},
//	                              "poweroff":true stops its guests, and its return then
//	                              starts those with onboot=1 unless "nostartall":true
//
// It is reachable only with the root password or root token, so tests can
// drive it but a corral token cannot.
func (s *Server) serveAdmin(w http.ResponseWriter, req *http.Request) {
	auth, err := s.authenticate(req)
	if err != nil {
		writeError(w, err)
		return
	}
	if auth.UserID != "root@pam" {
		writeError(w, model.PermError("the /_corral/ admin API is for root@pam only"))
		return
	}
	req.Body = http.MaxBytesReader(w, req.Body, 1<<20) // its JSON bodies are a few lines
	switch req.Method + " " + req.URL.Path {
	case "GET /_corral/requests":
		rows, total := s.Requests()
		writeData(w, map[string]any{"endpoints": rows, "total": total})
	case "POST /_corral/requests/reset":
		s.ResetRequests()
		writeData(w, nil)
	case "GET /_corral/tasks":
		writeData(w, s.TaskTimes())
	case "GET /_corral/faults":
		writeData(w, s.faults.get())
	case "POST /_corral/faults":
		var spec FaultSpec
		if err := json.NewDecoder(req.Body).Decode(&spec); err != nil {
			writeError(w, model.Failf("bad fault spec: %v\n", err))
			return
		}
		s.faults.set(spec)
		writeData(w, spec)
	case "POST /_corral/lock":
		var body struct {
			VMID    int     `json:"vmid"`
			Lock    string  `json:"lock"`
			Seconds float64 `json:"seconds"`
		}
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
			writeError(w, model.Failf("bad lock request: %v\n", err))
			return
		}
		if err := s.cluster.HoldLock(body.VMID, body.Lock, time.Duration(body.Seconds*float64(time.Second))); err != nil {
			writeError(w, err)
			return
		}
		writeData(w, "locked "+strconv.Itoa(body.VMID))
	case "POST /_corral/unlock":
		var body struct {
			VMID int `json:"vmid"`
		}
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil || body.VMID == 0 {
			writeError(w, model.Failf("bad unlock request: want {\"vmid\":105}\n"))
			return
		}
		if err := s.cluster.Unlock(body.VMID); err != nil {
			writeError(w, err)
			return
		}
		writeData(w, "unlocked "+strconv.Itoa(body.VMID))
	case "POST /_corral/node":
		var body struct {
			Node       string `json:"node"`
			Online     *bool  `json:"online"`
			PowerOff   bool   `json:"poweroff"`
			NoStartAll bool   `json:"nostartall"`
		}
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil || body.Online == nil {
			writeError(w, model.Failf("bad node request: want {\"node\":\"pve2\",\"online\":false}\n"))
			return
		}
		upids, err := s.cluster.SetNodePower(body.Node, *body.Online, model.NodePower{PowerOff: body.PowerOff, NoStartAll: body.NoStartAll})
		if err != nil {
			writeError(w, err)
			return
		}
		writeData(w, map[string]any{"node": body.Node, "online": *body.Online, "started": upids})
	default:
		writeError(w, &httpError{status: http.StatusNotFound, message: "no such admin endpoint\n"})
	}
}

// TaskTime is one row of GET /_corral/tasks: what a benchmark needs to
// build the critical path of the tasks a run caused. PVE's own task list
// gives start and end in whole seconds only.
type TaskTime struct {
	UPID       string        `json:"upid"`
	Node       string        `json:"node"`
	Type       string        `json:"type"`
	ID         string        `json:"id"`
	Status     string        `json:"status"`
	ExitStatus string        `json:"exitstatus,omitempty"`
	Began      int64         `json:"began_ns"`
	Ended      int64         `json:"ended_ns,omitempty"`
	Busy       time.Duration `json:"busy_ns"`
}

// TaskTimes lists the kept tasks, oldest first (what the admin API's
// task list answers).
func (s *Server) TaskTimes() []TaskTime {
	ts := s.cluster.Tasks("")
	out := make([]TaskTime, 0, len(ts))
	for i := len(ts) - 1; i >= 0; i-- {
		t := ts[i]
		out = append(out, TaskTime{UPID: t.UPID, Node: t.Node, Type: t.Type, ID: t.ID, Status: t.Status,
			ExitStatus: t.ExitStatus, Began: t.BeganNS, Ended: t.EndedNS, Busy: t.Busy})
	}
	return out
}
