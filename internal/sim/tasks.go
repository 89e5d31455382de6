package sim

import (
	"errors"
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// Task routes (pve-manager API2/Tasks.pm).

// canSeeTask is PVE's rule: a token sees its own tasks; a user sees its
// own and its tokens' tasks; Sys.Audit on /nodes/<node> sees all.
func (a *taskAPI) canSeeTask(r *request, t model.Task) bool {
	return (&taskFilter{a: a, r: r}).canSee(t)
}

// taskFilter is canSeeTask for the many tasks of one list: the caller's
// Sys.Audit on a node is looked up once per node, not once per task
// (a list of 2,000 tasks computed the caller's privileges 2,000 times).
type taskFilter struct {
	a     *taskAPI
	r     *request
	audit map[string]bool // node → Sys.Audit on /nodes/<node>
}

func (f *taskFilter) canSee(t model.Task) bool {
	owner := t.User
	if t.TokenID != "" {
		owner += "!" + t.TokenID
	}
	if owner == f.r.auth.ID() || f.r.auth.TokenID == "" && t.User == f.r.auth.UserID {
		return true
	}
	ok, known := f.audit[t.Node]
	if !known {
		ok = f.a.cluster.HasPriv(f.r.auth, "/nodes/"+t.Node, "Sys.Audit")
		if f.audit == nil {
			f.audit = map[string]bool{}
		}
		f.audit[t.Node] = ok
	}
	return ok
}

// getTasks is Tasks.pm node_tasks: source "archive" (the default) lists
// finished tasks, "active" the running ones, "all" the running ones first
// and then the finished; filters as PVE applies them, total = all matches.
func (a *taskAPI) getTasks(r *request) (any, error) {
	start, limit := intParam(r, "start"), 50
	if _, ok := r.params["limit"]; ok {
		limit = intParam(r, "limit")
	}
	source := r.params["source"]
	if source == "" {
		source = "archive"
	}
	// statusfilter is ignored when errors is set, which drops only "ok".
	statuses := map[string]bool{"ok": true, "warning": true, "error": true, "unknown": true}
	if f, ok := r.params["statusfilter"]; ok && !boolParam(r, "errors") {
		statuses = map[string]bool{}
		for _, k := range splitList(f) {
			statuses[strings.ToLower(k)] = true
		}
	} else if boolParam(r, "errors") {
		statuses["ok"] = false
	}
	_, hasSince := r.params["since"]
	_, hasUntil := r.params["until"]
	all := a.cluster.Tasks(r.params["node"])
	var running, finished []model.Task
	for _, t := range all {
		if t.Status == "running" {
			running = append(running, t)
		} else {
			finished = append(finished, t)
		}
	}
	var candidates []model.Task
	if source == "active" || source == "all" {
		candidates = append(candidates, running...)
	}
	if source != "active" {
		candidates = append(candidates, finished...)
	}
	rows := []map[string]any{}
	total := 0
	visible := &taskFilter{a: a, r: r}
	for _, t := range candidates {
		if v := r.params["userfilter"]; v != "" && !strings.Contains(strings.ToLower(t.User), strings.ToLower(v)) {
			continue
		}
		if !visible.canSee(t) {
			continue
		}
		if v := r.params["typefilter"]; v != "" && t.Type != v {
			continue
		}
		if v := r.params["vmid"]; v != "" && t.ID != v {
			continue
		}
		if hasSince && t.StartTime < int64(intParam(r, "since")) || hasUntil && t.StartTime > int64(intParam(r, "until")) {
			continue
		}
		if !statuses[statusType(t)] {
			continue
		}
		total++
		if total <= start || len(rows) >= limit {
			continue
		}
		rows = append(rows, taskRow(t, false))
	}
	return pagedResult{data: rows, total: total}, nil
}

// statusType is PVE::Tools::upid_normalize_status_type; a running task
// has no status yet and counts as "unknown", as in PVE's filter.
func statusType(t model.Task) string {
	switch {
	case t.Status == "running" || t.ExitStatus == "" || t.ExitStatus == "unexpected status":
		return "unknown"
	case t.ExitStatus == "OK":
		return "ok"
	case strings.HasPrefix(t.ExitStatus, "WARNINGS: "):
		return "warning"
	}
	return "error"
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
	} else {
		row["status"] = "RUNNING" // node_tasks marks active tasks so
	}
	return row
}

func (a *taskAPI) taskFor(r *request) (model.Task, error) {
	upid := r.params["upid"]
	if !validUPID(upid) {
		return model.Task{}, model.ParamError(map[string]string{"upid": "unable to parse worker upid"})
	}
	t, err := a.cluster.Task(r.params["node"], upid)
	if err != nil {
		return model.Task{}, err
	}
	if !a.canSeeTask(r, t) {
		return model.Task{}, model.PermError("/nodes/" + t.Node + ", Sys.Audit")
	}
	return t, nil
}

// isNoSuchTask reports the model's parameter error {upid: "no such task"}.
func isNoSuchTask(err error) bool {
	var me *model.Error
	return errors.As(err, &me) && me.Kind == model.ErrParam && me.Params["upid"] == "no such task"
}

// validUPID checks the UPID shape (pve-common PVE::UPID::decode).
func validUPID(s string) bool {
	parts := strings.Split(s, ":")
	return len(parts) == 9 && parts[0] == "UPID" && parts[1] != "" && len(parts[2]) == 8 && len(parts[3]) == 8 && len(parts[4]) == 8 && parts[8] == ""
}

func (a *taskAPI) getTaskStatus(r *request) (any, error) {
	t, err := a.taskFor(r)
	if err != nil {
		return nil, err
	}
	return taskRow(t, true), nil
}

func (a *taskAPI) getTaskLog(r *request) (any, error) {
	t, err := a.taskFor(r)
	if isNoSuchTask(err) {
		// read_task_log does not look for the task: it checks the owner
		// the UPID names and dump_logfile reports the missing file.
		t = model.Task{Node: r.params["node"]}
		t.User, t.TokenID, _ = strings.Cut(strings.Split(r.params["upid"], ":")[7], "!")
		if !a.canSeeTask(r, t) {
			return nil, model.PermError("/nodes/" + t.Node + ", Sys.Audit")
		}
		return pagedResult{data: []map[string]any{{"n": 1, "t": "unable to open file - No such file or directory"}}, total: 1}, nil
	}
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
