package apply_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/corralhq/corral/internal/testenv"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

// The crash test: corral is killed at every API-call boundary of a full
// cycle (apply, destroy, apply again, an update that replaces the
// container), then run again. Every run must converge to the manifest with
// every retained volume intact, on its original volid, with its data, and
// with no volume leaked.

const crashManifest = `apps:
  - name: db
    template: local:vztmpl/TEMPLATE
    memory: MEMORY
    rootfs:
      size: 2G
    volumes:
      - name: data
        size: 1G
        mount: /var/lib/db
      - name: logs
        size: 512M
        mount: /var/log/db
        backup: false
      - name: legacy
        storage: local-lvm
        mount: /srv/legacy
        adopt: local-lvm:vm-150-disk-1
`

// phase is one corral run of the cycle.
type phase struct {
	name     string
	memory   string
	template string
	destroy  bool
}

const (
	debian12 = "debian-12-standard_12.12-1_amd64.tar.zst"
	debian13 = "debian-13-standard_13.1-2_amd64.tar.zst"
)

var cycle = []phase{
	{name: "apply", memory: "512", template: debian12},
	{name: "update", memory: "1024", template: debian12},
	{name: "replace", memory: "1024", template: debian13},
	{name: "destroy", memory: "1024", template: debian13, destroy: true},
	{name: "reapply", memory: "1024", template: debian13},
}

// killer is a transport that lets n requests through and then "kills
// corral": the n-th request reaches the server but its answer is lost,
// and nothing after it is sent.
type killer struct {
	base   http.RoundTripper
	n      int64 // 0 = never
	count  atomic.Int64
	cancel context.CancelFunc
}

var errKilled = errors.New("killed")

func (k *killer) RoundTrip(r *http.Request) (*http.Response, error) {
	i := k.count.Add(1)
	switch {
	case k.n == 0 || i < k.n:
		return k.base.RoundTrip(r)
	case i == k.n:
		resp, err := k.base.RoundTrip(r)
		if err == nil {
			resp.Body.Close()
		}
		k.cancel()
		return nil, errKilled
	default:
		return nil, errKilled
	}
}

type rig struct {
	t   *testing.T
	srv *sim.Server
}

func newRig(t *testing.T) *rig {
	srv := pvetest.Start(t).Server
	// The second template, downloaded once by root as an operator would
	// (the operator token may not download templates).
	c := srv.Cluster()
	upid, err := c.DownloadAppliance(model.Auth{UserID: "root@pam"}, "pve", map[string]string{"storage": "local", "template": debian13})
	if err != nil {
		t.Fatal(err)
	}
	if task, err := c.WaitTask(context.Background(), "pve", upid); err != nil || task.ExitStatus != "OK" {
		t.Fatalf("download template: %+v %v", task, err)
	}
	// A container made by hand (seed 000 style) whose volume the manifest
	// adopts, with data in it.
	root := model.Auth{UserID: "root@pam"}
	upid, err = c.CreateCT(root, "pve", map[string]string{
		"vmid": "150", "ostemplate": "local:vztmpl/" + debian12, "hostname": "legacy",
		"rootfs": "local-lvm:1", "mp0": "local-lvm:1,mp=/legacy", "features": "nesting=1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if task, err := c.WaitTask(context.Background(), "pve", upid); err != nil || task.ExitStatus != "OK" {
		t.Fatalf("create legacy ct: %+v %v", task, err)
	}
	dir, err := c.VolumePath("pve", "local-lvm:vm-150-disk-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "legacy.txt"), []byte("seed data"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, srv: srv}
}

func loadApps(t *testing.T, ph phase) []plan.App {
	return loadAppsText(t, strings.NewReplacer("MEMORY", ph.memory, "TEMPLATE", ph.template).Replace(crashManifest))
}

// killable is a client of srv (the operator's token) whose transport
// "kills corral" at request kill (0: never, see killer), and the context
// the kill cancels.
func killable(t testing.TB, srv *sim.Server, kill int64) (context.Context, context.CancelFunc, *killer, *pve.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	k := &killer{base: srv.HTTPClient().Transport, n: kill, cancel: cancel}
	return ctx, cancel, k, pvetest.Client(t, srv, srv.Credentials().OperatorToken, pvetest.Transport(k), fastRetry)
}

// fastRetry keeps the client's read retries (their number) but not
// their pauses: after the kill every request fails at once, as a dead
// process sends none, and the pauses only held the test.
func fastRetry(c *pve.Config) {
	c.ReadRetry = pve.RetryRead
	c.ReadRetry.First, c.ReadRetry.Max = time.Millisecond, 4*time.Millisecond
}

// run carries out one phase; with kill > 0 it dies at that request. It
// returns the number of requests made.
func (r *rig) run(ph phase, kill int64) (int64, error) {
	ctx, cancel, k, c := killable(r.t, r.srv, kill)
	defer cancel()
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return k.count.Load(), err
	}
	ex := &apply.Executor{Client: c, LockWait: 0}
	apps := loadApps(r.t, ph)
	if ph.destroy {
		var p *plan.Plan
		p, err = plan.Destroy(apps, obs, false)
		if err == nil {
			_, err = ex.Destroy(ctx, p, obs)
		}
	} else {
		var p *plan.Plan
		p, err = plan.Make(apps, obs)
		if err == nil {
			err = ex.Apply(ctx, p, obs)
		}
	}
	return k.count.Load(), err
}

// observe reads the state with a healthy client.
func (r *rig) observe() *plan.Observed {
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().OperatorToken)
	obs, err := apply.Observe(context.Background(), c)
	if err != nil {
		r.t.Fatal(err)
	}
	return obs
}

// records are the keeper's volume records ("db/data" → volid).
func records(obs *plan.Observed) map[string]string {
	out := map[string]string{}
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			for key, volid := range k.Records {
				out[key.String()] = volid
			}
		}
	}
	return out
}

// converged checks the state after phase ph completed: the plan is empty
// (or, after destroy, no container is left), the volumes are the original
// ones with their data, and every image volume on local-lvm is accounted
// for.
func (r *rig) converged(ph phase, want map[string]string) {
	t := r.t
	t.Helper()
	obs := r.observe()
	if ph.destroy {
		if n := len(obs.Apps["db"]); n != 0 {
			t.Fatalf("%d containers left after destroy", n)
		}
	} else {
		p, err := plan.Make(loadApps(t, ph), obs)
		if err != nil {
			t.Fatalf("plan after convergence: %v", err)
		}
		if p.HasChanges() {
			t.Fatalf("not converged: %+v", p.Changes)
		}
		if n := len(obs.Apps["db"]); n != 1 {
			t.Fatalf("%d containers for app db, want 1", n)
		}
	}
	got := records(obs)
	if v := got["db/legacy"]; v != "" {
		if data, err := os.ReadFile(filepath.Join(filepath.Dir(r.marker(v)), "legacy.txt")); err != nil || string(data) != "seed data" {
			t.Fatalf("adopted volume %s lost its data: %q %v", v, data, err)
		}
	} else {
		t.Fatalf("the adopted volume is not recorded: %v", got)
	}
	if want != nil {
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("volume %s is %q, want the original %s (records %v)", k, got[k], v, got)
			}
			data, err := os.ReadFile(r.marker(v))
			if err != nil || string(data) != k {
				t.Fatalf("volume %s (%s) lost its data: %q %v", k, v, data, err)
			}
		}
	}
	// Every image on local-lvm is a keeper record or a live rootfs.
	known := map[string]bool{}
	for _, v := range got {
		known[v] = true
	}
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			known[strings.SplitN(k.Config["rootfs"], ",", 2)[0]] = true
		}
	}
	for _, cts := range obs.Apps {
		for _, ct := range cts {
			known[strings.SplitN(ct.Config["rootfs"], ",", 2)[0]] = true
		}
	}
	others := map[string]bool{}
	for id := range obs.Others {
		others[fmt.Sprintf("local-lvm:vm-%d-", id)] = true
	}
	entries, err := r.srv.Cluster().Content("pve", "local-lvm", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var leaked []string
	for _, e := range entries {
		foreign := false
		for prefix := range others {
			foreign = foreign || strings.HasPrefix(e.VolID(), prefix)
		}
		if !known[e.VolID()] && !foreign {
			leaked = append(leaked, e.VolID())
		}
	}
	if len(leaked) > 0 {
		sort.Strings(leaked)
		t.Fatalf("volumes not accounted for (leaked): %v", leaked)
	}
}

func (r *rig) marker(volid string) string {
	dir, err := r.srv.Cluster().VolumePath("pve", volid)
	if err != nil {
		r.t.Fatalf("volume %s: %v", volid, err)
	}
	return filepath.Join(dir, ".corral-crash-marker")
}

// markVolumes writes each volume's name into it, to check for it later.
func (r *rig) markVolumes() map[string]string {
	recs := records(r.observe())
	for k, v := range recs {
		if err := os.WriteFile(r.marker(v), []byte(k), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	return recs
}

func TestCrashAtEveryAPICall(t *testing.T) {
	t.Parallel()
	// Count the requests of each phase in an undisturbed cycle, keeping
	// the state each phase starts from (frozen[i]) and the volume
	// markers written after the apply (wants[i]): every kill of phase i
	// starts from a copy of that state instead of running the phases
	// before it again.
	frozen := make([]string, len(cycle))
	wants := make([]map[string]string, len(cycle))
	counts := make([]int64, len(cycle))
	base := newRig(t)
	var want map[string]string
	for i, ph := range cycle {
		frozen[i], wants[i] = base.freeze(), want
		base = thaw(t, frozen[i])
		n, err := base.run(ph, 0)
		if err != nil {
			t.Fatalf("clean %s: %v", ph.name, err)
		}
		counts[i] = n
		base.converged(ph, nil)
		if want == nil && ph.name == "apply" {
			want = base.markVolumes()
		}
	}
	t.Logf("requests per phase: %v", counts)

	var mu sync.Mutex
	total := 0
	for i, ph := range cycle {
		for _, kill := range testenv.KillPoints(t, counts[i]) {
			t.Run(fmt.Sprintf("%s/kill-at-%d", ph.name, kill), func(t *testing.T) {
				t.Parallel()
				r := thaw(t, frozen[i])
				want := wants[i]
				if _, err := r.run(ph, kill); err == nil && kill < counts[i] {
					t.Logf("phase finished despite the kill at request %d", kill)
				}
				// Run again, as a user would, until it succeeds (at most twice).
				var err error
				for try := 0; try < 2; try++ {
					if _, err = r.run(ph, 0); err == nil {
						break
					}
				}
				if err != nil {
					t.Fatalf("re-run after the kill: %v", err)
				}
				if want == nil && ph.name == "apply" {
					want = records(r.observe())
					for k, v := range want {
						os.WriteFile(r.marker(v), []byte(k), 0o644)
					}
				}
				r.converged(ph, want)
				mu.Lock()
				total++
				mu.Unlock()
			})
		}
	}
	t.Cleanup(func() { t.Logf("%d kill points tried; volumes lost: 0 (any loss fails the run above)", total) })
}
