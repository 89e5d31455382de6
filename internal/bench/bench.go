// Package bench measures what corral costs on top of Proxmox VE's own
// work: controller overhead against the emulator's task times, API calls
// per operation, planning at scale, and the emulator's own throughput. It
// prints figures; it never asserts a time (timings flake on shared
// machines), so `corral bench` and `go test -bench` report and a human
// judges.
package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim"
)

// Options size the suite.
type Options struct {
	// Scale is the emulator's time scale for the overhead runs (task
	// durations × Scale). Default 0.1: a create takes 1.1 s.
	Scale float64
	// ScaleApps and ScaleNodes size the planning-at-scale run.
	ScaleApps, ScaleNodes int
	// RPSDuration is how long the emulator throughput run lasts.
	RPSDuration time.Duration
	// Dir holds the emulators' state (a fresh subdirectory per run).
	Dir string
	// Progress, when set, is told what runs now.
	Progress func(string)
}

// Quick are options for a fast smoke run (tests, CI).
func Quick(dir string) Options {
	return Options{Scale: 0.02, ScaleApps: 20, ScaleNodes: 2, RPSDuration: 300 * time.Millisecond, Dir: dir}
}

// Full are the options `corral bench` uses.
func Full(dir string) Options {
	return Options{Scale: 0.1, ScaleApps: 1000, ScaleNodes: 5, RPSDuration: 3 * time.Second, Dir: dir}
}

// Figure is one measured number.
type Figure struct {
	Group string  `json:"group"`
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Note  string  `json:"note,omitempty"`
}

// Report is the suite's result.
type Report struct {
	Figures []Figure `json:"figures"`
	// Cycle is the modelled Hermes recreate cycle at real PVE durations.
	Cycle []Phase `json:"cycle"`
}

// Phase is one row of the modelled cycle.
type Phase struct {
	Phase string        `json:"phase"`
	PVE   time.Duration `json:"pve_ns"`    // the emulator's task time, at scale 1
	Own   time.Duration `json:"corral_ns"` // corral's own time on top
}

func (r *Report) add(group, name string, v float64, unit, note string) {
	r.Figures = append(r.Figures, Figure{group, name, v, unit, note})
}

// Run runs the suite.
func Run(ctx context.Context, o Options) (*Report, error) {
	r := &Report{}
	say := func(s string) {
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	say("controller overhead and API calls")
	if err := overhead(ctx, o, r); err != nil {
		return nil, fmt.Errorf("overhead: %w", err)
	}
	say(fmt.Sprintf("planning %d apps on %d nodes", o.ScaleApps, o.ScaleNodes))
	if err := scale(ctx, o, r); err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	say("emulator throughput")
	if err := throughput(ctx, o, r); err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	return r, nil
}

// rig is one emulator with a client for corral's operator token.
type rig struct {
	srv    *sim.Server
	client *pve.Client
	// guest, when set, is the work run inside every app's container.
	guest *apply.GuestWork
	ssh   apply.SSH
}

func newRig(dir string, scale float64, nodes int) (*rig, error) {
	srv, err := sim.New(sim.Options{Dir: dir, Listener: sim.ListenTLS, Listen: "127.0.0.1:0", TimeScale: &scale, Nodes: nodes})
	if err != nil {
		return nil, err
	}
	c, err := pve.New(pve.Config{Endpoint: srv.URL(), Token: srv.Credentials().OperatorToken, Fingerprint: srv.Fingerprint(), MaxConcurrent: 8})
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &rig{srv: srv, client: c}, nil
}

func (g *rig) Close() { g.srv.Close() }

// tasks returns the UPIDs of every task the emulator has run so far.
func (g *rig) tasks() map[string]bool {
	out := map[string]bool{}
	for _, t := range g.srv.Cluster().Tasks("") {
		out[t.UPID] = true
	}
	return out
}

// busySince sums the busy time of the tasks not in before (corral runs
// its tasks one after another, so this is the critical path PVE itself
// spends).
func (g *rig) busySince(before map[string]bool) time.Duration {
	var d time.Duration
	for _, t := range g.srv.Cluster().Tasks("") {
		if !before[t.UPID] {
			d += t.Busy
		}
	}
	return d
}

// run plans and applies (or destroys) apps; it returns the executor's
// phase timings.
func (g *rig) run(ctx context.Context, apps []plan.App, destroy bool) ([]apply.Timing, error) {
	obs, err := apply.Observe(ctx, g.client)
	if err != nil {
		return nil, err
	}
	ex := &apply.Executor{Client: g.client}
	if g.guest != nil {
		ex.SSH = g.ssh
		ex.Guest = map[string]apply.GuestWork{}
		for _, a := range apps {
			ex.Guest[a.Name] = *g.guest
		}
	}
	if destroy {
		p, err := plan.Destroy(apps, obs, false)
		if err != nil {
			return nil, err
		}
		_, err = ex.Destroy(ctx, p, obs)
		return ex.Timings(), err
	}
	p, err := plan.Make(apps, obs)
	if err != nil {
		return nil, err
	}
	err = ex.Apply(ctx, p, obs)
	return ex.Timings(), err
}

// plan observes and plans without changing anything.
func (g *rig) plan(ctx context.Context, apps []plan.App) (*plan.Plan, error) {
	obs, err := apply.Observe(ctx, g.client)
	if err != nil {
		return nil, err
	}
	return plan.Make(apps, obs)
}

// appsYAML renders n apps like the seeds' Hermes (two volumes each).
func appsYAML(n, nodes int, template string) string {
	var b strings.Builder
	b.WriteString("apps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - name: app%d\n    template: local:vztmpl/%s\n    features: {nesting: true}\n", i, template)
		if nodes > 1 {
			fmt.Fprintf(&b, "    node: pve%d\n", i%nodes+1)
		}
		b.WriteString("    rootfs: {size: 2G}\n    volumes:\n      - {name: home, size: 1G, mount: /home/app}\n      - {name: cache, size: 512M, mount: /var/cache/app, backup: false}\n")
	}
	return b.String()
}

const debian12 = "debian-12-standard_12.12-1_amd64.tar.zst"

func parseApps(text string) ([]plan.App, error) {
	f, err := manifest.Parse("bench.yaml", []byte(text), manifest.LoadOptions{})
	if err != nil {
		return nil, err
	}
	return plan.FromManifest(f), nil
}

// overhead measures wall time against PVE's task time for create,
// replace (memory in place is cheap; a template change replaces) and
// destroy, and counts API calls per operation.
func overhead(ctx context.Context, o Options, r *Report) error {
	g, err := newRig(o.Dir+"/overhead", o.Scale, 1)
	if err != nil {
		return err
	}
	defer g.Close()
	apps, err := parseApps(appsYAML(1, 1, debian12))
	if err != nil {
		return err
	}
	// A minimal provisioning (two steps and a health check) to measure
	// what corral's SSH path costs around the user's own steps.
	signer, ak, err := guest.NewKey("corral-bench")
	if err != nil {
		return err
	}
	g.ssh = apply.SSH{Signer: signer, AuthorizedKey: ak, Port: g.srv.Guests().Port()}
	g.guest = &apply.GuestWork{
		Steps: []apply.Step{
			{Name: "file: /etc/app.conf", Kind: "file", Path: "/etc/app.conf", Content: []byte("x=1\n"), Mode: 0o644},
			{Name: "run: true", Kind: "run", Script: "true"},
		},
		Checks: []apply.Check{{Name: "command: true", Kind: "command", Command: "true", Retries: 1}},
	}
	for i := range apps {
		apps[i].GuestDigest = "bench"
	}
	grown := append([]plan.App(nil), apps...)
	grown[0].RootSize = 3 << 30 // grows the rootfs in place: a resize task

	type op struct {
		name    string
		apps    []plan.App
		destroy bool
	}
	var cycle []Phase
	for _, step := range []op{{"create", apps, false}, {"update", grown, false}, {"destroy", grown, true}, {"recreate", grown, false}} {
		g.srv.ResetRequests()
		before := g.tasks()
		start := time.Now()
		timings, err := g.run(ctx, step.apps, step.destroy)
		if err != nil {
			return fmt.Errorf("%s: %w", step.name, err)
		}
		wall := time.Since(start)
		busy := g.busySince(before)
		_, calls := g.srv.Requests()
		// The work inside the guest (waiting for its sshd to boot, the
		// steps, the checks) is not a PVE task: it is reported apart.
		var inGuest time.Duration
		for _, t := range timings {
			if t.Phase == "ssh" || t.Phase == "provision" || t.Phase == "health" {
				inGuest += t.Elapsed
			}
		}
		ratio := float64(wall-inGuest) / float64(max(busy, 1))
		r.add("overhead", step.name+" wall / PVE task time", ratio, "×",
			fmt.Sprintf("wall %s, tasks %s at time scale %g", (wall-inGuest).Round(time.Millisecond), busy.Round(time.Millisecond), o.Scale))
		r.add("api calls", step.name, float64(calls), "requests", "one app, two volumes")
		if inGuest > 0 {
			r.add("guest", step.name+": boot wait + provisioning + health", inGuest.Seconds(), "s",
				fmt.Sprintf("two trivial steps and one check over SSH, boot delay at time scale %g", o.Scale))
		}
		if step.name == "destroy" || step.name == "recreate" {
			for _, t := range timings {
				cycle = append(cycle, Phase{Phase: t.Phase, PVE: 0, Own: t.Elapsed})
			}
		}
	}
	r.Cycle = modelCycle(cycle, o.Scale, g)

	g.srv.ResetRequests()
	if _, err := g.plan(ctx, grown); err != nil {
		return err
	}
	_, calls := g.srv.Requests()
	r.add("api calls", "no-op plan, 1 app", float64(calls), "requests", "")
	return nil
}

// modelCycle turns the measured destroy+recreate phases at time scale s
// into real-duration figures: the part of each phase spent in PVE tasks
// is divided by s, corral's own part is kept as measured.
func modelCycle(ph []Phase, s float64, g *rig) []Phase {
	// Split each phase's elapsed time using the task durations the
	// emulator would spend at scale s for that kind of phase.
	taskOf := map[string]string{"stop": "vzshutdown", "destroy": "vzdestroy", "create": "vzcreate", "start": "vzstart", "ssh": "bootdelay"}
	var out []Phase
	merged := map[string]int{}
	for _, p := range ph {
		pve := time.Duration(0)
		if t := taskOf[p.Phase]; t != "" {
			pve = g.srv.Cluster().TaskDuration(t)
		}
		own := max(p.Own-pve, 0)
		real := time.Duration(float64(pve) / s)
		if i, ok := merged[p.Phase]; ok {
			out[i].PVE += real
			out[i].Own += own
			continue
		}
		merged[p.Phase] = len(out)
		out = append(out, Phase{Phase: p.Phase, PVE: real, Own: own})
	}
	return out
}

// scale plans and no-op applies many apps over several nodes, measuring
// time, API calls and peak heap.
func scale(ctx context.Context, o Options, r *Report) error {
	g, err := newRig(o.Dir+"/scale", 0, o.ScaleNodes)
	if err != nil {
		return err
	}
	defer g.Close()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	apps, err := parseApps(appsYAML(o.ScaleApps, o.ScaleNodes, debian12))
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := g.run(ctx, apps, false); err != nil {
		return fmt.Errorf("create %d apps: %w", len(apps), err)
	}
	r.add("scale", fmt.Sprintf("apply %d apps from nothing", len(apps)), time.Since(start).Seconds(), "s", "time scale 0: corral and emulator cost only")
	runtime.GC()
	runtime.ReadMemStats(&ms)
	perK := float64(ms.HeapAlloc-min(before, ms.HeapAlloc)) / float64(len(apps)) * 1000 / (1 << 20)
	r.add("emulator", "memory per 1,000 containers", perK, "MiB", "heap growth after creating them (with corral's keeper and volumes)")

	g.srv.ResetRequests()
	peak := trackPeak()
	start = time.Now()
	p, err := g.plan(ctx, apps)
	elapsed := time.Since(start)
	heap := peak()
	if err != nil {
		return err
	}
	if p.HasChanges() {
		return fmt.Errorf("plan after apply has changes")
	}
	_, calls := g.srv.Requests()
	r.add("scale", fmt.Sprintf("no-op plan, %d apps on %d nodes", len(apps), o.ScaleNodes), elapsed.Seconds(), "s", "")
	r.add("scale", "no-op plan peak heap", float64(heap)/(1<<20), "MiB", "whole process: emulator and corral")
	r.add("api calls", fmt.Sprintf("no-op plan, %d apps", len(apps)), float64(calls), "requests",
		fmt.Sprintf("%.2f per app", float64(calls)/float64(len(apps))))

	start = time.Now()
	if _, err := g.run(ctx, apps, false); err != nil {
		return err
	}
	r.add("scale", fmt.Sprintf("no-op apply, %d apps", len(apps)), time.Since(start).Seconds(), "s", "")
	return nil
}

// trackPeak samples the heap until the returned func is called, which
// returns the highest HeapAlloc seen.
func trackPeak() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// throughput drives a read-heavy mix at the emulator from 8 clients.
func throughput(ctx context.Context, o Options, r *Report) error {
	g, err := newRig(o.Dir+"/rps", 0, 1)
	if err != nil {
		return err
	}
	defer g.Close()
	apps, err := parseApps(appsYAML(5, 1, debian12))
	if err != nil {
		return err
	}
	if _, err := g.run(ctx, apps, false); err != nil {
		return err
	}
	obs, err := apply.Observe(ctx, g.client)
	if err != nil {
		return err
	}
	var paths []string
	for _, cts := range obs.Apps {
		for _, ct := range cts {
			paths = append(paths, fmt.Sprintf("/nodes/%s/lxc/%d/status/current", ct.Node, ct.VMID), fmt.Sprintf("/nodes/%s/lxc/%d/config", ct.Node, ct.VMID))
		}
	}
	paths = append(paths, "/cluster/resources", "/nodes", "/nodes/pve/storage", "/version")
	hc := g.srv.HTTPClient()
	token := g.srv.Credentials().OperatorToken
	var n, failed atomic.Int64
	deadline := time.Now().Add(o.RPSDuration)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; time.Now().Before(deadline); i++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", g.srv.URL()+"/api2/json"+paths[i%len(paths)], nil)
				req.Header.Set("Authorization", "PVEAPIToken="+token)
				resp, err := hc.Do(req)
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
				}
				if resp != nil {
					resp.Body.Close()
				}
				n.Add(1)
			}
		}(w)
	}
	wg.Wait()
	r.add("emulator", "read-heavy requests per second", float64(n.Load())/o.RPSDuration.Seconds(), "req/s",
		fmt.Sprintf("8 clients over HTTPS, %d failed", failed.Load()))
	return nil
}
