package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

// Options say what `corral bench` runs.
type Options struct {
	// Corral is the corral binary measured (and the one that serves the
	// emulator): normally the running executable.
	Corral string
	// Apps are the workload sizes, one fresh emulator each.
	Apps []int
	// TimeScale multiplies real PVE task durations in the emulator: 1 for
	// the figures about waiting.
	TimeScale float64
	// Parallelism is passed to corral (--parallelism) and to the peer
	// (-parallelism).
	Parallelism int
	// Provision gives each app one provisioning step (run: true), so
	// that apply also logs into each container over SSH once it has
	// booted: the figures then include the wait for the guest's sshd,
	// which counts in the critical path as the emulator's boot delay.
	Provision bool
	// Peer, when set, runs the same workload through OpenTofu.
	Peer *Peer
	// Scale, when set, runs the many-apps figures instead (scale.go).
	Scale *ScaleOptions
	// Drain, when set, runs the drain figures instead (drain.go).
	Drain *DrainOptions
	// Dir holds the emulators' state and every command's output.
	Dir string
	// Progress, when set, is told what runs now.
	Progress func(string)
}

// Report is what `corral bench` prints (-o json: exactly this).
type Report struct {
	Machine Machine      `json:"machine"`
	Runs    []ToolRun    `json:"runs,omitempty"`
	Scale   *ScaleReport `json:"scale,omitempty"`
	Drain   *DrainReport `json:"drain,omitempty"`
	// Ratios compare the peer with corral, step by step.
	Ratios []Ratio `json:"peer_ratios,omitempty"`
}

// Machine says where the figures come from.
type Machine struct {
	CPUs   int    `json:"cpus"`
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	Date   string `json:"date"`
}

// ToolRun is one tool's workload of Apps apps on one emulator.
type ToolRun struct {
	Tool        string  `json:"tool"` // corral or tofu
	Apps        int     `json:"apps"`
	Provision   bool    `json:"provision,omitempty"`
	Nodes       int     `json:"nodes"`
	TimeScale   float64 `json:"time_scale"`
	Parallelism int     `json:"parallelism"`
	Steps       []Step  `json:"steps"`
}

// Step is one command of a run, measured.
type Step struct {
	// Name is apply, noop-plan, noop-apply or destroy.
	Name string `json:"name"`
	// Wall is the command's wall time as the user waits for it, process
	// start to exit.
	Wall float64 `json:"wall_s"`
	// CriticalPath is the longest chain of PVE tasks the command caused:
	// per app the sum of its tasks' run times (one app's tasks run one
	// after another), the longest app, plus corral's shared keeper tasks
	// (every app on a node waits for its keeper). 0 when no task ran.
	CriticalPath float64 `json:"critical_path_s"`
	// TaskTime is the sum of all the command's task run times.
	TaskTime float64 `json:"task_time_s"`
	// Overhead is Wall / CriticalPath: 0 when no task ran, and at time
	// scale 0, where the tasks take only the emulator's own time and the
	// ratio means nothing.
	Overhead float64 `json:"overhead"`
	Tasks    int     `json:"tasks"`
	// Requests are the API requests the emulator answered during the step.
	Requests       int     `json:"requests"`
	RequestsPerApp float64 `json:"requests_per_app"`
	// ByEndpoint counts the requests per "METHOD /schema/path", to see
	// where they go (task polling, config reads, …).
	ByEndpoint map[string]int `json:"requests_by_endpoint,omitempty"`
	// ByKind splits Requests into task polls, other reads and writes.
	ByKind Kinds `json:"requests_by_kind"`
	// MaxRSS is the measured process's peak resident memory (getrusage
	// ru_maxrss), for the memory targets of a plan at scale.
	MaxRSS int64 `json:"max_rss_bytes"`
}

// Ratio is the peer's wall time over corral's for one step and size.
type Ratio struct {
	Apps  int     `json:"apps"`
	Step  string  `json:"step"`
	Ratio float64 `json:"peer_over_corral"`
}

// WorkDir is the directory a bench keeps its emulators' state and
// commands' output in: keep, made when missing, which stays for a look
// afterwards; or, with keep "", a new temporary directory that cleanup
// removes.
func WorkDir(keep string) (dir string, cleanup func(), err error) {
	if keep != "" {
		return keep, func() {}, os.MkdirAll(keep, 0o755)
	}
	if dir, err = os.MkdirTemp("", "corral-bench"); err != nil {
		return "", func() {}, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// Run runs what o asks.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Corral == "" {
		return nil, errors.New("bench: no corral binary to measure")
	}
	if o.Parallelism < 1 {
		o.Parallelism = 10
	}
	r := &Report{Machine: Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Date: time.Now().UTC().Format(time.RFC3339)}}
	if o.Drain != nil {
		dr, err := runDrain(ctx, o)
		if err != nil {
			return nil, err
		}
		r.Drain = dr
		return r, nil
	}
	if o.Scale != nil {
		sr, err := runScale(ctx, o)
		if err != nil {
			return nil, err
		}
		r.Scale = sr
		return r, nil
	}
	for _, n := range o.Apps {
		dir := filepath.Join(o.Dir, fmt.Sprintf("n%d", n))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		p, err := startSim(ctx, o.Corral, dir, o.TimeScale, 1, "")
		if err != nil {
			return nil, err
		}
		cr, err := runCorralSteps(ctx, o, p, dir, n, 1, 0, 4)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("corral, %d apps: %w (outputs in %s)", n, err, dir)
		}
		r.Runs = append(r.Runs, *cr)
		if o.Peer != nil {
			pr, err := runPeer(ctx, o, p, dir, n)
			if err != nil {
				p.Close()
				return nil, fmt.Errorf("peer, %d apps: %w (outputs in %s)", n, err, dir)
			}
			r.Runs = append(r.Runs, *pr)
			for i, s := range pr.Steps {
				if i < len(cr.Steps) && cr.Steps[i].Wall > 0 {
					r.Ratios = append(r.Ratios, Ratio{Apps: n, Step: s.Name, Ratio: s.Wall / cr.Steps[i].Wall})
				}
			}
		}
		p.Close()
	}
	return r, nil
}

// workload renders n apps, each with one 1 GiB volume, started (corral
// starts what it creates), spread over nodes. The volume is freed on
// destroy, as the peer's destroy frees its mount point.
func workload(n, nodes int, provision bool) string {
	var b strings.Builder
	b.WriteString("# corral bench workload\napps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - name: app%d\n    template: local:vztmpl/%s\n    features: {nesting: true}\n", i, debian12)
		if nodes > 1 {
			fmt.Fprintf(&b, "    node: pve%d\n", i%nodes+1)
		}
		b.WriteString("    volumes:\n      - {name: data, size: 1G, mount: /srv/data, reclaim: delete}\n")
		if provision {
			b.WriteString("    provision:\n      - run: \"true\"\n")
		}
	}
	return b.String()
}

// runCorralSteps applies n apps from nothing, then a no-op plan, a no-op
// apply and a destroy, each as its own corral process; only the first
// count steps.
func runCorralSteps(ctx context.Context, o Options, p *simProc, dir string, n, nodes, from, to int) (*ToolRun, error) {
	m := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(m, []byte(workload(n, nodes, o.Provision && o.Scale == nil)), 0o644); err != nil {
		return nil, err
	}
	par := strconv.Itoa(o.Parallelism)
	run := &ToolRun{Tool: "corral", Apps: n, Nodes: nodes, TimeScale: o.TimeScale, Parallelism: o.Parallelism, Provision: o.Provision && o.Scale == nil}
	boot := time.Duration(0)
	if run.Provision {
		boot = time.Duration(float64(model.DefaultDuration("bootdelay")) * o.TimeScale)
	}
	steps := []struct {
		name string
		args []string
	}{
		{"apply", []string{"apply", "-f", m, "--auto-approve", "--parallelism", par}},
		{"noop-plan", []string{"plan", "-f", m}},
		{"noop-apply", []string{"apply", "-f", m, "--auto-approve", "--parallelism", par}},
		{"destroy", []string{"destroy", "-f", m, "--auto-approve", "--delete-volumes", "--parallelism", par}},
	}
	env := corralEnv(p, dir)
	for _, s := range steps[from:to] {
		say(o, fmt.Sprintf("corral %s, %d apps, time scale %g", s.name, n, o.TimeScale))
		var rss int64
		st, err := measure(ctx, p, s.name, n, o.TimeScale, boot, func() (err error) {
			rss, err = runLogged(ctx, dir, "corral-"+s.name, env, dir, o.Corral, s.args...)
			return err
		})
		if err != nil {
			return nil, err
		}
		st.MaxRSS = rss
		run.Steps = append(run.Steps, *st)
	}
	return run, nil
}

func say(o Options, s string) {
	if o.Progress != nil {
		o.Progress(s)
	}
}

// corralEnv is the environment a user has after sourcing the emulator's
// env file, with corral's own files kept under dir.
func corralEnv(p *simProc, dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PROXMOX_VE_") || strings.HasPrefix(k, "XDG_") || k == "CORRAL_LOG" || k == "CORRAL_SIM_TIME_SCALE" {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range []string{"PROXMOX_VE_ENDPOINT", "PROXMOX_VE_API_TOKEN", "PROXMOX_VE_FINGERPRINT"} {
		env = append(env, k+"="+p.env[k])
	}
	// corral polls a task when it is expected to end: at the emulator's
	// time scale, as a user who sourced its env file does (at 1, as on a
	// real node).
	if ts := p.env["CORRAL_SIM_TIME_SCALE"]; ts != "" {
		env = append(env, "CORRAL_SIM_TIME_SCALE="+ts)
	}
	// The emulator's guests answer SSH on a free port (its env file
	// says which), so that two benches do not contend for port 22.
	if port := p.env["CORRAL_SIM_GUEST_SSH_PORT"]; port != "" {
		env = append(env, "CORRAL_SIM_GUEST_SSH_PORT="+port)
	}
	return append(env, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
}

// runLogged runs a command with its output in dir/name.out and .err and
// returns its peak resident memory in bytes (0 where the system does not
// say); a failure carries the tail of its stderr.
func runLogged(ctx context.Context, dir, name string, env []string, wd, bin string, args ...string) (int64, error) {
	out, err := os.Create(filepath.Join(dir, name+".out"))
	if err != nil {
		return 0, err
	}
	defer out.Close()
	errPath := filepath.Join(dir, name+".err")
	errf, err := os.Create(errPath)
	if err != nil {
		return 0, err
	}
	defer errf.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, wd, out, errf
	if err := cmd.Run(); err != nil {
		tail, _ := os.ReadFile(errPath)
		if len(tail) > 1500 {
			tail = tail[len(tail)-1500:]
		}
		return 0, fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, tail)
	}
	return maxRSS(cmd.ProcessState), nil
}

// measure runs one step and reads from the emulator what it caused.
// boot is how long a started guest takes until its sshd answers, counted
// in its chain when the run logs in (0: it does not).
func measure(ctx context.Context, p *simProc, name string, apps int, scale float64, boot time.Duration, run func() error) (*Step, error) {
	names, err := p.names(ctx)
	if err != nil {
		return nil, err
	}
	before, err := p.tasks(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, t := range before {
		seen[t.UPID] = true
	}
	if err := p.resetRequests(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := run(); err != nil {
		return nil, err
	}
	wall := time.Since(start)
	reqs, byEndpoint, err := p.requests(ctx)
	if err != nil {
		return nil, err
	}
	after, err := p.tasks(ctx)
	if err != nil {
		return nil, err
	}
	later, err := p.names(ctx)
	if err != nil {
		return nil, err
	}
	for k, v := range later {
		names[k] = v
	}
	var caused []sim.TaskTime
	for _, t := range after {
		if !seen[t.UPID] {
			caused = append(caused, t)
		}
	}
	st := &Step{Name: name, Wall: wall.Seconds(), Tasks: len(caused), Requests: reqs, RequestsPerApp: float64(reqs) / float64(max(apps, 1)), ByEndpoint: byEndpoint, ByKind: kindsOf(byEndpoint)}
	cp, total, err := criticalPath(caused, names, boot)
	if err != nil {
		return nil, err
	}
	st.CriticalPath, st.TaskTime = cp.Seconds(), total.Seconds()
	if cp > 0 && scale > 0 {
		st.Overhead = wall.Seconds() / cp.Seconds()
	}
	return st, nil
}

// criticalPath is the longest chain of tasks: the tasks of one guest run
// one after another, so a guest's chain is the sum of its tasks' run
// times. corral's keepers (named corral-…) are shared: their tasks on
// a guest's node that ended before the guest's first task began are what
// it waited for and are added to its chain; a keeper task that ran beside it
// (a first apply creates the app beside the keeper carrying the lock) is
// not, and the keepers' own sum is a chain of its own. It also returns
// the sum of all run times.
//
// boot, when not 0, is added to the chain of each guest that was started
// (a vzstart task): the wait for its sshd, before corral can log in.
func criticalPath(tasks []sim.TaskTime, names map[string]string, boot time.Duration) (time.Duration, time.Duration, error) {
	perGuest := map[string]time.Duration{}
	firstBegan := map[string]int64{}
	var keepers []sim.TaskTime
	var shared, total time.Duration
	for _, t := range tasks {
		if t.Status != "stopped" {
			return 0, 0, fmt.Errorf("task %s still running after the command ended", t.UPID)
		}
		total += t.Busy
		if strings.HasPrefix(names[t.ID], "corral-") {
			shared += t.Busy
			keepers = append(keepers, t)
			continue
		}
		g := t.Node + "/" + t.ID
		perGuest[g] += t.Busy
		if b, ok := firstBegan[g]; !ok || t.Began < b {
			firstBegan[g] = t.Began
		}
		if boot > 0 && t.Type == "vzstart" {
			perGuest[g] += boot
		}
	}
	longest := shared
	for g, d := range perGuest {
		for _, k := range keepers {
			if node, _, _ := strings.Cut(g, "/"); k.Node == node && k.Ended <= firstBegan[g] {
				d += k.Busy
			}
		}
		longest = max(longest, d)
	}
	return longest, total, nil
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func runtimeCPUs() int { return runtime.NumCPU() }
