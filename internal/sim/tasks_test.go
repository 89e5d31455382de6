package sim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// TestTaskList covers Tasks.pm node_tasks over HTTPS: sources, filters,
// paging, who sees which task, and the log's paging.
func TestTaskList(t *testing.T) {
	t.Parallel()
	one := 1.0 // real durations, so that a create stays running meanwhile
	k := openE2E(t, Options{Dir: t.TempDir(), TimeScale: &one})
	op, root := k.op(), k.root()
	tmpl := "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"
	running := k.upid(op, http.MethodPost, "/nodes/pve/lxc", url.Values{"vmid": {"160"}, "ostemplate": {tmpl}, "rootfs": {"local-lvm:1"}, "unprivileged": {"1"}})
	// The fault hook draws when a worker begins: wait for the create's
	// first log line, so that the fault set below cannot reach it.
	testenv.WaitFor(t, "the create's worker to begin (its first log line)", func() bool {
		r := k.do(op, http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(running)+"/log", nil)
		var lines []map[string]any
		k.decode(r.data, &lines)
		return r.status == 200 && len(lines) > 0
	})
	// A finished task: a start by the root token that fails at once (a
	// real one would wait 10 s for the config flock the create holds).
	k.srv.SetFaults(FaultSpec{Seed: 1, TaskFail: 1})
	failed := k.wait(root, k.upid(root, http.MethodPost, "/nodes/pve/lxc/160/status/start", nil))
	k.srv.SetFaults(FaultSpec{Seed: 1})
	if failed.ExitStatus != "injected fault: task vzstart 160 failed" {
		t.Fatalf("start of a CT being created ended %q", failed.ExitStatus)
	}

	list := func(who e2eCaller, params url.Values) ([]map[string]any, int) {
		t.Helper()
		r := k.do(who, http.MethodGet, "/nodes/pve/tasks", params)
		if r.status != 200 {
			t.Fatalf("tasks %v: %d %q %v", params, r.status, r.msg, r.errs)
		}
		var rows []map[string]any
		var total int
		k.decode(r.data, &rows)
		k.decode(r.raw["total"], &total)
		return rows, total
	}
	upids := func(rows []map[string]any) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r["upid"].(string))
		}
		return out
	}
	has := func(rows []map[string]any, upid string) map[string]any {
		for _, r := range rows {
			if r["upid"] == upid {
				return r
			}
		}
		return nil
	}

	if rows, _ := list(op, nil); has(rows, running) != nil || has(rows, failed.UPID) == nil {
		t.Errorf("default source (archive) must list finished tasks only: %v", upids(rows))
	}
	if rows, _ := list(op, url.Values{"source": {"active"}}); len(rows) != 1 || has(rows, running) == nil {
		t.Errorf("source=active: %v", upids(rows))
	} else if rows[0]["status"] != "RUNNING" {
		t.Errorf("active task status %v, PVE says RUNNING", rows[0]["status"])
	}
	if rows, total := list(op, url.Values{"source": {"all"}}); len(rows) != 2 || total != 2 || rows[0]["upid"] != running {
		t.Errorf("source=all: %v total %d (running first)", upids(rows), total)
	}
	if rows, _ := list(op, url.Values{"source": {"all"}, "errors": {"1"}}); has(rows, failed.UPID) == nil {
		t.Errorf("errors=1 lost the failed task: %v", upids(rows))
	}
	if rows, _ := list(op, url.Values{"statusfilter": {"ok"}}); len(rows) != 0 {
		t.Errorf("statusfilter=ok: %v", upids(rows))
	}
	if rows, _ := list(op, url.Values{"statusfilter": {"error"}}); len(rows) != 1 {
		t.Errorf("statusfilter=error: %v", upids(rows))
	}
	if rows, _ := list(op, url.Values{"userfilter": {"ROOT"}, "source": {"all"}}); len(rows) != 1 || has(rows, failed.UPID) == nil {
		t.Errorf("userfilter=ROOT (case-insensitive in PVE): %v", upids(rows))
	}
	if rows, _ := list(op, url.Values{"typefilter": {"vzcreate"}, "source": {"all"}, "vmid": {"160"}}); len(rows) != 1 || has(rows, running) == nil {
		t.Errorf("typefilter+vmid: %v", upids(rows))
	}
	if rows, total := list(op, url.Values{"source": {"all"}, "start": {"1"}, "limit": {"1"}}); len(rows) != 1 || total != 2 || rows[0]["upid"] != failed.UPID {
		t.Errorf("start=1 limit=1: %v total %d", upids(rows), total)
	}
	if rows, total := list(op, url.Values{"source": {"all"}, "until": {"1"}}); len(rows) != 0 || total != 0 {
		t.Errorf("until=1: %v", upids(rows))
	}

	// A privilege-separated token without Sys.Audit sees only its own.
	_, nope := k.newUserToken("nope@pve", "tk", true)
	if rows, total := list(nope, url.Values{"source": {"all"}}); len(rows) != 0 || total != 0 {
		t.Errorf("a stranger's token lists %v", upids(rows))
	}
	for _, sub := range []string{"status", "log"} {
		r := k.do(nope, http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(running)+"/"+sub, nil)
		if r.status != 403 || r.msg != "Permission check failed (/nodes/pve, Sys.Audit)\n" {
			t.Errorf("stranger reads %s: %d %q", sub, r.status, r.msg)
		}
	}
	// The task's own token may read it; status carries tokenid.
	var st map[string]any
	k.ok(op, http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(running)+"/status", nil, &st)
	if st["status"] != "running" || st["tokenid"] != "corral" || st["user"] != "corral@pve" {
		t.Errorf("running task status: %v", st)
	}
	if _, ok := st["exitstatus"]; ok {
		t.Errorf("a running task has no exitstatus: %v", st)
	}

	// Log paging: n counts from 1, total is the whole log, limit=0 reads all.
	var all []struct {
		N int    `json:"n"`
		T string `json:"t"`
	}
	r := k.do(root, http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(failed.UPID)+"/log", url.Values{"limit": {"0"}})
	k.decode(r.data, &all)
	var total int
	k.decode(r.raw["total"], &total)
	if len(all) == 0 || total != len(all) || all[0].N != 1 || all[len(all)-1].T != "TASK ERROR: injected fault: task vzstart 160 failed" {
		t.Errorf("full log: %+v total %d", all, total)
	}
	r = k.do(root, http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(failed.UPID)+"/log", url.Values{"start": {"1"}, "limit": {"1"}})
	var page []struct {
		N int `json:"n"`
	}
	k.decode(r.data, &page)
	if len(page) > 1 || (len(all) > 1 && (len(page) != 1 || page[0].N != 2)) {
		t.Errorf("start=1 limit=1: %+v", page)
	}
	if !strings.HasPrefix(running, "UPID:pve:") {
		t.Fatal(running)
	}
}
