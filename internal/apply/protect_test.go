package apply_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
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

// An apply interrupted while a keeper's protection is off sets it again
// before it returns (issue 11, scenario 2).
func TestInterruptedApplyLeavesKeeperProtected(t *testing.T) {
	r := newRig(t)
	if _, err := r.run(cycle[0], 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := &interrupter{base: r.srv.HTTPClient().Transport, trigger: "protection=0", cancel: cancel}
	c := pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken, pvetest.Transport(in))
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// A new volume: the keeper's protection is cleared to allocate it.
	apps := loadApps(t, cycle[0])
	apps[0].Volumes = append(apps[0].Volumes, plan.Volume{Name: "extra", Storage: "local-lvm", Size: 1 << 30, Mount: "/srv/extra", Reclaim: plan.Retain})
	p, err := plan.Make(apps, obs)
	if err != nil {
		t.Fatal(err)
	}
	err = (&apply.Executor{Client: c}).Apply(ctx, p, obs)
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
