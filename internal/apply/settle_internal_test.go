package apply

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// TestSettleWaitRules: the one settle loop keeps its two callers' rules
// apart. A container in creation on node pve2 holds Observe's wait (any
// node) and the lock's wait on pve2, but not the lock's wait on pve; and
// each refusal says what its caller says.
func TestSettleWaitRules(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t, pvetest.Nodes(2), pvetest.TimeScale(1.0)).Server
	// root's create runs for seconds at real durations; the operator
	// token cannot see root's task, so it is waited for, not explained.
	if _, err := srv.Cluster().CreateCT(model.Auth{UserID: "root@pam"}, "pve2", map[string]string{
		"vmid": "170", "ostemplate": "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "rootfs": "local-lvm:1",
	}); err != nil {
		t.Fatal(err)
	}
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	ctx := context.Background()
	const limit = 200 * time.Millisecond

	res, err := settledOn(ctx, c, "pve", limit)
	if err != nil {
		t.Fatalf("the lock's wait on pve waited for a create on pve2: %v", err)
	}
	if !hasGuest(res, 170, "pve2") {
		t.Errorf("the lock's wait on pve returned %+v, want every guest listed, 170 on pve2 among them", res)
	}
	if _, err := settledOn(ctx, c, "pve2", limit); err == nil ||
		!strings.Contains(err.Error(), "container(s) 170 on node pve2 are still being created after 200ms, and one may be another corral's keeper") {
		t.Errorf("the lock's wait on pve2: %v, want its refusal naming 170", err)
	}
	var waits []string
	_, err = guestsSettled(ctx, c, ObserveOptions{CreateWait: limit, OnWait: func(s string) { waits = append(waits, s) }}, nil)
	if err == nil || !strings.Contains(err.Error(), "container(s) 170 on pve2 are still being created (lock: create) after 200ms") ||
		!strings.Contains(err.Error(), "on node pve2 run pct unlock 170 && pct destroy 170") {
		t.Errorf("Observe's wait: %v, want its refusal with root's command", err)
	}
	if len(waits) == 0 || waits[0] != "waiting for container(s) 170 on pve2 to finish being created" {
		t.Errorf("Observe's wait reported %q, want it waiting for 170 on pve2", waits)
	}
}

func hasGuest(res []resource, vmid int, node string) bool {
	for _, r := range res {
		if r.VMID == vmid && r.Node == node {
			return true
		}
	}
	return false
}

// TestSettleWaitReadsTasksFirst: a shutdown that ends between Observe's
// two reads (the running tasks, the guest listing) must not leave the
// plan with a container listed running that is stopped by then. The
// transport holds the task read until the shutdown has ended, which is
// the race a loaded machine lost (TestPlanWaitsForRunningShutdown in CI):
// read after the tasks, the listing shows the container stopped.
func TestSettleWaitReadsTasksFirst(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t, pvetest.TimeScale(0.1)).Server
	cl, root := srv.Cluster(), model.Auth{UserID: "root@pam"}
	ctx := context.Background()
	upid, err := cl.CreateCT(root, "pve", map[string]string{
		"vmid": "180", "ostemplate": "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "rootfs": "local-lvm:1",
		"tags": plan.TagManaged, "start": "1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if task, err := cl.WaitTask(ctx, "pve", upid); err != nil || task.ExitStatus != "OK" && !strings.HasPrefix(task.ExitStatus, "WARNINGS") {
		t.Fatalf("create and start 180: %+v %v", task, err)
	}
	stopped := func() bool { st, err := cl.CTStatus("pve", 180); return err == nil && st.Status == "stopped" }
	held := false
	tr := srv.HTTPClient().Transport // one transport: each keeps its connections open
	rt := roundTrip(func(req *http.Request) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/nodes/pve/tasks") && !held {
			held = true
			testenv.WaitFor(t, "the shutdown of 180 to end", stopped)
		}
		return tr.RoundTrip(req)
	})
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken, pvetest.Transport(rt))
	if _, err := cl.ShutdownCT(root, "pve", 180, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	res, err := guestsSettled(ctx, c, ObserveOptions{}, []string{"pve"})
	if err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Fatal("the wait read no task list")
	}
	for _, r := range res {
		if r.VMID == 180 && r.Status != "stopped" {
			t.Errorf("180 listed %q after its shutdown ended, want stopped", r.Status)
		}
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSettleWaitReadsTasksWhereCorralsGuestsAre: told where corral's
// guests are expected (ExpectGuestsOn), Observe's settle wait reads no
// task list on a cluster where none are listed, and where one is listed
// on a node it did not expect, it reads that node's tasks and lists the
// guests again, so the listing it returns still comes after the tasks
// of every node a guest of corral's is on (issue 30).
func TestSettleWaitReadsTasksWhereCorralsGuestsAre(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t, pvetest.Nodes(2)).Server
	var mu sync.Mutex
	var log []string
	tr := srv.HTTPClient().Transport
	rt := roundTrip(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		log = append(log, req.URL.Path)
		mu.Unlock()
		return tr.RoundTrip(req)
	})
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken, pvetest.Transport(rt))
	settle := func(ctx context.Context) []string {
		mu.Lock()
		log = nil
		mu.Unlock()
		if _, err := guestsSettled(ctx, c, ObserveOptions{}, []string{"pve", "pve2"}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, p := range log {
			_, p, _ = strings.Cut(p, "/api2/json")
			out = append(out, p)
		}
		return out
	}
	none := ExpectGuestsOn(context.Background(), nil)
	if got := strings.Join(settle(none), " "); got != "/cluster/resources" {
		t.Errorf("no guest of corral's, none expected: read %s, want only the listing", got)
	}
	if got := strings.Join(settle(context.Background()), " "); got != "/nodes/pve/tasks /nodes/pve2/tasks /cluster/resources" {
		t.Errorf("nothing expected said: read %s, want every node's tasks, then the listing", got)
	}
	cl, root := srv.Cluster(), model.Auth{UserID: "root@pam"}
	upid, err := cl.CreateCT(root, "pve2", map[string]string{
		"vmid": "181", "ostemplate": "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "rootfs": "local-lvm:1", "tags": plan.TagManaged,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WaitTask(context.Background(), "pve2", upid); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(settle(none), " "); got != "/cluster/resources /nodes/pve2/tasks /cluster/resources" {
		t.Errorf("a guest of corral's on pve2, none expected: read %s, want pve2's tasks read and the guests listed again", got)
	}
	if got := strings.Join(settle(ExpectGuestsOn(context.Background(), []string{"pve2"})), " "); got != "/nodes/pve2/tasks /cluster/resources" {
		t.Errorf("a guest of corral's on pve2, expected there: read %s, want pve2's tasks, then the listing", got)
	}
}
