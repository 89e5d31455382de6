package sim

import (
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// clusterTasksPerNode is how many tasks each node broadcasts: its running
// ones and then its newest finished ones up to 25 in all
// (RESTEnvironment::active_workers, $MAX_FINISHED).
const clusterTasksPerNode = 25

// getClusterTasks is GET /cluster/tasks (pve-manager API2/Cluster.pm
// tasks): the task lists the nodes broadcast, node by node, each its
// running tasks (oldest first, as the active file keeps them) and then
// its finished ones, newest first, with their end time and status. PVE
// drops pstart from all of them and pid from the finished ones, and
// splits a token's user into user and tokenid. Sys.Audit on / sees every
// task; anyone else the tasks whose user is exactly theirs, so a token
// (whose own id names the token) sees none. PVE's list lags by up to
// pvestatd's 10 s; the emulator's is current.
func (a *taskAPI) getClusterTasks(r *request) (any, error) {
	all := a.cluster.HasPriv(r.auth, "/", "Sys.Audit")
	byNode := map[string][]model.Task{}
	for _, t := range a.cluster.Tasks("") { // newest first
		byNode[t.Node] = append(byNode[t.Node], t)
	}
	rows := []map[string]any{}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		for _, t := range broadcastTasks(byNode[node]) {
			if all || t.User == r.auth.ID() {
				rows = append(rows, clusterTaskRow(t))
			}
		}
	}
	return rows, nil
}

// broadcastTasks is a node's broadcast list from its tasks, newest first.
func broadcastTasks(tasks []model.Task) []model.Task {
	var running, finished []model.Task
	for _, t := range tasks {
		if t.Status == "running" {
			running = append(running, t)
		} else {
			finished = append(finished, t)
		}
	}
	slices.Reverse(running)
	out := running
	for _, t := range finished {
		if len(out) >= clusterTasksPerNode {
			break
		}
		out = append(out, t)
	}
	return out
}

// clusterTaskRow is a task as the broadcast list holds it: the UPID's
// fields and, once finished, "saved", the end time and the status (as
// read back from the active file, saved is a string there).
func clusterTaskRow(t model.Task) map[string]any {
	row := map[string]any{"upid": t.UPID, "node": t.Node, "starttime": t.StartTime,
		"type": t.Type, "id": t.ID, "user": t.User}
	if t.TokenID != "" {
		row["tokenid"] = t.TokenID
	}
	if t.Status == "running" {
		row["pid"], row["saved"] = t.PID, "0"
		return row
	}
	row["saved"], row["endtime"], row["status"] = "1", t.EndTime, strings.TrimSpace(t.ExitStatus)
	return row
}
