package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

// The drain figures: a node with N apps (two retained volumes each) is
// emptied (corral drain) onto two others, and its wall time is set
// against the PVE task time it cannot go below (DrainPath). The Go
// benchmark (BenchmarkDrain, in process) and `corral bench --drain N`
// (corral and the emulator as the user runs them) share this.

// DrainOptions size the drain run.
type DrainOptions struct {
	Apps int
}

// DrainReport is the drain run's figures.
type DrainReport struct {
	Apps        int     `json:"apps"`
	Nodes       int     `json:"nodes"`
	TimeScale   float64 `json:"time_scale"`
	Parallelism int     `json:"parallelism"`
	// Wall is corral drain's wall time, process start to exit.
	Wall float64 `json:"wall_s"`
	DrainPath
	// Ratio is Wall / Critical (0 at time scale 0, where it means nothing).
	Ratio    float64 `json:"wall_over_critical"`
	Requests int     `json:"requests"`
	// Setup is the apply that put the apps on the node first (not part
	// of the figures).
	Setup float64 `json:"setup_wall_s"`
}

// DrainPath is the lower bound of a drain's wall time, from the tasks it
// caused, each counted at its nominal PVE duration (the emulator's task
// duration times the time scale: the time the task works, not the time
// it spent waiting for a config lock another task held, nor the
// machine's lateness in waking it):
//
//   - Chain: one app's chain, its own tasks (shutdown, migrate, start)
//     plus one carrier's (create, two move_volume in, migrate, two out,
//     destroy): the longest of each, carriers told apart by their create
//     (a carrier's VMID is reused by later moves);
//   - Keeper: the move_volume tasks of the busiest keeper: PVE holds the
//     config lock of both containers for each, so they run one at a time;
//   - Packed: all task time divided by the parallelism (at most that many
//     apps move at once, each one task at a time).
//
// Critical is the largest of the three.
type DrainPath struct {
	Chain    float64 `json:"chain_s"`
	Keeper   float64 `json:"keeper_s"`
	Packed   float64 `json:"packed_s"`
	Critical float64 `json:"critical_path_s"`
	TaskTime float64 `json:"task_time_s"`
	Tasks    int     `json:"tasks"`
	// Busy is the sum of the tasks' measured run times, lock waits
	// included: how far the emulator's tasks ran over their nominal time.
	Busy float64 `json:"task_busy_s"`
	// KeeperSpan is the time from the first move_volume task of the
	// busiest keeper starting to its last one ending: Keeper ÷ KeeperSpan
	// is how busy corral kept it.
	KeeperSpan float64 `json:"keeper_span_s"`
}

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

// nominal is what task t takes at time scale: the emulator's duration
// for its type (every phase of the types a drain runs adds up to one),
// or its measured run time for a type without one.
func nominal(t sim.TaskTime, scale float64) time.Duration {
	if d := model.DefaultDuration(t.Type); d > 0 {
		return time.Duration(float64(d) * scale)
	}
	return t.Busy
}

// drainCriticalPath splits the tasks a drain caused by guest: the apps'
// containers (apps), the keepers (keepers), and the carriers (every
// other guest), all by VMID.
func drainCriticalPath(tasks []sim.TaskTime, apps, keepers map[string]bool, par int, scale float64) DrainPath {
	tasks = slices.Clone(tasks)
	slices.SortFunc(tasks, func(a, b sim.TaskTime) int { return int(a.Began - b.Began) })
	perApp, perKeeper := map[string]time.Duration{}, map[string]time.Duration{}
	span := map[string][2]int64{}            // keeper → first began, last ended
	perCarrier := map[string]time.Duration{} // "vmid#n": the nth carrier with that VMID
	generation := map[string]int{}
	carrier := func(id string) string { return id + "#" + strconv.Itoa(generation[id]) }
	var total, busy time.Duration
	for _, t := range tasks {
		d := nominal(t, scale)
		total += d
		busy += t.Busy
		if t.Type == "move_volume" { // <from>-<key>><to>-<key>
			from, rest, _ := strings.Cut(t.ID, "-")
			_, to, _ := strings.Cut(rest, ">")
			to, _, _ = strings.Cut(to, "-")
			for _, id := range []string{from, to} {
				switch {
				case keepers[id]:
					perKeeper[id] += d
					sp, ok := span[id]
					if !ok || t.Began < sp[0] {
						sp[0] = t.Began
					}
					sp[1] = max(sp[1], t.Ended)
					span[id] = sp
				case !apps[id]:
					perCarrier[carrier(id)] += d
				}
			}
			continue
		}
		switch {
		case apps[t.ID]:
			perApp[t.ID] += d
		case keepers[t.ID]:
			perKeeper[t.ID] += d
		default:
			if t.Type == "vzcreate" {
				generation[t.ID]++
			}
			perCarrier[carrier(t.ID)] += d
		}
	}
	longest := func(m map[string]time.Duration) time.Duration {
		var x time.Duration
		for _, v := range m {
			x = max(x, v)
		}
		return x
	}
	chain := longest(perApp) + longest(perCarrier)
	keeper := longest(perKeeper)
	var keeperSpan time.Duration
	for id, d := range perKeeper {
		if d == keeper {
			keeperSpan = time.Duration(span[id][1] - span[id][0])
		}
	}
	packed := total / time.Duration(max(par, 1))
	return DrainPath{Chain: chain.Seconds(), Keeper: keeper.Seconds(), Packed: packed.Seconds(),
		Critical: max(chain, keeper, packed).Seconds(), TaskTime: total.Seconds(), Tasks: len(tasks), Busy: busy.Seconds(), KeeperSpan: keeperSpan.Seconds()}
}

// taskCollector keeps every task it sees in polls of the emulator's task
// list, which keeps only the latest 2,000: a 250-app drain runs more.
type taskCollector struct {
	mu    sync.Mutex
	seen  map[string]bool // before the run
	tasks map[string]sim.TaskTime
}

func newTaskCollector(before []sim.TaskTime) *taskCollector {
	c := &taskCollector{seen: map[string]bool{}, tasks: map[string]sim.TaskTime{}}
	for _, t := range before {
		c.seen[t.UPID] = true
	}
	return c
}

func (c *taskCollector) add(ts []sim.TaskTime) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ts {
		if !c.seen[t.UPID] && t.Status == "stopped" {
			c.tasks[t.UPID] = t
		}
	}
}

// poll adds list() every interval until stop is closed, then once more.
func (c *taskCollector) poll(list func() ([]sim.TaskTime, error), interval time.Duration, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			ts, err := list()
			if err == nil {
				c.add(ts)
			}
			return err
		case <-time.After(interval):
			if ts, err := list(); err == nil {
				c.add(ts)
			}
		}
	}
}

func (c *taskCollector) all() []sim.TaskTime {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]sim.TaskTime, 0, len(c.tasks))
	for _, t := range c.tasks {
		out = append(out, t)
	}
	return out
}

// runDrain is `corral bench --drain N`: an emulator with three nodes,
// corral apply of N apps placed on pve1, then corral drain pve1 timed,
// the tasks read from the emulator as it runs.
func runDrain(ctx context.Context, o Options) (*DrainReport, error) {
	n := o.Drain.Apps
	dir := filepath.Join(o.Dir, fmt.Sprintf("drain%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	const nodes = 3
	// The view runtime, as the --scale run: hundreds of containers
	// measure the API and the tasks, not LXC.
	p, err := startSim(ctx, o.Corral, dir, o.TimeScale, nodes, "view")
	if err != nil {
		return nil, err
	}
	defer p.Close()
	m := filepath.Join(dir, "corral.yaml")
	env := corralEnv(p, dir)
	par := strconv.Itoa(o.Parallelism)
	if err := os.WriteFile(m, []byte(drainYAML(n, "pve1")), 0o644); err != nil {
		return nil, err
	}
	say(o, fmt.Sprintf("corral apply, %d apps on pve1, time scale %g", n, o.TimeScale))
	start := time.Now()
	if _, err := runLogged(ctx, dir, "corral-apply", env, dir, o.Corral, "apply", "-f", m, "--auto-approve", "--parallelism", par); err != nil {
		return nil, err
	}
	r := &DrainReport{Apps: n, Nodes: nodes, TimeScale: o.TimeScale, Parallelism: o.Parallelism, Setup: time.Since(start).Seconds()}
	if err := os.WriteFile(m, []byte(drainYAML(n, "")), 0o644); err != nil {
		return nil, err
	}
	list := func() ([]sim.TaskTime, error) { return p.tasks(ctx) }
	before, err := list()
	if err != nil {
		return nil, err
	}
	col := newTaskCollector(before)
	if err := p.resetRequests(ctx); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	polled := make(chan error, 1)
	go func() { polled <- col.poll(list, time.Second, stop) }()
	say(o, fmt.Sprintf("corral drain pve1, %d apps, parallelism %d", n, o.Parallelism))
	start = time.Now()
	_, err = runLogged(ctx, dir, "corral-drain", env, dir, o.Corral, "drain", "pve1", "-f", m, "--auto-approve", "--parallelism", par)
	wall := time.Since(start)
	close(stop)
	if perr := <-polled; err == nil && perr != nil {
		err = perr
	}
	if err != nil {
		return nil, fmt.Errorf("%w (outputs in %s)", err, dir)
	}
	r.Wall = wall.Seconds()
	if r.Requests, _, err = p.requests(ctx); err != nil {
		return nil, err
	}
	names, err := p.names(ctx)
	if err != nil {
		return nil, err
	}
	apps, keepers := map[string]bool{}, map[string]bool{}
	for id, name := range names {
		switch {
		case name == "corral-keeper":
			keepers[id] = true
		case !strings.HasPrefix(name, "corral-"):
			apps[id] = true
		}
	}
	r.DrainPath = drainCriticalPath(col.all(), apps, keepers, o.Parallelism, o.TimeScale)
	if r.Critical > 0 && o.TimeScale > 0 {
		r.Ratio = r.Wall / r.Critical
	}
	return r, nil
}
