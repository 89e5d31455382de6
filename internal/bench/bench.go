// Package bench measures corral the way a user feels it: `corral bench`
// starts a standalone emulator process (`corral sim serve`, HTTPS) and
// runs the real corral binary against it as subprocesses, timing each
// command and reading from the emulator what the command caused (the
// Proxmox tasks, to the nanosecond, and the API requests). Optionally it
// runs the same workload through OpenTofu and a Terraform provider for
// Proxmox against the same emulator. Every figure is measured; nothing is
// modelled. It never asserts a time (timings flake on shared machines):
// `corral bench` and `go test -bench` report and a human judges.
//
// The in-process rig in this file serves the Go benchmarks and the API
// call count test only.
package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim"
)

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
	c, err := pve.New(pve.Config{Endpoint: srv.URL(), Token: srv.Credentials().OperatorToken, Fingerprint: srv.Fingerprint(), MaxConcurrent: 8, TaskTimeScale: &scale})
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &rig{srv: srv, client: c}, nil
}

func (g *rig) Close() { g.srv.Close() }

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
