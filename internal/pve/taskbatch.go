package pve

import (
	"context"
	"sync"
	"time"
)

// Reading many tasks of one node at once. When several waits of one
// node's tasks are in progress (ten containers created in parallel), a
// read that only asks "still running?" (the halfway read, the reads of a
// task past its expected end) is answered for all of them by one GET
// /nodes/{node}/tasks?source=active, the node's running tasks (and those
// just ended, with their exit status), instead of
// one status read each (issue 30). A task the list does not show as
// running (it ended, or the list shows it ended) is then read alone,
// which its exit status needs anyway; a wait whose read is due shares a
// list read that began at most its slack before (a quarter of the delay
// it waited, at most 1 s at Proxmox's durations, none after a delay
// under 1 s): the answer is a little older than its own read's would
// be, which only a task that ends early notices, seen that much later.

// taskLists shares the active task list reads of each node among the
// waits of that node's tasks. Safe for concurrent use.
type taskLists struct {
	mu    sync.Mutex
	nodes map[string]*nodeList
}

// nodeList is one node's waits and its latest list read.
type nodeList struct {
	waits  int       // waits of the node's tasks in progress
	latest *listRead // nil before the first
}

// listRead is one read of a node's running tasks.
type listRead struct {
	started time.Time
	done    chan struct{}   // closed when it ended; then:
	running map[string]bool // the UPIDs it showed running
	ok      bool            // it succeeded
}

// enter counts a wait of a task of node until the returned func is called.
func (l *taskLists) enter(node string) (leave func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nodes == nil {
		l.nodes = map[string]*nodeList{}
	}
	n := l.nodes[node]
	if n == nil {
		n = &nodeList{}
		l.nodes[node] = n
	}
	n.waits++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if n.waits--; n.waits == 0 && l.nodes[node] == n {
			delete(l.nodes, node)
		}
	}
}

// shared reports whether a list read of node's running tasks that began
// at after or later shows upid running. ok is false when the answer
// must come from upid's own status read: fewer than two waits on the
// node (a list read would cost as much), or the list read failed.
func (l *taskLists) shared(ctx context.Context, c *Client, node, upid string, after time.Time) (running, ok bool) {
	l.mu.Lock()
	n := l.nodes[node]
	if n == nil || n.waits < 2 {
		l.mu.Unlock()
		return false, false
	}
	r := n.latest
	if r == nil || r.started.Before(after) {
		r = &listRead{started: c.clock.now(), done: make(chan struct{})}
		n.latest = r
		l.mu.Unlock()
		list, err := c.TaskList(ctx, node, TaskFilter{Source: "active"})
		set := map[string]bool{}
		for _, t := range list {
			// pve-manager's node_tasks marks a task still running with
			// status RUNNING (and, to sort it, an endtime of now); an
			// ended one not yet archived has its exit status there.
			if t.Status == "RUNNING" {
				set[t.UPID] = true
			}
		}
		r.running, r.ok = set, err == nil
		close(r.done)
		return set[upid], r.ok
	}
	l.mu.Unlock()
	select {
	case <-r.done:
		return r.running[upid], r.ok
	case <-ctx.Done():
		return false, false
	}
}
