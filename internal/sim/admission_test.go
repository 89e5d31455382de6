package sim

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestMemoryAdmission: with --node-memory 1 GiB, CTs of 256 MiB start
// until the node is full; the next start task fails as a PVE start that
// did not come up, its log saying why and what to do; stopping a CT frees
// its memory for the next.
func TestMemoryAdmission(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), NodeMemory: 1 << 30})
	root := k.root()

	var st struct {
		Memory struct {
			Total int64 `json:"total"`
		} `json:"memory"`
	}
	k.ok(root, http.MethodGet, "/nodes/pve/status", nil, &st)
	if got, want := st.Memory.Total, int64(1<<30); got != want {
		t.Fatalf("status memory.total = %d, want %d", got, want)
	}
	var res []map[string]any
	k.ok(root, http.MethodGet, "/cluster/resources", url.Values{"type": {"node"}}, &res)
	if len(res) != 1 || res[0]["maxmem"] != float64(1<<30) {
		t.Fatalf("/cluster/resources nodes = %v, want maxmem %d", res, 1<<30)
	}

	for _, id := range []string{"101", "102", "103", "104", "105"} {
		k.create(root, id, url.Values{"memory": {"256"}})
	}
	for _, id := range []string{"101", "102", "103", "104"} {
		k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/"+id+"/status/start", nil)
	}
	full := k.task(root, http.MethodPost, "/nodes/pve/lxc/105/status/start", nil)
	if got, want := full.ExitStatus, "startup for container '105' failed"; got != want {
		t.Fatalf("start on a full node ended %q, want %q\n%s", got, want, strings.Join(full.log, "\n"))
	}
	why := "not enough memory on node 'pve' to start CT 105: it needs 256 MiB, and the 4 CT(s) running there hold 1024 of the node's 1024 MiB; " +
		"stop a CT, lower this CT's memory, or run the emulator with more (corral sim serve --node-memory SIZE)"
	if !full.has(why) || !full.has("TASK ERROR: startup for container '105' failed") {
		t.Fatalf("start log lacks the reason and the task error:\n%s", strings.Join(full.log, "\n"))
	}
	var cur map[string]any
	k.ok(root, http.MethodGet, "/nodes/pve/lxc/105/status/current", nil, &cur)
	if cur["status"] != "stopped" {
		t.Fatalf("refused CT 105 is %v, want stopped", cur["status"])
	}

	k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/102/status/stop", nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/lxc/105/status/start", nil)
	// 512 MiB no longer fits beside four 256 MiB CTs.
	k.ok(root, http.MethodPut, "/nodes/pve/lxc/102/config", url.Values{"memory": {"512"}}, nil)
	if got := k.task(root, http.MethodPost, "/nodes/pve/lxc/102/status/start", nil).ExitStatus; got != "startup for container '102' failed" {
		t.Fatalf("start of a 512 MiB CT on a full node ended %q", got)
	}
}

// TestMemoryAdmission_Race: starts sent all at once admit exactly as many
// CTs as fit, not every one that found room before the others ran.
func TestMemoryAdmission_Race(t *testing.T) {
	t.Parallel()
	// vzstart's 3 s at scale 0.1: every start has passed the early check
	// before the first one marks its CT running.
	scale := 0.1
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: &scale, NodeMemory: 1 << 30})
	root := k.root()
	const n = 8
	for i := range n {
		k.create(root, fmt.Sprint(200+i), url.Values{"memory": {"256"}})
	}
	upids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			upids[i] = k.upid(root, http.MethodPost, fmt.Sprintf("/nodes/pve/lxc/%d/status/start", 200+i), nil)
		})
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, u := range upids {
		switch st := k.wait(root, u); {
		case st.ExitStatus == "OK":
			ok++
		case strings.HasPrefix(st.ExitStatus, "startup for container '"):
			refused++
		default:
			t.Fatalf("start ended %q", st.ExitStatus)
		}
	}
	if ok != 4 || refused != 4 {
		t.Fatalf("%d started, %d refused; want 4 and 4", ok, refused)
	}
}

// TestMemoryAdmission_CreateStart: create with start=1 is admitted like a
// start; the CT stays, stopped.
func TestMemoryAdmission_CreateStart(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), NodeMemory: 512 << 20})
	root := k.root()
	k.create(root, "101", url.Values{"memory": {"512"}, "start": {"1"}})
	p := url.Values{"vmid": {"102"}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"},
		"rootfs": {"local-lvm:1"}, "unprivileged": {"1"}, "memory": {"128"}, "start": {"1"}}
	st := k.task(root, http.MethodPost, "/nodes/pve/lxc", p)
	if got, want := st.ExitStatus, "startup for container '102' failed"; got != want {
		t.Fatalf("create start=1 on a full node ended %q, want %q\n%s", got, want, strings.Join(st.log, "\n"))
	}
	if c := k.config("102", true); c["memory"] != float64(128) {
		t.Fatalf("CT 102 config after the refused start: %v", c)
	}
}

// TestNodeMemory_fromHost: without NodeMemory, nodes whose CTs are real
// containers (the LXC runtime) have the host's MemTotal less the reserve,
// shared between them, and admission is on; in the filesystem view it is
// off and the nodes keep the state's memory (32 GiB).
func TestNodeMemory_fromHost(t *testing.T) {
	t.Parallel()
	opts := Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Nodes: 2}
	srv, err := New(opts) // not openE2E: it sets NodeMemory
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	k := &e2e{t: t, srv: srv, dir: opts.Dir, hc: srv.HTTPClient()}
	total, err := HostMemTotal()
	if err != nil {
		t.Fatal(err)
	}
	want, admit := int64(32<<30), false
	if isolated, _ := k.srv.Guests().Isolated(); isolated {
		want, admit = (total-HostMemoryReserve(total))/2, true
	}
	if got := k.srv.Cluster().MemoryAdmission(); got != admit {
		t.Errorf("admission %v, want %v", got, admit)
	}
	var res []map[string]any
	k.ok(k.root(), http.MethodGet, "/cluster/resources", url.Values{"type": {"node"}}, &res)
	for _, r := range res {
		if r["maxmem"] != float64(want) {
			t.Errorf("node %v maxmem %v, want %d (host MemTotal %d)", r["node"], r["maxmem"], want, total)
		}
	}
	if len(res) != 2 {
		t.Fatalf("%d nodes", len(res))
	}
}

// TestMemoryAdmission_restartMigration: a restart migration onto a node
// without room moves the CT and leaves it stopped there, the migration
// ending with problems and its log saying why.
func TestMemoryAdmission_restartMigration(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Nodes: 2, NodeMemory: 512 << 20})
	root := k.root()
	for _, c := range []struct{ node, vmid string }{{"pve1", "101"}, {"pve2", "102"}} {
		k.runOn(c.node, root, http.MethodPost, "/nodes/"+c.node+"/lxc", url.Values{"vmid": {c.vmid}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"},
			"rootfs": {"local-lvm:1"}, "unprivileged": {"1"}, "memory": {"512"}, "start": {"1"}})
	}
	st := k.runOn("pve1", root, http.MethodPost, "/nodes/pve1/lxc/101/migrate", url.Values{"target": {"pve2"}, "restart": {"1"}})
	why := "not enough memory on node 'pve2' to start CT 101: it needs 512 MiB, and the 1 CT(s) running there hold 512 of the node's 512 MiB; " +
		"stop a CT, lower this CT's memory, or run the emulator with more (corral sim serve --node-memory SIZE)"
	if st.ExitStatus != "migration problems" || !st.has(why) {
		t.Fatalf("migration onto a full node ended %q\n%s", st.ExitStatus, strings.Join(st.log, "\n"))
	}
	if node, status := k.resource("lxc/101"); node != "pve2" || status != "stopped" {
		t.Fatalf("CT 101 is %s on %s, want stopped on pve2", status, node)
	}
}
