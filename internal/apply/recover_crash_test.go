package apply_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

const recoverCrashManifest = `project: rec
apps:
  - name: notes
NODE    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 1G
    volumes:
      - name: data
        storage: nfs
        size: 1G
        mount: /srv/data
`

// recoverRun plans (with --recover's consent) and applies the manifest,
// dying at request kill (0: never); it returns the requests made.
func recoverRun(t *testing.T, srv *sim.Server, node string, kill int64) (int64, error) {
	return recoverRunLog(t, srv, node, kill, nil)
}

// methodLog records the method of each request, in order.
type methodLog struct {
	base    http.RoundTripper
	mu      *sync.Mutex
	methods *[]string
}

func (m methodLog) RoundTrip(r *http.Request) (*http.Response, error) {
	m.mu.Lock()
	*m.methods = append(*m.methods, r.Method)
	m.mu.Unlock()
	return m.base.RoundTrip(r)
}

// recoverRunLog is recoverRun that records the requests' methods (the
// executor's requests are sequential for one app, Observe's parallel reads
// are all GETs) when methods is not nil.
func recoverRunLog(t *testing.T, srv *sim.Server, node string, kill int64, methods *[]string) (int64, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := srv.HTTPClient().Transport
	if methods != nil {
		base = methodLog{base: base, mu: &sync.Mutex{}, methods: methods}
	}
	k := &killer{base: base, n: kill, cancel: cancel}
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken, pvetest.Transport(k), fastRetry)
	line := ""
	if node != "" {
		line = "    node: " + node + "\n"
	}
	f, err := manifest.Parse("corral.yaml", []byte(strings.Replace(recoverCrashManifest, "NODE", line, 1)), manifest.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return k.count.Load(), err
	}
	obs.Recover = true
	p, err := plan.Make(plan.FromManifest(f), obs)
	if err == nil {
		err = (&apply.Executor{Client: c}).Apply(ctx, p, obs)
	}
	return k.count.Load(), err
}

// TestCrashDuringRecovery: corral apply --recover is killed at every API
// call of the recovery of an app whose node lost power, then run again.
// Every run ends with one running container of the app on a live node that
// mounts the volume with its data, no other running container mounting
// it, the keeper's record and the volume intact.
func TestCrashDuringRecovery(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t, pvetest.Nodes(3), pvetest.SharedStorage(model.SharedNFS)).Server
	if _, err := recoverRun(t, srv, "pve2", 0); err != nil {
		t.Fatal(err)
	}
	cl := srv.Cluster()
	var volid string
	var old int
	for _, r := range cl.Resources("vm") {
		if strings.Contains(r.Tags, "corral-app-notes") {
			old = r.VMID
			volid = plan.VolumeTags(plan.ParseTags(r.Tags))["data"]
		}
	}
	dir, err := cl.VolumePath("pve2", volid)
	if err != nil || old == 0 {
		t.Fatalf("app notes: ct %d, volume %q: %v", old, volid, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SetNodePower("pve2", false, model.NodePower{PowerOff: true}); err != nil {
		t.Fatal(err)
	}
	base := &rig{t: t, srv: srv}
	frozen := base.freeze()

	clean := thaw(t, frozen)
	var methods []string
	count, err := recoverRunLog(t, clean.srv, "", 0, &methods)
	if err != nil {
		t.Fatalf("clean recovery: %v", err)
	}
	// A kill during a read leaves what a kill right before the next write
	// leaves: kill at each write (done, its answer lost) and at the
	// request right before it (not done).
	var kills []int64
	for i, m := range methods {
		if m != http.MethodGet {
			kills = append(kills, int64(i), int64(i+1))
		}
	}
	kills = slices.Compact(kills)
	t.Logf("the recovery makes %d requests; kill points %v", count, kills)
	for _, kill := range kills {
		if kill < 1 {
			continue
		}
		t.Run(fmt.Sprintf("kill-at-%d", kill), func(t *testing.T) {
			t.Parallel()
			r := thaw(t, frozen)
			recoverRun(t, r.srv, "", kill)
			var err error
			for try := 0; try < 2; try++ {
				if _, err = recoverRun(t, r.srv, "", 0); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("re-run after the kill: %v", err)
			}
			cl := r.srv.Cluster()
			var apps, running []int
			for _, g := range cl.Resources("vm") {
				if !strings.Contains(g.Tags, "corral-app-notes") || g.VMID == old {
					continue
				}
				apps = append(apps, g.VMID)
				if g.Node == "pve2" {
					t.Errorf("CT %d on the offline node", g.VMID)
				}
				conf, err := cl.ConfigText(g.VMID)
				if err != nil {
					t.Fatal(err)
				}
				if cl.GuestPID(g.VMID) != 0 && strings.Contains(conf, volid+",") {
					running = append(running, g.VMID)
				}
			}
			if len(apps) != 1 || !slices.Equal(running, apps) {
				t.Fatalf("app containers %v, running with %s: %v; want one, running", apps, volid, running)
			}
			dir, err := cl.VolumePath("pve1", volid)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "marker")); err != nil || string(b) != "data" {
				t.Errorf("marker %q, %v", b, err)
			}
			keeper, err := cl.ConfigText(plan.VolumeOwner(volid))
			if err != nil || !strings.Contains(keeper, volid+",mp=/corral/notes/data") {
				t.Errorf("keeper %d lost its record of %s: %v\n%s", plan.VolumeOwner(volid), volid, err, keeper)
			}
		})
	}
}
