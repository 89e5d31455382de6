package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// ScaleOptions size the many-apps run: corral on many apps over several
// nodes at time scale 0 (only corral's and the emulator's own cost: the
// figures are about that cost, which scaling task durations to zero does
// not distort), then the emulator's read throughput and memory.
type ScaleOptions struct {
	Apps, Nodes int
	// Clients and Duration drive the read throughput run.
	Clients  int
	Duration time.Duration
}

// ScaleReport holds the many-apps figures.
type ScaleReport struct {
	Run ToolRun `json:"run"`
	// RSS is the emulator process's resident memory with no container
	// (after start) and with the run's apps created.
	RSSEmpty  int64 `json:"rss_empty_bytes"`
	RSSLoaded int64 `json:"rss_loaded_bytes"`
	// Containers counts the guests the emulator held at RSSLoaded
	// (apps plus corral's keepers).
	Containers     int     `json:"containers"`
	RSSPer1000MiB  float64 `json:"rss_per_1000_containers_mib"`
	Throughput     []RPS   `json:"read_throughput"`
	ThroughputNote string  `json:"read_throughput_note"`
}

// RPS is the read throughput of one request mix.
type RPS struct {
	Mix      string  `json:"mix"`
	Clients  int     `json:"clients"`
	Requests int64   `json:"requests"`
	Failed   int64   `json:"failed"`
	PerSec   float64 `json:"requests_per_s"`
	Seconds  float64 `json:"seconds"`
	// EmulatorCPU is the emulator process's CPU time during the run,
	// and per request in microseconds: what the emulator spent, which
	// the machine's other load inflates far less than the rate.
	EmulatorCPU      float64 `json:"emulator_cpu_s"`
	EmulatorCPUPerRq float64 `json:"emulator_cpu_us_per_request"`
}

func runScale(ctx context.Context, o Options) (*ScaleReport, error) {
	s := o.Scale
	dir := filepath.Join(o.Dir, fmt.Sprintf("scale%d", s.Apps))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	o.TimeScale = 0
	p, err := startSim(ctx, o.Corral, dir, 0, s.Nodes, "view")
	if err != nil {
		return nil, err
	}
	defer p.Close()
	sr := &ScaleReport{}
	// Let the emulator settle before the empty figure.
	time.Sleep(500 * time.Millisecond)
	if sr.RSSEmpty, err = p.RSS(); err != nil {
		return nil, err
	}
	// Apply, no-op plan, no-op apply; the destroy comes after the
	// throughput and memory runs below, which need the apps.
	run, err := runCorralSteps(ctx, o, p, dir, s.Apps, s.Nodes, 0, 3)
	if err != nil {
		return nil, fmt.Errorf("corral, %d apps: %w (outputs in %s)", s.Apps, err, dir)
	}
	sr.Run = *run
	names, err := p.names(ctx)
	if err != nil {
		return nil, err
	}
	sr.Containers = len(names)
	if sr.RSSLoaded, err = p.RSS(); err != nil {
		return nil, err
	}
	sr.RSSPer1000MiB = float64(sr.RSSLoaded-sr.RSSEmpty) / float64(max(sr.Containers, 1)) * 1000 / (1 << 20)

	var configs []string
	var rows []guestRef
	if err := p.call(ctx, "GET", "/api2/json/cluster/resources?type=vm", p.env["PVE_ROOT_TOKEN"], &rows); err != nil {
		return nil, err
	}
	for _, r := range rows {
		configs = append(configs, fmt.Sprintf("/api2/json/nodes/%s/lxc/%d/config", r.Node, r.VMID))
	}
	mixes := []struct {
		name  string
		paths []string
	}{
		{"GET /cluster/resources", []string{"/api2/json/cluster/resources"}},
		{"GET /nodes/{node}/lxc/{vmid}/config, every container in turn", configs},
		// corral's containers' root disks are on local-lvm.
		{"mixed: a refresh's reads (MixedRound), every container in turn", mixedPaths(rows, "local-lvm", len(rows))},
	}
	for _, m := range mixes {
		say(o, fmt.Sprintf("emulator read throughput: %s, %d clients", m.name, s.Clients))
		sr.Throughput = append(sr.Throughput, readLoad(ctx, p, m.name, m.paths, s.Clients, s.Duration))
	}
	sr.ThroughputNote = fmt.Sprintf("%d HTTPS clients (keep-alive) in the bench process, operator token, on the same %d CPUs as the emulator", s.Clients, runtimeCPUs())
	// Then destroy --delete-volumes: freeing each app's volume checks
	// that no other guest names it, the reads issue 30 counts per app.
	d, err := runCorralSteps(ctx, o, p, dir, s.Apps, s.Nodes, 3, 4)
	if err != nil {
		return nil, fmt.Errorf("corral destroy, %d apps: %w (outputs in %s)", s.Apps, err, dir)
	}
	sr.Run.Steps = append(sr.Run.Steps, d.Steps...)
	return sr, nil
}

// readLoad drives GETs of paths (round robin) from clients goroutines for
// d and counts the answers.
func readLoad(ctx context.Context, p *simProc, name string, paths []string, clients int, d time.Duration) RPS {
	token := p.env["PROXMOX_VE_API_TOKEN"]
	var n, failed atomic.Int64
	cpu0, cpuErr := p.CPUTime()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; time.Now().Before(deadline) && ctx.Err() == nil; i += clients {
				req, _ := http.NewRequestWithContext(ctx, "GET", p.Endpoint()+paths[i%len(paths)], nil)
				req.Header.Set("Authorization", "PVEAPIToken="+token)
				resp, err := p.hc.Do(req)
				if err == nil {
					drain(resp)
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
				n.Add(1)
			}
		}(w)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	out := RPS{Mix: name, Clients: clients, Requests: n.Load(), Failed: failed.Load(), PerSec: float64(n.Load()) / secs, Seconds: secs}
	if cpu1, err := p.CPUTime(); err == nil && cpuErr == nil {
		out.EmulatorCPU = (cpu1 - cpu0).Seconds()
		out.EmulatorCPUPerRq = out.EmulatorCPU * 1e6 / float64(max(out.Requests, 1))
	}
	return out
}
