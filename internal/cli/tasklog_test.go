package cli

import (
	"strings"
	"testing"
)

// taskLogReads is how many task log requests the emulator answered, and
// how many of its tasks ended otherwise than OK.
func (c *cluster) taskLogReads() (reads, notOK, tasks int) {
	stats, _ := c.srv.Requests()
	for _, s := range stats {
		if s.Endpoint == "GET /nodes/{node}/tasks/{upid}/log" {
			reads = s.Count
		}
	}
	for _, tk := range c.srv.Cluster().Tasks("") {
		tasks++
		if tk.ExitStatus != "OK" {
			notOK++
		}
	}
	return reads, notOK, tasks
}

// TestApplyReadsTaskLogsOnlyWhenNeeded: without --verbose nothing shows
// PVE's task logs, so apply reads the log of a task only when it did not
// end OK (its warnings or its error); with --verbose it streams them all.
func TestApplyReadsTaskLogsOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.srv.ResetRequests()
	c.mustRun("apply", "-f", manifestWith(t, "512"), "--auto-approve")
	reads, notOK, tasks := c.taskLogReads()
	if tasks == 0 {
		t.Fatal("apply ran no task")
	}
	t.Logf("%d log reads, %d tasks, %d not OK", reads, tasks, notOK)
	if reads > notOK {
		t.Errorf("apply read task logs %d times for %d tasks of which %d did not end OK", reads, tasks, notOK)
	}

	v := newCluster(t)
	v.srv.ResetRequests()
	r := v.mustRun("apply", "-f", manifestWith(t, "512"), "--auto-approve", "--verbose")
	reads, _, tasks = v.taskLogReads()
	if reads < tasks {
		t.Errorf("--verbose read task logs %d times for %d tasks, want each streamed", reads, tasks)
	}
	if !strings.Contains(r.stderr, "|") {
		t.Errorf("--verbose shows no task log line:\n%s", r.stderr)
	}
}
