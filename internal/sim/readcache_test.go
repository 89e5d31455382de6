package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// A read after a write sees it, on every cached route: each step reads
// twice (the second answer may come from the cache), writes, and reads
// again, which must show the write. A cache that served the answer
// stored before the write fails here.
func TestReadCache_readAfterWriteSeesIt(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root, op := k.root(), k.op()
	k.create(op, "101", url.Values{"tags": {"corral"}})
	read := func(who e2eCaller, path string) string {
		t.Helper()
		var raw json.RawMessage
		k.ok(who, http.MethodGet, path, nil, &raw)
		return string(raw)
	}
	steps := []struct {
		name  string
		paths []string
		write func()
		shows string
	}{
		{"config write", []string{"/nodes/pve/lxc/101/config", "/nodes/pve/lxc/101/pending"},
			func() {
				k.ok(op, http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"description": {"written-1"}}, nil)
			}, "written-1"},
		{"tags", []string{"/cluster/resources?type=vm", "/cluster/resources", "/nodes/pve/lxc"},
			func() {
				k.ok(op, http.MethodPut, "/nodes/pve/lxc/101/config", url.Values{"tags": {"corral;fresh"}}, nil)
			}, "corral;fresh"},
		{"start", []string{"/nodes/pve/lxc/101/status/current", "/nodes/pve/lxc"},
			func() { k.mustOK(op, http.MethodPost, "/nodes/pve/lxc/101/status/start", nil) }, `"running"`},
		{"task list", []string{"/nodes/pve/tasks"},
			func() { k.mustOK(op, http.MethodPost, "/nodes/pve/lxc/101/status/stop", nil) }, "vzstop"},
		{"new CT", []string{"/nodes/pve/storage/local-lvm/content", "/cluster/resources?type=vm", "/nodes/pve/lxc"},
			func() { k.create(op, "102", nil) }, "102"},
	}
	for _, st := range steps {
		// What the write shows, not inside a longer number: a volume's
		// ctime holds "102" now and then (1796010200 to 1796010299 are
		// a hundred seconds of 2026-11-30, 1796004102 one second).
		shows := regexp.MustCompile(`(?:^|\D)` + regexp.QuoteMeta(st.shows) + `(?:\D|$)`)
		for _, p := range st.paths {
			for _, who := range []e2eCaller{root, op} {
				// A node's uptime counts on between two reads.
				if a, b := read(who, p), read(who, p); withoutUptime(a) != withoutUptime(b) {
					t.Fatalf("%s: two reads with nothing between differ:\n%s\n%s", p, a, b)
				} else if shows.MatchString(a) {
					t.Fatalf("%s: %q before the write (%s): the step tests nothing", p, st.shows, st.name)
				}
			}
		}
		st.write()
		for _, p := range st.paths {
			for _, who := range []e2eCaller{root, op} {
				if got := read(who, p); !shows.MatchString(got) {
					t.Errorf("after %s, GET %s answers without %q (a stale cached answer):\n%s", st.name, p, st.shows, got)
				}
			}
		}
	}
}

// The cached lists are filtered by the caller's privileges: a token
// that may audit only CT 101 sees only it, right after root's read of
// all of them (and root's after the token's), and sees 102 as soon as
// an ACL grants it.
func TestReadCache_listsFilteredPerCaller(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root, op := k.root(), k.op()
	for _, id := range []string{"101", "102", "103"} {
		k.create(op, id, nil)
	}
	full, auditor := k.newUserToken("audit@pve", "tok", true)
	grant := func(vmid string) {
		k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/" + vmid}, "roles": {"PVEAuditor"},
			"users": {"audit@pve"}, "tokens": {full}}, nil)
	}
	grant("101")
	vmids := func(who e2eCaller, path string) []int {
		t.Helper()
		var rows []struct {
			VMID int `json:"vmid"`
		}
		k.ok(who, http.MethodGet, path, nil, &rows)
		var out []int
		for _, r := range rows {
			if r.VMID != 0 {
				out = append(out, r.VMID)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, path := range []string{"/cluster/resources?type=vm", "/cluster/resources", "/nodes/pve/lxc"} {
		for range 2 {
			if got := vmids(root, path); !slices.Equal(got, []int{101, 102, 103}) {
				t.Errorf("root, %s: %v", path, got)
			}
			if got := vmids(auditor, path); !slices.Equal(got, []int{101}) {
				t.Errorf("token with VM.Audit on /vms/101 only, %s: %v (another caller's cached list?)", path, got)
			}
		}
	}
	if r := k.do(auditor, http.MethodGet, "/nodes/pve/lxc/102/config", nil); r.status != http.StatusForbidden {
		t.Errorf("token reads 102's config (root's cached answer?): %d", r.status)
	}
	grant("102")
	for _, path := range []string{"/cluster/resources?type=vm", "/nodes/pve/lxc"} {
		if got := vmids(auditor, path); !slices.Equal(got, []int{101, 102}) {
			t.Errorf("after the grant on /vms/102, %s: %v", path, got)
		}
	}
}

// Clients reading one list at once while CTs are created (the cache's
// readers share one read per key) never see a list older than one they
// saw before, and see every CT once the creates are done.
func TestReadCache_concurrentReadersDuringWrites(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	op := k.op()
	count := func() (int, error) {
		r := k.do(op, http.MethodGet, "/cluster/resources?type=vm", nil)
		var rows []json.RawMessage
		err := json.Unmarshal(r.data, &rows)
		return len(rows), err
	}
	done := make(chan struct{})
	errs := make(chan string, 8)
	for range 8 {
		go func() {
			last := 0
			for {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				n, err := count()
				if err != nil || n < last {
					errs <- fmt.Sprintf("a reader saw %d CTs after %d (%v)", n, last, err)
					return
				}
				last = n
			}
		}()
	}
	for i := range 6 {
		k.create(op, strconv.Itoa(101+i), nil)
	}
	close(done)
	for range 8 {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
	if n, err := count(); n != 6 || err != nil {
		t.Errorf("after the creates: %d CTs listed (%v), want 6", n, err)
	}
}

// withoutUptime is a JSON answer with its uptime figures zeroed: they
// follow the clock, not the state.
func withoutUptime(s string) string {
	return uptimeField.ReplaceAllString(s, `"uptime":0`)
}

var uptimeField = regexp.MustCompile(`"uptime":\d+`)
