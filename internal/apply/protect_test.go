package apply_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

// interrupter cancels the run (as Ctrl-C or SIGTERM do) right after PVE
// answered the first request whose body contains trigger; the network
// keeps working.
type interrupter struct {
	base    http.RoundTripper
	trigger string
	cancel  context.CancelFunc
	fired   atomic.Bool
}

func (i *interrupter) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := i.base.RoundTrip(r)
	if err == nil && strings.Contains(string(body), i.trigger) && i.fired.CompareAndSwap(false, true) {
		i.cancel()
	}
	return resp, err
}

// applyNewVolume observes r's cluster through rt (the operator token's
// client) and applies cycle[0] with one more retained volume, which the
// keeper's protection is cleared to allocate: the change both protection
// tests run through their faulty transports.
func applyNewVolume(t *testing.T, ctx context.Context, r *rig, rt http.RoundTripper) error {
	t.Helper()
	c := pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken, pvetest.Transport(rt))
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	apps := loadApps(t, cycle[0])
	apps[0].Volumes = append(apps[0].Volumes, plan.Volume{Name: "extra", Storage: "local-lvm", Size: 1 << 30, Mount: "/srv/extra", Reclaim: plan.Retain})
	p, err := plan.Make(apps, obs)
	if err != nil {
		t.Fatal(err)
	}
	return (&apply.Executor{Client: c}).Apply(ctx, p, obs)
}

// An apply interrupted while a keeper's protection is off sets it again
// before it returns (issue 11, scenario 2).
func TestInterruptedApplyLeavesKeeperProtected(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if _, err := r.run(cycle[0], 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := &interrupter{base: r.srv.HTTPClient().Transport, trigger: "protection=0", cancel: cancel}
	err := applyNewVolume(t, ctx, r, in)
	if !in.fired.Load() || !errors.Is(err, context.Canceled) {
		t.Fatalf("apply: %v (interrupted: %v), want it cancelled after clearing protection", err, in.fired.Load())
	}
	for _, ks := range r.observe().Keepers {
		for _, k := range ks {
			if !k.Protected {
				t.Errorf("keeper %d is unprotected after the interrupted apply", k.VMID)
			}
		}
	}
}

// A container edited between the plan and apply (the web UI, another
// tool) stops its app's change before anything of it changes: apply never
// acts on what it read before.
func TestApplyStopsOnAContainerChangedSincePlanned(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if _, err := r.run(cycle[0], 0); err != nil {
		t.Fatal(err)
	}
	c := r.client(nil)
	ctx := context.Background()
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(loadApps(t, cycle[1]), obs) // memory changes
	if err != nil {
		t.Fatal(err)
	}
	ct := obs.Apps["db"][0]
	if ct.Digest == "" {
		t.Fatal("observed container has no digest")
	}
	if err := r.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", ct.VMID, map[string]string{"cores": "3"}); err != nil {
		t.Fatal(err)
	}
	err = (&apply.Executor{Client: c}).Apply(ctx, p, obs)
	var stale *apply.PlanStaleError
	if !errors.As(err, &stale) || stale.VMID != ct.VMID {
		t.Fatalf("apply after an edit: %v, want *PlanStaleError for ct %d", err, ct.VMID)
	}
	conf, _, err := r.srv.Cluster().CTConfig(model.Auth{UserID: "root@pam"}, "pve", ct.VMID, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if conf["memory"] != "512" || conf["cores"] != "3" {
		t.Errorf("config after the stopped apply: memory %s cores %s, want 512 and 3 (unchanged by apply)", conf["memory"], conf["cores"])
	}
}

// protectionFaults turns the emulator's fault injection on for the
// keeper's config writes at a moment chosen by the request stream: from
// the first request whose body contains on (after it was answered, or
// before it was sent with onBefore), every write to the keeper's config
// fails with a 5xx, until clearAfter protection=1 writes have failed
// (0: for good).
type protectionFaults struct {
	base       http.RoundTripper
	srv        interface{ SetFaults(sim.FaultSpec) }
	keeper     int
	on         string
	onBefore   bool
	clearAfter int32
	armed      atomic.Bool
	reprotects atomic.Int32
}

func (p *protectionFaults) arm() {
	p.srv.SetFaults(sim.FaultSpec{Write5xx: 1, Match: fmt.Sprintf("/lxc/%d/config", p.keeper)})
}

func (p *protectionFaults) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	trigger := strings.Contains(string(body), p.on)
	if trigger && p.onBefore && p.armed.CompareAndSwap(false, true) {
		p.arm()
	}
	resp, err := p.base.RoundTrip(r)
	if trigger && !p.onBefore && err == nil && p.armed.CompareAndSwap(false, true) {
		p.arm()
	}
	if p.armed.Load() && strings.Contains(string(body), "protection=1") {
		if n := p.reprotects.Add(1); p.clearAfter > 0 && n == p.clearAfter {
			p.srv.SetFaults(sim.FaultSpec{})
		}
	}
	return resp, err
}

// The keeper's protection is set again after a volume operation even
// when PVE refuses the first tries (5xx), and when every try fails the
// apply fails saying protection is off and how to set it, with its own
// error kept beside it (issue 26, scenario 7).
func TestKeeperReprotectRetriedAndReported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// on: the request that arms the faults; onBefore: before it is
		// sent (the re-protect itself fails) or after it was answered
		// (the volume write fails too: the apply is already failing).
		on         string
		onBefore   bool
		clearAfter int32
		wantErr    []string // "" entries: want no error
		protected  bool
	}{
		{name: "retried", on: "protection=1", onBefore: true, clearAfter: 2, protected: true},
		{name: "fails for good while the apply fails", on: "protection=0", wantErr: []string{
			"injected fault", "protection is OFF on keeper", "on node pve", "--protection 1", "`corral apply` sets it again"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			if _, err := r.run(cycle[0], 0); err != nil {
				t.Fatal(err)
			}
			keeper := r.observe().Keepers["pve"][0].VMID
			pf := &protectionFaults{base: r.srv.HTTPClient().Transport, srv: r.srv, keeper: keeper, on: tt.on, onBefore: tt.onBefore, clearAfter: tt.clearAfter}
			err := applyNewVolume(t, context.Background(), r, pf)
			r.srv.SetFaults(sim.FaultSpec{})
			if !pf.armed.Load() {
				t.Fatalf("the faults were never armed (%q not sent); apply: %v", tt.on, err)
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("apply: %v, want the re-protect retried past its 5xx", err)
			}
			for _, want := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("apply error lacks %q: %v", want, err)
				}
			}
			if got := r.observe().Keepers["pve"][0].Protected; got != tt.protected {
				t.Errorf("keeper %d protected %v after the apply, want %v", keeper, got, tt.protected)
			}
		})
	}
}
