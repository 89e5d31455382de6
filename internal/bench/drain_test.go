package bench

import (
	"context"
	"flag"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	drainSteps = flag.Bool("drain.steps", false, "log the time spent in each kind of step (BenchmarkDrain)")
)

// BenchmarkDrain measures draining a node (what corral drain does: the
// apps placed afresh away from it, their moves run with the executor's
// parallelism) against the Proxmox task time it cannot go below
// (DrainPath, drain.go). go test ./internal/bench -run '^$' -bench Drain
// -benchtime 1x -drain.apps 250 gives the figure in docs/benchmarks.md;
// corral bench --drain N measures the same through the CLI.
func BenchmarkDrain(b *testing.B) {
	// The test binaries' after-save journal check re-encodes the whole
	// emulator state after every change, under the cluster's mutex: at
	// hundreds of containers it, not corral, would be what is measured.
	model.SetJournalCheck(false)
	b.Cleanup(func() { model.SetJournalCheck(true) })
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
		list := func() ([]sim.TaskTime, error) { return g.srv.TaskTimes(), nil }
		before, _ := list()
		col := newTaskCollector(before)
		stop := make(chan struct{})
		polled := make(chan error, 1)
		go func() { polled <- col.poll(list, time.Second, stop) }()
		g.srv.ResetRequests()
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
		steps := &stepTimes{total: map[string]time.Duration{}, count: map[string]int{}}
		ex := &apply.Executor{Client: g.client, Parallelism: *drainPar}
		if *drainSteps {
			ex.Observer = steps
		}
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
		b.Logf("drain of %d apps, parallelism %d, time scale %g: wall %s; critical path %.1fs: chain %.1fs, keeper %.1fs, packed %.1fs (task time %.1fs nominal, %.1fs measured, over %d tasks); the busiest keeper's moves spanned %.1fs",
			*drainApps, *drainPar, *drainScale, wall.Round(time.Millisecond), cp.Critical, cp.Chain, cp.Keeper, cp.Packed, cp.TaskTime, cp.Busy, cp.Tasks, cp.KeeperSpan)
		if *drainSteps {
			steps.log(b)
			eps, total := g.srv.Requests()
			sort.Slice(eps, func(i, j int) bool { return eps[i].Time > eps[j].Time })
			b.Logf("%d requests", total)
			for _, e := range eps[:min(12, len(eps))] {
				b.Logf("%8.1fs %7d×  %s", e.Time.Seconds(), e.Count, e.Endpoint)
			}
		}
		for _, ct := range after.Apps {
			if ct[0].Node == "pve1" {
				b.Fatalf("app still on pve1 after the drain")
			}
		}
		g.Close()
	}
}

// stepTimes adds up the executor's steps by kind (numbers left out).
type stepTimes struct {
	mu    sync.Mutex
	total map[string]time.Duration
	count map[string]int
	// The time between one step of an app ending and its next starting
	// (the reads and waits between steps), by the two steps' kinds.
	last map[string]stepEnd
	gaps map[string]time.Duration
}

type stepEnd struct {
	key string
	at  time.Time
}

var digits = regexp.MustCompile(`[0-9]+`)

func (s *stepTimes) Step(app, phase, detail string) func(error) {
	start := time.Now()
	key := phase + ": " + digits.ReplaceAllString(detail, "N")
	if i := strings.Index(key, "="); i > 0 {
		key = key[:i]
	}
	s.mu.Lock()
	if s.last == nil {
		s.last, s.gaps = map[string]stepEnd{}, map[string]time.Duration{}
	}
	if l, ok := s.last[app]; ok {
		s.gaps[l.key+"  →  "+key] += start.Sub(l.at)
	}
	s.mu.Unlock()
	return func(error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.total[key] += time.Since(start)
		s.count[key]++
		s.last[app] = stepEnd{key, time.Now()}
	}
}
func (s *stepTimes) TaskLog(string, string, string) {}
func (s *stepTimes) Warn(string, string)            {}
func (s *stepTimes) WantsTaskLogs() bool            { return false }

func (s *stepTimes) log(b *testing.B) {
	keys := make([]string, 0, len(s.total))
	for k := range s.total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return s.total[keys[i]] > s.total[keys[j]] })
	for _, k := range keys {
		b.Logf("%8.1fs %5d× %6.3fs  %s", s.total[k].Seconds(), s.count[k], s.total[k].Seconds()/float64(s.count[k]), k)
	}
	gaps := make([]string, 0, len(s.gaps))
	for k := range s.gaps {
		gaps = append(gaps, k)
	}
	sort.Slice(gaps, func(i, j int) bool { return s.gaps[gaps[i]] > s.gaps[gaps[j]] })
	b.Logf("between steps:")
	for _, k := range gaps[:min(12, len(gaps))] {
		b.Logf("%8.1fs  %s", s.gaps[k].Seconds(), k)
	}
}
