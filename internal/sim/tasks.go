package sim

import (
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// Task routes (pve-manager API2/Tasks.pm).

// canSeeTask is PVE's rule: a token sees its own tasks; a user sees its
// own and its tokens' tasks; Sys.Audit on /nodes/<node> sees all.
func (s *Server) canSeeTask(r *request, t model.Task) bool {
	owner := t.User
	if t.TokenID != "" {
		owner += "!" + t.TokenID
	}
	if owner == r.auth.ID() {
		return true
	}
	if r.auth.TokenID == "" && t.User == r.auth.UserID {
		return true
	}
	return s.cluster.HasPriv(r.auth, "/nodes/"+t.Node, "Sys.Audit")
}

func (s *Server) getTasks(r *request) (any, error) {
	start, limit := intParam(r, "start"), intParam(r, "limit")
	if limit == 0 {
		limit = 50
	}
	var rows []map[string]any
	for _, t := range s.cluster.Tasks(r.params["node"]) {
		if !s.canSeeTask(r, t) {
			continue
		}
		if v := r.params["vmid"]; v != "" && t.ID != v {
			continue
		}
		if v := r.params["typefilter"]; v != "" && t.Type != v {
			continue
		}
		if v := r.params["userfilter"]; v != "" && !strings.Contains(t.User, v) {
			continue
		}
		switch r.params["statusfilter"] {
		case "", "ok,error,unknown,warning":
		default:
			if !statusMatches(r.params["statusfilter"], t) {
				continue
			}
		}
		if r.params["source"] == "active" && t.Status != "running" {
			continue
		}
		if boolParam(r, "errors") && (t.Status == "running" || t.ExitStatus == "OK") {
			continue
		}
		rows = append(rows, taskRow(t, false))
	}
	total := len(rows)
	if start > len(rows) {
		start = len(rows)
	}
	end := min(start+limit, len(rows))
	page := rows[start:end]
	if page == nil {
		page = []map[string]any{}
	}
	return pagedResult{data: page, total: total}, nil
}

func statusMatches(filter string, t model.Task) bool {
	kind := "unknown"
	switch {
	case t.Status == "running":
		kind = "running"
	case t.ExitStatus == "OK":
		kind = "ok"
	case strings.HasPrefix(t.ExitStatus, "WARNINGS"):
		kind = "warning"
	default:
		kind = "error"
	}
	for _, f := range strings.Split(filter, ",") {
		if f == kind {
			return true
		}
	}
	return false
}

// taskRow renders a task as the list and status endpoints do; for a token
// the "user" is split into user and tokenid (fixtures task-status-*.json).
func taskRow(t model.Task, status bool) map[string]any {
	row := map[string]any{
		"upid": t.UPID, "node": t.Node, "pid": t.PID, "pstart": t.PStart, "starttime": t.StartTime,
		"type": t.Type, "id": t.ID, "user": t.User,
	}
	if t.TokenID != "" {
		row["tokenid"] = t.TokenID
	}
	if status {
		row["status"] = t.Status
		if t.Status == "stopped" {
			row["exitstatus"] = t.ExitStatus
		}
	} else if t.Status == "stopped" {
		row["status"] = t.ExitStatus
		row["endtime"] = t.EndTime
	}
	return row
}

func (s *Server) taskFor(r *request) (model.Task, error) {
	upid := r.params["upid"]
	if !validUPID(upid) {
		return model.Task{}, model.ParamError(map[string]string{"upid": "unable to parse worker upid"})
	}
	t, err := s.cluster.Task(r.params["node"], upid)
	if err != nil {
		return model.Task{}, err
	}
	if !s.canSeeTask(r, t) {
		return model.Task{}, model.PermError("/nodes/" + t.Node + ", Sys.Audit")
	}
	return t, nil
}

// validUPID checks the UPID shape (pve-common PVE::UPID::decode).
func validUPID(s string) bool {
	parts := strings.Split(s, ":")
	return len(parts) == 9 && parts[0] == "UPID" && parts[1] != "" && len(parts[2]) == 8 && len(parts[3]) == 8 && len(parts[4]) == 8 && parts[8] == ""
}

func (s *Server) getTaskStatus(r *request) (any, error) {
	t, err := s.taskFor(r)
	if err != nil {
		return nil, err
	}
	return taskRow(t, true), nil
}

func (s *Server) getTaskLog(r *request) (any, error) {
	t, err := s.taskFor(r)
	if err != nil {
		return nil, err
	}
	start := intParam(r, "start")
	limit := 50
	if _, ok := r.params["limit"]; ok {
		limit = intParam(r, "limit")
	}
	lines := []map[string]any{}
	for i := start; i < len(t.Log) && (limit == 0 || i < start+limit); i++ {
		lines = append(lines, map[string]any{"n": i + 1, "t": t.Log[i]})
	}
	return pagedResult{data: lines, total: len(t.Log)}, nil
}
