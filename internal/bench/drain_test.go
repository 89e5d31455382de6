package bench

import (
	"context"
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

var (
	drainApps  = flag.Int("drain.apps", 12, "apps on the drained node (BenchmarkDrain)")
	drainScale = flag.Float64("drain.scale", 0.1, "emulator time scale (BenchmarkDrain)")
	drainPar   = flag.Int("drain.parallelism", 10, "apps moved at once (BenchmarkDrain)")
)

// BenchmarkDrain measures draining a node (what corral drain does: the
// apps placed afresh away from it, their moves run with the executor's
// parallelism) against the Proxmox task time it cannot go below
// (DrainPath, drain.go). go test ./internal/bench -run '^$' -bench Drain
// -benchtime 1x -drain.apps 250 gives the figure in docs/benchmarks.md;
// corral bench --drain N measures the same through the CLI.
func BenchmarkDrain(b *testing.B) {
	for range b.N {
		b.StopTimer()
		g, err := newRig(b.TempDir(), *drainScale, 3)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		on1, err := parseApps(drainYAML(*drainApps, "pve1"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := g.run(ctx, on1, false); err != nil {
			b.Fatal(err)
		}
		apps, err := parseApps(drainYAML(*drainApps, ""))
		if err != nil {
			b.Fatal(err)
		}
		list := func() ([]sim.TaskTime, error) { return taskTimes(g.srv.Cluster().Tasks("")), nil }
		before, _ := list()
		col := newTaskCollector(before)
		stop := make(chan struct{})
		polled := make(chan error, 1)
		go func() { polled <- col.poll(list, time.Second, stop) }()
		b.StartTimer()
		start := time.Now()
		obs, err := apply.Observe(ctx, g.client)
		if err != nil {
			b.Fatal(err)
		}
		var leaving []string
		for _, a := range apps {
			leaving = append(leaving, a.Name)
		}
		targets, err := plan.PlaceAway(apps, obs, "pve1", leaving)
		if err != nil {
			b.Fatal(err)
		}
		for i := range apps {
			apps[i].Node = targets[apps[i].Name][0]
		}
		p, err := plan.Make(apps, obs)
		if err != nil {
			b.Fatal(err)
		}
		ex := &apply.Executor{Client: g.client, Parallelism: *drainPar}
		if err := ex.Apply(ctx, p, obs); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		b.StopTimer()
		after, err := apply.Observe(ctx, g.client)
		if err != nil {
			b.Fatal(err)
		}
		close(stop)
		<-polled
		appIDs, keepers := map[string]bool{}, map[string]bool{}
		for _, cts := range after.Apps {
			for _, ct := range cts {
				appIDs[strconv.Itoa(ct.VMID)] = true
			}
		}
		for _, ks := range after.Keepers {
			for _, k := range ks {
				keepers[strconv.Itoa(k.VMID)] = true
			}
		}
		cp := drainCriticalPath(col.all(), appIDs, keepers, *drainPar, *drainScale)
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(cp.Critical, "critical-s")
		b.ReportMetric(wall.Seconds()/cp.Critical, "wall/critical")
		b.ReportMetric(cp.TaskTime, "task-s")
		b.Logf("drain of %d apps, parallelism %d, time scale %g: wall %s; critical path %.1fs: chain %.1fs, keeper %.1fs, packed %.1fs (task time %.1fs nominal, %.1fs measured, over %d tasks)",
			*drainApps, *drainPar, *drainScale, wall.Round(time.Millisecond), cp.Critical, cp.Chain, cp.Keeper, cp.Packed, cp.TaskTime, cp.Busy, cp.Tasks)
		for _, ct := range after.Apps {
			if ct[0].Node == "pve1" {
				b.Fatalf("app still on pve1 after the drain")
			}
		}
		g.Close()
	}
}

// taskTimes is what the emulator's admin API lists of tasks.
func taskTimes(ts []model.Task) []sim.TaskTime {
	out := make([]sim.TaskTime, 0, len(ts))
	for _, t := range ts {
		out = append(out, sim.TaskTime{UPID: t.UPID, Node: t.Node, Type: t.Type, ID: t.ID, Status: t.Status, ExitStatus: t.ExitStatus, Began: t.BeganNS, Ended: t.EndedNS, Busy: t.Busy})
	}
	return out
}
