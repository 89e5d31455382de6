package bench

import "strings"

// Kinds splits a step's requests by what they cost the node (issue 30):
// task polls (a task's status or log, or a node's task list: the reads a
// client makes only to learn when a task ended), the other reads, and
// writes (every POST, PUT and DELETE: the changes themselves and the
// tasks they start). A client that polls well spends few of the first.
type Kinds struct {
	Polls  int `json:"polls"`
	Reads  int `json:"reads"`
	Writes int `json:"writes"`
}

// kindsOf sorts byEndpoint ("METHOD /schema/path" → count) into Kinds.
func kindsOf(byEndpoint map[string]int) Kinds {
	var k Kinds
	for ep, n := range byEndpoint {
		method, path, _ := strings.Cut(ep, " ")
		switch {
		case method != "GET":
			k.Writes += n
		case isTaskPoll(path):
			k.Polls += n
		default:
			k.Reads += n
		}
	}
	return k
}

// isTaskPoll recognises GET /nodes/{node}/tasks and everything under it.
func isTaskPoll(path string) bool {
	rest, ok := strings.CutPrefix(path, "/nodes/")
	if !ok {
		return false
	}
	_, rest, _ = strings.Cut(rest, "/")
	return rest == "tasks" || strings.HasPrefix(rest, "tasks/")
}
