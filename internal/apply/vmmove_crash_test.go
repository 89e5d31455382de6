package apply_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/testenv"
)

// The VM move crash test (issue 34): VM app web runs on pve1 holding its
// retained disk data, while its disk logs is back in pve1's keeper VM
// (the manifest dropped it once). The move to pve2 lists data, logs and
// a new disk cache: logs is attached on pve1 first, the VM migrates
// with data and logs, cache is created by pve2's keeper VM and attached
// there. corral is killed at each API call of that move, then run again,
// once with the manifest still on pve2 (finish) and once back on pve1.
// After the kill every disk is in at most one VM's config (data and logs
// in exactly one, with their bytes); after the run again the VM runs on
// the manifest's node holding all three, the plan is empty, and no
// volume on any node is referenced by no config.

const vmMoveCrashManifest = `apps:
  - name: web
    kind: vm
    vmid: 150
    node: NODE
    memory: 512
    network: {ip: 10.20.0.71/24, gateway: 10.20.0.1}
    vm: {disk: {size: 2G}}
    volumes:
VOLUMES`

type vmMoveRig struct {
	t   *testing.T
	srv *sim.Server
}

// vmMoveApps is the manifest with web on node and the volumes named.
func vmMoveApps(t *testing.T, node string, vols ...string) []plan.App {
	var b strings.Builder
	for _, v := range vols {
		fmt.Fprintf(&b, "      - {name: %s, size: 512M}\n", v)
	}
	text := strings.Replace(strings.Replace(vmMoveCrashManifest, "NODE", node, 1), "VOLUMES", b.String(), 1)
	return loadAppsText(t, text)
}

// run plans and applies apps, killed at request kill (0: never), and
// returns the requests made.
func (r *vmMoveRig) run(apps []plan.App, kill int64) (int64, error) {
	ctx, cancel, k, c := killable(r.t, r.srv, kill)
	defer cancel()
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return k.count.Load(), err
	}
	p, err := plan.Make(apps, obs)
	if err == nil {
		err = (&apply.Executor{Client: c}).Apply(ctx, p, obs)
	}
	return k.count.Load(), err
}

// holders are the retained disks of every VM, by serial: "node vmid
// volid" of each VM that holds it.
func (r *vmMoveRig) holders() map[string][]string {
	out := map[string][]string{}
	for serial, hs := range vmDiskHolders(r.t, r.srv) {
		for _, h := range hs {
			out[serial] = append(out[serial], fmt.Sprintf("%s %d %s", h.node, h.vmid, h.volid))
		}
	}
	return out
}

// diskBytes reads (data nil) or writes the start of volid's file on node.
func (r *vmMoveRig) diskBytes(node, volid string, data []byte) []byte {
	r.t.Helper()
	return volumeHead(r.t, r.srv, node, volid, data)
}

// check fails unless each of data and logs is held by exactly one VM
// (with vmid on node, when vmid is not 0) with its bytes, and cache by at
// most one (exactly one when vmid is not 0).
func (r *vmMoveRig) check(vmid int, node string, marks map[string][]byte) {
	r.t.Helper()
	all := r.holders()
	for _, name := range []string{"data", "logs", "cache"} {
		hs := all[plan.VMVolumeSerial("web", name)]
		if len(hs) > 1 || len(hs) == 0 && (vmid != 0 || marks[name] != nil) {
			r.t.Fatalf("volume %s is held by %v, want one VM (all: %v)", name, hs, all)
		}
		if len(hs) == 0 {
			continue
		}
		var n, volid string
		var id int
		fmt.Sscan(hs[0], &n, &id, &volid)
		if vmid != 0 && (id != vmid || n != node) {
			r.t.Fatalf("volume %s is on vm %d on %s, want vm %d on %s (all: %v)", name, id, n, vmid, node, all)
		}
		if w := marks[name]; w != nil && !bytes.Equal(r.diskBytes(n, volid, nil), w) {
			r.t.Fatalf("volume %s (%s on %s) holds %q, want %q", name, volid, n, r.diskBytes(n, volid, nil), w)
		}
	}
}

// noStrays fails when a node's local-lvm holds a volume no config there
// references: a copy a migration left, or a disk lost.
func (r *vmMoveRig) noStrays() {
	r.t.Helper()
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().RootToken)
	ctx := context.Background()
	res, err := c.ClusterResources(ctx, "vm")
	if err != nil {
		r.t.Fatal(err)
	}
	refs := map[string]bool{}
	for _, g := range res {
		if g.Type != "qemu" && g.Type != "lxc" {
			continue
		}
		var vals map[string]string
		if g.Type == "qemu" {
			conf, err := c.VMConfigOf(ctx, g.Node, g.VMID, false)
			if err != nil {
				r.t.Fatal(err)
			}
			vals = conf.Values
		}
		for _, v := range vals {
			refs[g.Node+"/"+strings.SplitN(v, ",", 2)[0]] = true
		}
	}
	for _, node := range []string{"pve1", "pve2"} {
		content, err := c.StorageContent(ctx, node, "local-lvm", "", 0)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, v := range content {
			if !refs[node+"/"+v.VolID] {
				r.t.Fatalf("%s on %s is referenced by no config", v.VolID, node)
			}
		}
	}
}

// waitTasks waits until no task runs on either node (the check of the
// state a kill left reads configs a running migration moves).
func (r *vmMoveRig) waitTasks() {
	r.t.Helper()
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().RootToken)
	ctx := context.Background()
	for _, node := range []string{"pve1", "pve2"} {
		tasks, err := c.TaskList(ctx, node, pve.TaskFilter{Source: "active"})
		if err != nil {
			r.t.Fatal(err)
		}
		for _, task := range tasks {
			if _, err := c.WaitTask(ctx, task.UPID, pve.WaitOptions{}); err != nil && !errors.As(err, new(*pve.TaskError)) {
				r.t.Fatal(err)
			}
		}
	}
}

// frozenVMMove is the state described above, stopped; thaw starts an
// emulator on a copy of it.
func frozenVMMove(t *testing.T, marks map[string][]byte, opts ...pvetest.Option) (thaw func(t *testing.T) *vmMoveRig) {
	start := func(t *testing.T, dir string) *vmMoveRig {
		return &vmMoveRig{t: t, srv: pvetest.Start(t, append([]pvetest.Option{pvetest.InDir(dir), pvetest.Nodes(2)}, opts...)...).Server}
	}
	base := start(t, t.TempDir())
	img := filepath.Join(t.TempDir(), "img.qcow2")
	if err := os.WriteFile(img, []byte("QFI\xfb"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 2<<30); err != nil {
		t.Fatal(err)
	}
	if err := base.srv.Cluster().OfferImportVolume("local", sim.ImportImageName, img); err != nil {
		t.Fatal(err)
	}
	if _, err := base.run(vmMoveApps(t, "pve1", "data", "logs"), 0); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	for serial, hs := range base.holders() {
		for name, b := range marks {
			if serial == plan.VMVolumeSerial("web", name) {
				var n, volid string
				var id int
				fmt.Sscan(hs[0], &n, &id, &volid)
				base.diskBytes(n, volid, b)
			}
		}
	}
	if _, err := base.run(vmMoveApps(t, "pve1", "data"), 0); err != nil {
		t.Fatalf("apply without logs: %v", err)
	}
	if err := base.srv.Close(); err != nil {
		t.Fatal(err)
	}
	frozen := base.srv.Dir()
	return func(t *testing.T) *vmMoveRig {
		dir := t.TempDir()
		if out, err := exec.Command("cp", "-a", frozen+"/.", dir).CombinedOutput(); err != nil {
			t.Fatalf("copy emulator state: %v\n%s", err, out)
		}
		return start(t, dir)
	}
}

// TestVMMoveCrashAtEveryAPICall: see above.
func TestVMMoveCrashAtEveryAPICall(t *testing.T) {
	t.Parallel()
	marks := map[string][]byte{"data": []byte("data-123"), "logs": []byte("logs-456")}
	thaw := frozenVMMove(t, marks)
	clean := thaw(t)
	n, err := clean.run(vmMoveApps(t, "pve2", "data", "logs", "cache"), 0)
	if err != nil {
		t.Fatalf("clean move: %v", err)
	}
	clean.check(150, "pve2", marks)
	clean.noStrays()
	for _, kill := range testenv.KillPoints(t, n) {
		for _, end := range []string{"pve2", "pve1"} {
			t.Run(fmt.Sprintf("kill-at-%d/then-%s", kill, end), func(t *testing.T) {
				t.Parallel()
				r := thaw(t)
				if made, err := r.run(vmMoveApps(t, "pve2", "data", "logs", "cache"), kill); err == nil {
					if made < kill {
						t.Skipf("this run made %d requests, fewer than the kill point %d: nothing was killed", made, kill)
					}
					t.Fatalf("the run killed at request %d of %d ended without an error", kill, n)
				}
				r.waitTasks() // tasks a kill left run on at PVE
				r.check(0, "", marks)
				apps := vmMoveApps(t, end, "data", "logs", "cache")
				if _, err := r.run(apps, 0); err != nil {
					t.Fatalf("the run after the kill: %v", err)
				}
				r.check(150, end, marks)
				r.noStrays()
				c := pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken)
				obs, err := apply.Observe(context.Background(), c)
				if err != nil {
					t.Fatal(err)
				}
				if vms := obs.VMs["web"]; len(vms) != 1 || vms[0].Node != end || vms[0].Status != "running" || vms[0].Config["lock"] != "" {
					t.Fatalf("web's VM after the run again: %+v", vms)
				}
				if p, err := plan.Make(apps, obs); err != nil || p.HasChanges() {
					t.Fatalf("not converged after the run again: %v %+v", err, p)
				}
			})
		}
	}
}

// runThrough plans and applies apps through k (its base and cancel
// filled in here).
func (r *vmMoveRig) runThrough(apps []plan.App, k *matchKiller) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k.base, k.cancel = r.srv.HTTPClient().Transport, cancel
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().OperatorToken, pvetest.Transport(k), fastRetry)
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return err
	}
	p, err := plan.Make(apps, obs)
	if err == nil {
		err = (&apply.Executor{Client: c}).Apply(ctx, p, obs)
	}
	return err
}

func isVMMigrate(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/qemu/") && strings.HasSuffix(r.URL.Path, "/migrate")
}

// TestVMMoveKilledWhileMigrating: tasks take PVE's time (a migration
// 8 s); corral is killed right after its migrate request, while PVE's
// qmigrate task runs with the VM locked "migrate", and the next run
// starts at once, over it: it waits for the task, then finishes the
// move (or, with the manifest back on pve1, moves the VM back), and
// converges as in TestVMMoveCrashAtEveryAPICall.
func TestVMMoveKilledWhileMigrating(t *testing.T) {
	t.Parallel()
	marks := map[string][]byte{"data": []byte("data-123"), "logs": []byte("logs-456")}
	thaw := frozenVMMove(t, marks, pvetest.TimeScale(1))
	for _, end := range []string{"pve2", "pve1"} {
		t.Run("then-"+end, func(t *testing.T) {
			t.Parallel()
			r := thaw(t)
			k := &matchKiller{match: isVMMigrate, nth: 1}
			if err := r.runThrough(vmMoveApps(t, "pve2", "data", "logs", "cache"), k); err == nil || !k.dead.Load() {
				t.Fatalf("the run was not killed at its migrate request (%v)", err)
			}
			root := pvetest.Client(t, r.srv, r.srv.Credentials().RootToken)
			if conf, err := root.VMConfigOf(context.Background(), "pve1", 150, true); err != nil || conf.Values["lock"] != "migrate" {
				t.Fatalf("right after the kill vm 150 on pve1 is %v (%v), want locked migrate", conf, err)
			}
			apps := vmMoveApps(t, end, "data", "logs", "cache")
			if _, err := r.run(apps, 0); err != nil {
				t.Fatalf("the run over the running migration: %v", err)
			}
			r.check(150, end, marks)
			r.noStrays()
			if p, err := plan.Make(apps, r.observe()); err != nil || p.HasChanges() {
				t.Fatalf("not converged: %v %+v", err, p)
			}
		})
	}
}

func (r *vmMoveRig) observe() *plan.Observed {
	obs, err := apply.Observe(context.Background(), pvetest.Client(r.t, r.srv, r.srv.Credentials().OperatorToken))
	if err != nil {
		r.t.Fatal(err)
	}
	return obs
}
