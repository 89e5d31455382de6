package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/testenv"
)

// The rescue crash test: corral is killed at every API-call boundary of a
// whole rescue of web (two retained volumes, on pve1): stop the app, make
// the rescue container, hand the volumes over, start it, then stop it,
// give the volumes back and destroy it. After each kill, the rescue is
// ended as corral rescue --end does (every second kill point) and apply
// runs: web must run on pve1 with both volumes recorded, attached once,
// with their data, no rescue container left, and no volume referenced by
// no config (freed or lost). After --end alone, web's container must hold
// both volumes again, without an apply.

// rescueCycle runs a rescue of web from start to end with no command in
// between; with kill > 0 it dies at that request. It returns the number
// of requests made.
func (r *moveRig) rescueCycle(kill int64) (int64, error) {
	ctx, cancel, k, c := killable(r.t, r.srv, kill)
	defer cancel()
	ex := &apply.Executor{Client: c}
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return k.count.Load(), err
	}
	if _, err := ex.Rescues().Start(ctx, obs, "web", apply.RescueOptions{Stop: true, Declared: r.declared()}); err != nil {
		return k.count.Load(), err
	}
	if obs, err = apply.Observe(ctx, c); err != nil {
		return k.count.Load(), err
	}
	if n, err := ex.Rescues().EndApp(ctx, obs, "web", r.declared()); err != nil || n != 1 {
		return k.count.Load(), fmt.Errorf("ended %d rescues: %v", n, err)
	}
	return k.count.Load(), nil
}

// declared are web's volumes as the manifest declares them.
func (r *moveRig) declared() []plan.Volume {
	for _, a := range r.apps("pve1") {
		if a.Name == "web" {
			return a.Volumes
		}
	}
	r.t.Fatal("no app web")
	return nil
}

// endRescue is corral rescue web --end, unkilled.
func (r *moveRig) endRescue() {
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().OperatorToken)
	obs, err := apply.Observe(context.Background(), c)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := (&apply.Executor{Client: c}).Rescues().EndApp(context.Background(), obs, "web", r.declared()); err != nil {
		r.t.Fatalf("rescue --end after the kill: %v", err)
	}
}

// apply is corral apply's run: the interrupted work first (Recover, which
// ends the rescues), then the plan of what is left.
func (r *moveRig) apply() error {
	ctx := context.Background()
	c := pvetest.Client(r.t, r.srv, r.srv.Credentials().OperatorToken)
	ex := &apply.Executor{Client: c}
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return err
	}
	if obs.Interrupted() {
		if err := ex.Recover(ctx, obs); err != nil {
			return err
		}
		if obs, err = apply.Observe(ctx, c); err != nil {
			return err
		}
	}
	p, err := plan.Make(r.apps("pve1"), obs)
	if err != nil {
		return err
	}
	return ex.Apply(ctx, p, obs)
}

// backWithTheApp checks that no rescue is left and web's one container
// mounts both its recorded volumes.
func (r *moveRig) backWithTheApp() {
	r.t.Helper()
	obs := r.observe()
	if len(obs.Rescues) > 0 {
		r.t.Fatalf("rescues left: %+v", obs.Rescues["web"])
	}
	cts := obs.Apps["web"]
	if len(cts) != 1 {
		r.t.Fatalf("web has %d containers", len(cts))
	}
	mounted := map[string]bool{}
	for _, m := range cts[0].Mounts() {
		mounted[m.Volume] = true
	}
	for vk, volid := range r.records(obs, "pve1") {
		if !mounted[volid] {
			r.t.Fatalf("web's container %d does not mount %s (%s) after the rescue ended; it mounts %v", cts[0].VMID, vk, volid, cts[0].Mounts())
		}
	}
}

func TestRescueCrashAtEveryAPICall(t *testing.T) {
	t.Parallel()
	thaw := frozenMoveRig(t)
	clean := thaw(t)
	n, err := clean.rescueCycle(0)
	if err != nil {
		t.Fatalf("clean rescue: %v", err)
	}
	clean.backWithTheApp()
	if st := clean.observe().Apps["web"][0].Status; st != "stopped" {
		t.Fatalf("web after a rescue is %s, want stopped", st)
	}
	if err := clean.apply(); err != nil {
		t.Fatalf("apply after the rescue: %v", err)
	}
	clean.converged("pve1")
	t.Logf("requests of a rescue: %d", n)
	for j, kill := range testenv.KillPoints(t, n) {
		then := "apply"
		if j%2 == 1 {
			then = "end"
		}
		t.Run(fmt.Sprintf("kill-at-%d/%s", kill, then), func(t *testing.T) {
			t.Parallel()
			r := thaw(t)
			r.rescueCycle(kill)
			if then == "end" {
				r.endRescue()
				r.backWithTheApp()
			}
			var err error
			for try := 0; try < 3; try++ {
				if err = r.apply(); err == nil && r.settled("pve1") {
					break
				}
			}
			if err != nil {
				t.Fatalf("apply after the kill: %v", err)
			}
			if rs := r.observe().Rescues; len(rs) > 0 {
				t.Fatalf("rescues left after apply: %+v", rs["web"])
			}
			r.converged("pve1")
		})
	}
}

// TestRescueTagsEdited: a rescue container whose rescue tags were edited
// away (corral's own tag left) mounts the app's keeper volume, so it is
// taken for a second container of the app: the plan refuses the app,
// naming both containers, and never starts the app beside it or frees
// anything. With the tags back, apply ends the rescue.
func TestRescueTagsEdited(t *testing.T) {
	t.Parallel()
	r := frozenMoveRig(t)(t)
	ctx := context.Background()
	c := pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken)
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := (&apply.Executor{Client: c}).Rescues().Start(ctx, obs, "web", apply.RescueOptions{Stop: true, Declared: r.declared()})
	if err != nil {
		t.Fatal(err)
	}
	root := pvetest.Client(t, r.srv, r.srv.Credentials().RootToken)
	if err := root.UpdateContainerConfig(ctx, s.Node, s.VMID, &pve.ConfigUpdate{Tags: []string{plan.TagManaged}}); err != nil {
		t.Fatal(err)
	}
	_, err = plan.Make(r.apps("pve1"), r.observe())
	var refused *plan.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), strconv.Itoa(s.VMID)) || !strings.Contains(err.Error(), strconv.Itoa(s.AppVMID)) {
		t.Fatalf("plan with the rescue's tags edited: %v, want a refusal naming ct %d and ct %d", err, s.VMID, s.AppVMID)
	}
	t.Logf("refused as wanted: %v", err)
	tags := []string{plan.TagManaged, plan.TagRescue, plan.TagRescuingPrefix + "web"}
	if err := root.UpdateContainerConfig(ctx, s.Node, s.VMID, &pve.ConfigUpdate{Tags: tags}); err != nil {
		t.Fatal(err)
	}
	if err := r.apply(); err != nil {
		t.Fatalf("apply with the tags back: %v", err)
	}
	r.converged("pve1")
}

// TestRescueRefusedWhereItsVolumesAreNotAtHome: an app whose volumes a
// move's carrier may hold, or whose restore was interrupted, is refused
// before anything is read or changed (its volumes are not all in its
// keeper, so a rescue would show only some of them).
func TestRescueRefusedWhereItsVolumesAreNotAtHome(t *testing.T) {
	t.Parallel()
	for name, obs := range map[string]*plan.Observed{
		"moving":    {Carriers: map[string]*plan.Carrier{"web": {VMID: 200, Node: "pve1"}}},
		"restoring": {Restores: map[string]*plan.Restore{"web": {App: "web"}}},
	} {
		_, err := (&apply.Executor{}).Rescues().Start(context.Background(), obs, "web", apply.RescueOptions{Stop: true})
		if err == nil || !strings.Contains(err.Error(), "corral apply") {
			t.Errorf("%s: %v, want a refusal that says to run corral apply first", name, err)
		}
	}
}
