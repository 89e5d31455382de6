package apply_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
)

// Moves whose intent record was tampered with, or that left more than
// one carrier, and the stale copies of a move killed as its carrier goes
// (docs/moving.md, "What a kill leaves").

// matchKiller is a transport that kills corral at the nth request that
// match accepts: with drop the request never reaches PVE (corral dies
// just before it), without it the request is carried out and its answer
// lost. Nothing is sent after it.
type matchKiller struct {
	base   http.RoundTripper
	match  func(*http.Request) bool
	nth    int64
	drop   bool
	cancel context.CancelFunc
	seen   atomic.Int64
	dead   atomic.Bool
}

func (k *matchKiller) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	if k.match(r) && k.seen.Add(1) == k.nth {
		k.dead.Store(true)
		if !k.drop {
			if resp, err := k.base.RoundTrip(r); err == nil {
				resp.Body.Close()
			}
		}
		k.cancel()
		return nil, errKilled
	}
	return k.base.RoundTrip(r)
}

// runKilled applies the manifest with web on node, killed as k says
// (k's base and cancel are filled in). It fails the test if k never
// fired.
func (r *moveRig) runKilled(node string, k *matchKiller) {
	r.t.Helper()
	if err := r.runThrough(node, k); err == nil || !k.dead.Load() {
		r.t.Fatalf("the run was not killed (%v)", err)
	}
}

// runCounted applies the manifest with web on node through k, which is
// expected not to fire (nth 0): it counts.
func (r *moveRig) runCounted(node string, k *matchKiller) {
	r.t.Helper()
	if err := r.runThrough(node, k); err != nil {
		r.t.Fatal(err)
	}
}

// runThrough plans and applies the manifest with web on node, its
// requests going through k.
func (r *moveRig) runThrough(node string, k *matchKiller) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k.base, k.cancel = r.srv.HTTPClient().Transport, cancel
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().OperatorToken, pvetest.Transport(k), fastRetry)
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return err
	}
	p, err := plan.Make(r.apps(node), obs)
	if err != nil {
		return err
	}
	return (&apply.Executor{Client: c}).Apply(ctx, p, obs)
}

// settle runs the manifest with web on node until a run succeeds with
// nothing left to do (a rollback killed late is finished first).
func (r *moveRig) settle(node string) {
	r.t.Helper()
	var err error
	for try := 0; try < 4; try++ {
		if _, err = r.run(node, 0); err == nil && r.settled(node) {
			return
		}
	}
	r.t.Fatalf("re-run: %v", err)
}

// root is a client with the emulator's root token: the user at the web
// UI.
func (r *moveRig) root() *pve.Client {
	return pvetest.Client(r.t, r.srv, r.srv.Credentials().RootToken)
}

func isMigrate(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/migrate")
}

func isMoveVolume(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/move_volume")
}

// interrupted is a rig with web (two marked volumes) on pve1 whose move
// to pve2 was killed just before the carrier's migration: the carrier
// is on pve1 and holds both volumes.
func interrupted(t *testing.T) (*moveRig, *plan.Carrier) {
	r := startMoveRig(t, t.TempDir())
	if _, err := r.run("pve1", 0); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	r.mark("pve1")
	r.runKilled("pve2", &matchKiller{match: isMigrate, nth: 1, drop: true})
	car := r.observe().Carriers["web"]
	if car == nil || car.Node != "pve1" || len(car.Holds()) != 2 {
		t.Fatalf("after the kill: carrier %+v, want one on pve1 holding 2 volumes", car)
	}
	return r, car
}

// volumes lists every image volume on every node's local-lvm.
func (r *moveRig) volumes() []string {
	var out []string
	for _, n := range []string{"pve1", "pve2", "pve3"} {
		entries, err := r.srv.Cluster().Content(n, "local-lvm", "", 0)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, e := range entries {
			out = append(out, n+"/"+e.VolID())
		}
	}
	slices.Sort(out)
	return out
}

// handCarrier creates a carrier by hand on node, as a killed run would
// have: protected, tagged, its Notes given.
func (r *moveRig) handCarrier(node string, tags, notes string) int {
	ctx := context.Background()
	pc := r.root()
	vmid, err := pc.NextID(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	upid, err := pc.CreateContainer(ctx, node, &pve.ContainerCreate{VMID: vmid,
		OSTemplate: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", RootFS: pve.MountPoint{Volume: "local-lvm:1"},
		Config: pve.ConfigUpdate{Hostname: pve.Ptr("corral-carrier"), Raw: map[string]string{"tags": tags}, Description: &notes, Protection: pve.Ptr(true)}})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := pc.WaitTask(ctx, upid, pve.WaitOptions{}); err != nil {
		r.t.Fatal(err)
	}
	return vmid
}

// An app with two carriers: an empty one (no volume, no carrying line:
// a run killed right after creating it) is destroyed and the move
// finishes (or rolls back); two that hold volumes refuse the app,
// naming both, and change nothing.
func TestMoveWithTwoCarriers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, then string
		notes      func(real *plan.Carrier) plan.CarrierNotes
		untagged   bool
	}{
		{name: "empty second carrier, finish", then: "pve2", notes: func(*plan.Carrier) plan.CarrierNotes {
			return plan.CarrierNotes{App: "web", From: "pve1", To: "pve2"}
		}},
		{name: "empty second carrier, back", then: "pve1", notes: func(*plan.Carrier) plan.CarrierNotes {
			return plan.CarrierNotes{App: "web", From: "pve1", To: "pve2"}
		}},
		{name: "empty second carrier of an older corral (no app tag)", then: "pve2", untagged: true, notes: func(*plan.Carrier) plan.CarrierNotes {
			return plan.CarrierNotes{App: "web", From: "pve1", To: "pve2"}
		}},
		{name: "both carry volumes", then: "pve2", notes: func(real *plan.Carrier) plan.CarrierNotes {
			return plan.CarrierNotes{App: "web", From: "pve1", To: "pve3", Carrying: map[plan.VolumeKey]plan.AdoptIntent{
				{App: "web", Name: "data"}: {Source: "local-lvm:vm-100-disk-1", Key: "unused0"}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, real := interrupted(t)
			tags := "corral;corral-carrier;corral-moving-web"
			if tc.untagged {
				tags = "corral;corral-carrier"
			}
			second := r.handCarrier("pve1", tags, tc.notes(real).Render())
			if len(tc.notes(real).Carrying) == 0 {
				// One run: the empty carrier goes, the move goes on.
				if _, err := r.run(tc.then, 0); err != nil {
					t.Fatalf("apply with an empty second carrier %d: %v", second, err)
				}
				r.converged(tc.then)
				return
			}
			before := r.volumes()
			_, err := r.run(tc.then, 0)
			for _, want := range []string{fmt.Sprintf("CT %d on pve1", real.VMID), fmt.Sprintf("CT %d on pve1", second), "carriers holding", "destroy the emptied carrier"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("apply with two carriers holding volumes: %v; want an error with %q", err, want)
				}
			}
			if after := r.volumes(); !slices.Equal(before, after) {
				t.Fatalf("volumes changed by the refused run:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// A carrier whose Notes the user edited (in the web UI): the next apply
// refuses the app, naming the carrier and the fix, and loses no volume
// (it neither moves nor creates any); once the Notes are written back,
// the move finishes.
func TestMoveCarrierNotesEdited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tags  string
		notes func(n plan.CarrierNotes) string
		want  string
	}{
		{name: "no longer parse", tags: "corral;corral-carrier;corral-moving-web",
			notes: func(plan.CarrierNotes) string { return "my carrier, do not touch" }, want: "no longer name a move"},
		{name: "no longer parse, older corral's carrier (no app tag)", tags: "corral;corral-carrier",
			notes: func(n plan.CarrierNotes) string {
				return strings.Replace(n.Render(), "corral-move: ", "corral-moved: ", 1)
			}, want: "no longer name a move"},
		{name: "name another app", tags: "corral;corral-carrier;corral-moving-web",
			notes: func(n plan.CarrierNotes) string { n.App = "other"; return n.Render() }, want: "its tag names app web"},
		{name: "name another app, older corral's carrier", tags: "corral;corral-carrier",
			notes: func(n plan.CarrierNotes) string { n.App = "other"; return n.Render() }, want: "carry volumes of web"},
		{name: "wiped, older corral's carrier", tags: "corral;corral-carrier",
			notes: func(plan.CarrierNotes) string { return "" }, want: "no longer name a move"},
		// Without the refusal the move would hand data over, then stop at
		// the carrier's destroy with logs still in it, nameless.
		{name: "a carrying line deleted", tags: "corral;corral-carrier;corral-moving-web",
			notes: func(n plan.CarrierNotes) string {
				return strings.Replace(n.Render(), fmt.Sprintf("corral-carrying: web/logs=%s>%s\n", n.Carrying[plan.VolumeKey{App: "web", Name: "logs"}].Source, n.Carrying[plan.VolumeKey{App: "web", Name: "logs"}].Key), "", 1)
			}, want: "but no corral-carrying line of its Notes names that entry"},
		{name: "a carrying line mangled", tags: "corral;corral-carrier;corral-moving-web",
			notes: func(n plan.CarrierNotes) string { return strings.Replace(n.Render(), ">unused", " unused", 1) },
			want:  "carrying lines corral cannot read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, car := interrupted(t)
			pc := r.root()
			ctx := context.Background()
			set := &pve.ConfigUpdate{Raw: map[string]string{"tags": tc.tags}, Description: pve.Ptr(tc.notes(car.Notes))}
			if *set.Description == "" {
				set = &pve.ConfigUpdate{Raw: map[string]string{"tags": tc.tags}, Delete: []string{"description"}}
			}
			if err := pc.UpdateContainerConfig(ctx, "pve1", car.VMID, set); err != nil {
				t.Fatal(err)
			}
			before := r.volumes()
			// The plan's warnings say it too, with what it holds and the fix.
			warned := false
			for _, w := range r.observe().Warnings {
				warned = warned || (strings.Contains(w, fmt.Sprintf("carrier CT %d on pve1", car.VMID)) &&
					strings.Contains(w, "write back its Notes") && strings.Contains(w, "unused0=local-lvm:vm-"+strconv.Itoa(car.VMID)))
			}
			if !warned {
				t.Errorf("no warning names carrier %d, what it holds and the fix: %q", car.VMID, r.observe().Warnings)
			}
			for _, then := range []string{"pve2", "pve1"} {
				_, err := r.run(then, 0)
				for _, want := range []string{fmt.Sprintf("carrier CT %d on pve1", car.VMID), tc.want, "write back its Notes", "unused0=local-lvm:vm-" + strconv.Itoa(car.VMID)} {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("apply (web on %s) with the carrier's Notes edited: %v; want an error with %q", then, err, want)
					}
				}
			}
			if after := r.volumes(); !slices.Equal(before, after) {
				t.Fatalf("volumes changed by the refused runs:\nbefore %v\nafter  %v", before, after)
			}
			// The fix the error names.
			if err := pc.UpdateContainerConfig(ctx, "pve1", car.VMID, &pve.ConfigUpdate{Description: pve.Ptr(car.Notes.Render())}); err != nil {
				t.Fatal(err)
			}
			r.settle("pve2")
			r.converged("pve2")
		})
	}
}

// Killed as the carrier is destroyed, a move has already freed the
// stale copies a killed migration left on its other nodes: once the
// carrier is gone, nothing says where they are (and its VMID may be the
// next carrier's).
func TestMoveFreesStaleCopiesBeforeTheCarrierGoes(t *testing.T) {
	t.Parallel()
	r, car := interrupted(t)
	// A migration of the carrier to pve3, killed, left a copy there (the
	// move was then turned back: pve3 is in its Notes' was=).
	ctx := context.Background()
	pc := r.root()
	var stale []string
	for _, node := range []string{"pve3"} {
		volid, err := pc.AllocVolume(ctx, node, "local-lvm", car.VMID, fmt.Sprintf("vm-%d-disk-9", car.VMID), "1G")
		if err != nil {
			t.Fatal(err)
		}
		stale = append(stale, node+"/"+volid)
	}
	n := car.Notes
	n.Was = []string{"pve3"}
	if err := pc.UpdateContainerConfig(ctx, "pve1", car.VMID, &pve.ConfigUpdate{Description: pve.Ptr(n.Render())}); err != nil {
		t.Fatal(err)
	}
	isDestroy := func(req *http.Request) bool {
		return req.Method == http.MethodDelete && strings.HasSuffix(req.URL.Path, "/lxc/"+strconv.Itoa(car.VMID))
	}
	r.runKilled("pve2", &matchKiller{match: isDestroy, nth: 1})
	if len(r.observe().Carriers) != 0 {
		t.Fatal("the carrier is still there after the kill at its destroy")
	}
	r.settle("pve2")
	for _, v := range stale {
		if slices.Contains(r.volumes(), v) {
			t.Errorf("stale copy %s is left", v)
		}
	}
	r.converged("pve2")
}

// A carrier of an older corral version has no corral-moving-<app> tag:
// the move still finds it (findMove reads the untagged ones) and
// finishes.
func TestMoveFinishesUntaggedCarrier(t *testing.T) {
	t.Parallel()
	r, car := interrupted(t)
	if car.Tagged != "web" {
		t.Fatalf("carrier %d is tagged for %q, want web", car.VMID, car.Tagged)
	}
	if err := r.root().UpdateContainerConfig(context.Background(), "pve1", car.VMID, &pve.ConfigUpdate{Tags: []string{"corral", "corral-carrier"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.run("pve2", 0); err != nil {
		t.Fatalf("finish the move of an untagged carrier: %v", err)
	}
	r.converged("pve2")
}

// A move reads the configs of its own app's carriers (tagged
// corral-moving-<app>) and of untagged ones, not those of other apps'
// moves: a drain of a hundred apps would read a hundred carriers per app.
func TestMoveReadsOnlyItsCarriers(t *testing.T) {
	t.Parallel()
	r, car := interrupted(t)
	other := plan.CarrierNotes{App: "other", From: "pve3", To: "pve2"}
	theirs := r.handCarrier("pve3", "corral;corral-carrier;corral-moving-other", other.Render())
	old := r.handCarrier("pve3", "corral;corral-carrier", other.Render())
	ctx := context.Background()
	obs, err := apply.Observe(ctx, pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(r.apps("pve2"), obs)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reads := map[int]int{}
	count := &matchKiller{match: func(req *http.Request) bool {
		if m := ctPath.FindStringSubmatch(req.URL.Path); m != nil && req.Method == http.MethodGet && m[3] == "/config" {
			id, _ := strconv.Atoi(m[2])
			mu.Lock()
			reads[id]++
			mu.Unlock()
		}
		return false
	}}
	count.base, count.cancel = r.srv.HTTPClient().Transport, func() {}
	c := pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken, pvetest.Transport(count))
	if err := (&apply.Executor{Client: c}).Apply(ctx, p, obs); err != nil {
		t.Fatal(err)
	}
	if reads[theirs] != 0 || reads[old] == 0 || reads[car.VMID] == 0 {
		t.Fatalf("config reads: another app's carrier %d: %d (want 0), an untagged one %d: %d, web's %d: %d (want some)", theirs, reads[theirs], old, reads[old], car.VMID, reads[car.VMID])
	}
}
