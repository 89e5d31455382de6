package apply_test

import (
	"context"
	"fmt"
	"github.com/corralhq/corral/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
)

// The move crash test: corral is killed at every API-call boundary of a
// move of an app with two retained volumes from pve1 to pve2, then run
// again, finishing the move (the manifest still says pve2) or rolling it
// back (the manifest says pve1 again). Every run must converge: the app
// runs on the manifest's node with both volumes recorded there, attached
// once, with their data; no carrier is left; no volume on any node is
// referenced by no config (a stale copy, a lost volume).

const moveCrashManifest = `apps:
  - name: web
    node: NODE
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 1G
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
      - name: logs
        size: 512M
        mount: /var/log/web
`

type moveRig struct {
	t   *testing.T
	srv *sim.Server
	// plan gives the apps of the manifest with its apps on node; nil:
	// moveCrashManifest's web.
	plan func(t *testing.T, node string) []plan.App
}

func startMoveRig(t *testing.T, dir string, opts ...pvetest.Option) *moveRig {
	srv := pvetest.Start(t, append([]pvetest.Option{pvetest.InDir(dir), pvetest.Nodes(3)}, opts...)...).Server
	return &moveRig{t: t, srv: srv}
}

// frozenMoveRig applies the manifest with web on pve1, marks its volumes
// data and stops the emulator; thaw starts an emulator (with opts) on a
// copy of that state, for one kill point.
func frozenMoveRig(t *testing.T, opts ...pvetest.Option) (thaw func(t *testing.T) *moveRig) {
	base := startMoveRig(t, t.TempDir(), opts...)
	if _, err := base.run("pve1", 0); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	base.mark("pve1")
	if err := base.srv.Close(); err != nil {
		t.Fatal(err)
	}
	frozen := base.srv.Dir()
	return func(t *testing.T) *moveRig {
		dir := t.TempDir()
		if out, err := exec.Command("cp", "-a", frozen+"/.", dir).CombinedOutput(); err != nil {
			t.Fatalf("copy emulator state: %v\n%s", err, out)
		}
		return startMoveRig(t, dir, opts...)
	}
}

func (r *moveRig) apps(node string) []plan.App {
	if r.plan != nil {
		return r.plan(r.t, node)
	}
	f, err := manifest.Parse("corral.yaml", []byte(strings.Replace(moveCrashManifest, "NODE", node, 1)), manifest.LoadOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return plan.FromManifest(f)
}

// run plans and applies the manifest with web on node; with kill > 0 it
// dies at that request. It returns the number of requests made.
func (r *moveRig) run(node string, kill int64) (int64, error) {
	ctx, cancel, k, c := killable(r.t, r.srv, kill)
	defer cancel()
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return k.count.Load(), err
	}
	p, err := plan.Make(r.apps(node), obs)
	if err == nil {
		err = (&apply.Executor{Client: c}).Apply(ctx, p, obs)
	}
	return k.count.Load(), err
}

func (r *moveRig) observe() *plan.Observed {
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().OperatorToken)
	obs, err := apply.Observe(context.Background(), c)
	if err != nil {
		r.t.Fatal(err)
	}
	return obs
}

// mark writes each volume's name into it.
func (r *moveRig) mark(node string) {
	for vk, volid := range r.records(r.observe(), node) {
		dir, err := r.srv.Cluster().VolumePath(node, volid)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "marker"), []byte(vk.String()), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *moveRig) records(obs *plan.Observed, node string) map[plan.VolumeKey]string {
	out := map[plan.VolumeKey]string{}
	for _, k := range obs.Keepers[node] {
		for vk, volid := range k.Records {
			out[vk] = volid
		}
	}
	return out
}

// settled reports whether a plan with web on node has nothing to do.
func (r *moveRig) settled(node string) bool {
	p, err := plan.Make(r.apps(node), r.observe())
	return err == nil && !p.HasChanges()
}

// converged checks the end state with web on node.
func (r *moveRig) converged(node string) {
	t := r.t
	t.Helper()
	obs := r.observe()
	p, err := plan.Make(r.apps(node), obs)
	if err != nil {
		t.Fatalf("plan after convergence: %v", err)
	}
	if p.HasChanges() {
		t.Fatalf("not converged: keepers %+v changes %+v", p.Keepers, p.Changes)
	}
	if len(obs.Carriers)+len(obs.LeftoverCarriers)+len(obs.BadCarriers) != 0 {
		t.Fatalf("carriers left: %+v %+v %+v", obs.Carriers, obs.LeftoverCarriers, obs.BadCarriers)
	}
	cts := obs.Apps["web"]
	if len(cts) != 1 || cts[0].Node != node || cts[0].Status != "running" {
		t.Fatalf("web containers %+v, want one running on %s", cts, node)
	}
	recs := r.records(obs, node)
	if len(recs) != 2 {
		t.Fatalf("records on %s: %v, want web/data and web/logs", node, recs)
	}
	r.checkVolumes(obs, node, recs)
}

// checkVolumes checks that each recorded volume (recs, on node) has its
// marker and is mounted by one app, and that every image on every node
// is referenced by a config on its node.
func (r *moveRig) checkVolumes(obs *plan.Observed, node string, recs map[plan.VolumeKey]string) {
	t := r.t
	t.Helper()
	mounted := map[string]int{}
	for _, cs := range obs.Apps {
		for _, ct := range cs {
			for k, v := range ct.Config {
				if strings.HasPrefix(k, "mp") {
					mounted[plan.ParseMountPoint(v).Volume]++
				}
			}
		}
	}
	for vk, volid := range recs {
		dir, err := r.srv.Cluster().VolumePath(node, volid)
		if err != nil {
			t.Fatalf("volume %s (%s): %v", vk, volid, err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "marker"))
		if err != nil || string(data) != vk.String() {
			t.Fatalf("volume %s (%s) lost its data: %q %v", vk, volid, data, err)
		}
		if mounted[volid] != 1 {
			t.Fatalf("volume %s (%s) is mounted %d times", vk, volid, mounted[volid])
		}
	}
	// Every image on every node is referenced by a config on that node.
	known := map[string]bool{}
	cl := r.srv.Cluster()
	for _, res := range cl.Resources("vm") {
		text, err := cl.ConfigText(res.VMID)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(text, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			if k == "rootfs" || strings.HasPrefix(k, "mp") || strings.HasPrefix(k, "unused") {
				known[res.Node+"/"+strings.SplitN(v, ",", 2)[0]] = true
			}
		}
	}
	for _, n := range []string{"pve1", "pve2", "pve3"} {
		entries, err := cl.Content(n, "local-lvm", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !known[n+"/"+e.VolID()] {
				t.Fatalf("volume %s on %s is referenced by no config (stale or lost)", e.VolID(), n)
			}
		}
	}
}

func TestMoveCrashAtEveryAPICall(t *testing.T) {
	t.Parallel()
	thaw := frozenMoveRig(t)
	clean := thaw(t)
	n, err := clean.run("pve2", 0)
	if err != nil {
		t.Fatalf("clean move: %v", err)
	}
	clean.converged("pve2")
	t.Logf("requests of a move: %d", n)
	// A sample of the kill points (testenv.KillPoints; CORRAL_SWEEP=full
	// tries every one), each finished, every third also rolled back
	// (every one with CORRAL_SWEEP=full).
	full := os.Getenv(testenv.SweepVar) == "full"
	for j, kill := range testenv.KillPoints(t, n) {
		for _, then := range []string{"pve2", "pve1"} {
			if then == "pve1" && !full && j%3 != 0 {
				continue
			}
			name := "finish"
			if then == "pve1" {
				name = "back"
			}
			t.Run(fmt.Sprintf("kill-at-%d/%s", kill, name), func(t *testing.T) {
				t.Parallel()
				r := thaw(t)
				r.run("pve2", kill)
				// Run again, as a user would, until a run succeeds with
				// nothing left to do: a move back to pve1 killed once
				// the carrier has left is finished first, then planned
				// back by the next run.
				var err error
				for try := 0; try < 4; try++ {
					if _, err = r.run(then, 0); err == nil && r.settled(then) {
						break
					}
				}
				if err != nil {
					t.Fatalf("re-run after the kill: %v", err)
				}
				r.converged(then)
			})
		}
	}
}
