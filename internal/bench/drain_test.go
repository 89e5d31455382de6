package bench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/sim/model"
)

var (
	drainApps  = flag.Int("drain.apps", 12, "apps on the drained node (BenchmarkDrain)")
	drainScale = flag.Float64("drain.scale", 0.1, "emulator time scale (BenchmarkDrain)")
	drainPar   = flag.Int("drain.parallelism", 10, "apps moved at once (BenchmarkDrain)")
)

// drainYAML is n apps with two retained volumes each, all on pve1 while
// placement allows only it.
func drainYAML(n int, only string) string {
	var b strings.Builder
	if only != "" {
		fmt.Fprintf(&b, "placement: {nodes: [%s]}\n", only)
	}
	b.WriteString("apps:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: app%d\n    template: local:vztmpl/%s\n    features: {nesting: true}\n    memory: 256\n", i, debian12)
		b.WriteString("    rootfs: {size: 2G}\n    volumes:\n      - {name: home, size: 1G, mount: /home/app}\n      - {name: cache, size: 512M, mount: /var/cache/app, backup: false}\n")
	}
	return b.String()
}

// BenchmarkDrain measures draining a node (what corral drain does: the
// apps placed afresh away from it, their moves run with the executor's
// parallelism) against the Proxmox task time it cannot go below:
//
//   - chain: the longest chain one app waits through, its own tasks
//     (stop, migrate, start) plus the longest carrier's (create,
//     migrate, destroy) and its four move_volume tasks;
//   - keeper: the move_volume tasks of one keeper, which run one at a
//     time (PVE's config lock; corral's keeper lock);
//   - packed: all task time divided by the parallelism.
//
// The critical path is the largest of the three; wall/critical is the
// overhead. go test ./internal/bench -run '^$' -bench Drain -benchtime 1x
// -drain.apps 250 gives the figure in docs/benchmarks.md.
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
		seen := map[string]bool{}
		for _, t := range g.srv.Cluster().Tasks("") {
			seen[t.UPID] = true
		}
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
		var tasks []model.Task
		for _, t := range g.srv.Cluster().Tasks("") {
			if !seen[t.UPID] {
				tasks = append(tasks, t)
			}
		}
		cp := drainCriticalPath(tasks, after, *drainPar)
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(cp.critical().Seconds(), "critical-s")
		b.ReportMetric(wall.Seconds()/cp.critical().Seconds(), "wall/critical")
		b.ReportMetric(cp.total.Seconds(), "task-s")
		b.Logf("drain of %d apps, parallelism %d, time scale %g: wall %s; chain %s, keeper %s, packed %s (task time %s over %d tasks)",
			*drainApps, *drainPar, *drainScale, wall.Round(time.Millisecond), cp.chain.Round(time.Millisecond), cp.keeper.Round(time.Millisecond),
			cp.packed.Round(time.Millisecond), cp.total.Round(time.Millisecond), len(tasks))
		for _, ct := range after.Apps {
			if ct[0].Node == "pve1" {
				b.Fatalf("app still on pve1 after the drain")
			}
		}
		g.Close()
	}
}

type drainPath struct{ chain, keeper, packed, total time.Duration }

func (d drainPath) critical() time.Duration { return max(d.chain, d.keeper, d.packed) }

// drainCriticalPath splits the tasks a drain caused by guest: the apps'
// containers, the keepers, and the carriers (every other guest).
func drainCriticalPath(tasks []model.Task, obs *plan.Observed, par int) drainPath {
	apps, keepers := map[string]bool{}, map[string]bool{}
	for _, cts := range obs.Apps {
		for _, ct := range cts {
			apps[strconv.Itoa(ct.VMID)] = true
		}
	}
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			keepers[strconv.Itoa(k.VMID)] = true
		}
	}
	perApp, perCarrier, perKeeper := map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}
	var d drainPath
	for _, t := range tasks {
		d.total += t.Busy
		if t.Type == "move_volume" { // <from>-<key>><to>-<key>
			from, rest, _ := strings.Cut(t.ID, "-")
			_, to, _ := strings.Cut(rest, ">")
			to, _, _ = strings.Cut(to, "-")
			for _, id := range []string{from, to} {
				if keepers[id] {
					perKeeper[id] += t.Busy
				} else {
					perCarrier[id] += t.Busy
				}
			}
			continue
		}
		switch {
		case apps[t.ID]:
			perApp[t.ID] += t.Busy
		case keepers[t.ID]:
			perKeeper[t.ID] += t.Busy
		default:
			perCarrier[t.ID] += t.Busy
		}
	}
	longest := func(m map[string]time.Duration) time.Duration {
		v := slices.Collect(func(yield func(time.Duration) bool) {
			for _, x := range m {
				if !yield(x) {
					return
				}
			}
		})
		if len(v) == 0 {
			return 0
		}
		return slices.Max(v)
	}
	d.chain = longest(perApp) + longest(perCarrier)
	d.keeper = longest(perKeeper)
	d.packed = d.total / time.Duration(max(par, 1))
	return d
}
