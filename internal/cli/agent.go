package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/hostcheck"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

type agentArgs struct {
	ff             fileFlags
	cf             connFlags
	listen         string
	mode           string
	interval       time.Duration
	healthFailures int
	backoff        time.Duration
	backoffMax     time.Duration
	logFormat      string
	authToken      string
	allowedHosts   []string
	trustHostKey   bool
	git            gitFlags
	// passEnv are the only variables a manifest from --git may read.
	passEnv []string
}

// agentStarted, when set, is told the agent and its server's address once
// it serves (tests drive a running agent through it).
var agentStarted func(a *agent.Agent, addr net.Addr)

func newAgentCmd(st *streams) *cobra.Command {
	a := &agentArgs{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Keep the cluster on the manifest: drift, health, scheduled backups, metrics and a status page",
		Long: `agent runs until stopped. Every --interval, and as soon as the manifest
file changes, it plans as corral plan does. In --mode observe it reports
drift (events, metrics); in --mode reconcile it applies as corral apply
--auto-approve does, under the same lock: when another corral holds the
lock the agent skips that round and records it, it never waits for nor
interrupts a human's run.

It runs each app's health checks on their interval (inside the
container, as apply does) and restarts an app's container after
--health-failures consecutive failures of a check (default: the check's
retries+1 from the manifest), waiting --restart-backoff before the next
restart, doubling up to --restart-backoff-max.

Apps with backup.schedule are backed up as corral backup does (the
task's exit status checked, keep pruned), once per schedule window: an
archive corral made in the current window counts, so a restarted agent
does not back up twice.

With --git URL the manifest comes from a Git repository (--git-ref,
--git-path): fetched when a plan is due, a new commit applied; a commit
whose manifest is invalid is reported and the last good one kept.

corral agent install runs the agent in a container of its own on the
cluster, with its own API token, under systemd.

It serves /healthz, /metrics (Prometheus), /api/v1/apps, /api/v1/events
and a status page at / on --listen (loopback by default; another address
needs --auth-token). It answers only requests whose Host header names it
(localhost, the --listen name, an IP address, the machine's hostname off
the loopback, and each --allowed-host): a web page that points its own
name at the agent (DNS rebinding) is refused with 421. SIGTERM or Ctrl-C lets the step under way finish,
releases the lock and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgent(cmd, st, a) },
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&a.listen, "listen", "127.0.0.1:9120", "address of the status page, API and metrics (off the loopback only with --auth-token)")
	fl.StringVar(&a.mode, "mode", "observe", "observe (report drift) or reconcile (apply it)")
	fl.DurationVar(&a.interval, "interval", time.Minute, "time between plans (a manifest change plans at once)")
	fl.IntVar(&a.healthFailures, "health-failures", 0, "consecutive failures of a health check that restart the app (0: the check's retries+1)")
	fl.DurationVar(&a.backoff, "restart-backoff", time.Minute, "wait after restarting an app before it may be restarted again (doubles each time)")
	fl.DurationVar(&a.backoffMax, "restart-backoff-max", time.Hour, "longest wait between restarts of an app")
	fl.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	fl.StringVar(&a.authToken, "auth-token", "", "bearer token the server requires (env CORRAL_AGENT_TOKEN); needed to listen off the loopback")
	fl.StringSliceVar(&a.allowedHosts, "allowed-host", nil, "another name the server answers to in the Host header (repeatable; besides localhost, the --listen name, any IP address, and the hostname off the loopback)")
	fl.BoolVar(&a.trustHostKey, "trust-host-key", false, "accept a container's SSH host key when corral has none pinned")
	a.git.add(fl)
	fl.StringSliceVar(&a.passEnv, "pass-env", nil, "--git: an environment variable the manifest may read with ${env:…} (repeatable); it may read no other")
	cmd.AddCommand(newAgentStatusCmd(st), newAgentInstallCmd(st), newAgentUninstallCmd(st))
	return cmd
}

// agentLogger is the agent's slog logger: JSON or text on stderr, at
// info unless --log-level says otherwise (a daemon's log is its record).
func agentLogger(cmd *cobra.Command, w io.Writer, format string) (*slog.Logger, error) {
	level := slog.LevelInfo
	if f := cmd.Flag("log-level"); f != nil && (f.Changed || os.Getenv("CORRAL_LOG") != "") {
		if err := level.UnmarshalText([]byte(strings.ToLower(f.Value.String()))); err != nil {
			return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.Value.String())
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func (a *agentArgs) check() error {
	switch a.mode {
	case string(agent.Observe), string(agent.Reconcile):
	default:
		return fmt.Errorf("--mode %q: want observe or reconcile", a.mode)
	}
	if a.interval < time.Second {
		return fmt.Errorf("--interval %s: want 1s or more", a.interval)
	}
	if a.healthFailures < 0 {
		return fmt.Errorf("--health-failures %d: want 0 (the manifest's retries+1) or more", a.healthFailures)
	}
	if err := hostcheck.CheckNames("--allowed-host", a.allowedHosts); err != nil {
		return err
	}
	if a.git.url == "" {
		a.git.url = os.Getenv(gitURLEnv) // install's way: no password on the command line
	}
	if err := a.git.check(); err != nil {
		return err
	}
	if err := checkPassEnv(a.passEnv, a.git.url != ""); err != nil {
		return err
	}
	if a.authToken == "" {
		a.authToken = os.Getenv("CORRAL_AGENT_TOKEN")
	}
	return agent.CheckListen(a.listen, a.authToken)
}

func runAgent(cmd *cobra.Command, st *streams, a *agentArgs) error {
	if err := a.check(); err != nil {
		return err
	}
	log, err := agentLogger(cmd, st.err, a.logFormat)
	if err != nil {
		return err
	}
	st.log = log
	ctx := cmd.Context()
	ag, ops, err := startAgent(ctx, st, a, log, nil)
	if err != nil {
		return err
	}
	defer ops.Close()
	ln, err := net.Listen("tcp", a.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w (is another agent running?)", a.listen, err)
	}
	// Only the server's own names: a web page that points its name at
	// the agent's address (DNS rebinding) is refused before the token.
	allow := hostcheck.ForListen(a.listen, a.allowedHosts, "--allowed-host")
	srv := &http.Server{Handler: allow.Handler(ag.Handler(a.authToken), false), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("serving the status page, API and metrics", "url", "http://"+ln.Addr().String()+"/")
	if agentStarted != nil {
		agentStarted(ag, ln.Addr())
	}
	return ag.Run(ctx)
}

// startAgent connects, and makes the agent and its operations; now is
// the agent's clock (nil: time.Now).
func startAgent(ctx context.Context, st *streams, a *agentArgs, log *slog.Logger, now func() time.Time) (*agent.Agent, *agentOps, error) {
	git := a.git.source()
	if git != nil {
		if err := firstPull(ctx, git); err != nil {
			return nil, nil, err
		}
		a.ff.path = git.ManifestPath()
	}
	if err := a.ff.single("corral agent"); err != nil {
		return nil, nil, err
	}
	confine := gitConfine(git, a.passEnv)
	if _, err := loadManifestIn(a.ff.path, false, confine); err != nil {
		return nil, nil, err
	}
	s, err := connect(ctx, st, a.cf)
	if err != nil {
		return nil, nil, err
	}
	if log == nil {
		log = st.logger()
	}
	// What the verbs' code says on stderr (a lock lost, another corral
	// was faster) becomes log lines, so that a JSON log stays JSON.
	ost := &streams{in: strings.NewReader(""), out: io.Discard, err: &logWriter{log: log}}
	ops := &agentOps{st: ost, s: s, path: a.ff.path, confine: confine, stop: stopOf(ctx), trustHostKey: a.trustHostKey}
	ag := agent.New(agent.Config{Path: a.ff.path, Mode: agent.Mode(a.mode), Interval: a.interval, HealthFailures: a.healthFailures,
		RestartBackoff: a.backoff, RestartBackoffMax: a.backoffMax, Now: now, Stop: stopOf(ctx), Log: log, Git: git}, ops)
	ops.observer = ag.Observer()
	return ag, ops, nil
}

// agentOps are the agent's operations, done with the code of the verbs:
// plan and apply (apply.go), restart (power.go), backup (backup.go).
type agentOps struct {
	st           *streams
	s            *session
	path         string
	confine      *manifest.Confine // with --git: what the manifest may read
	stop         <-chan struct{}
	observer     apply.Observer
	trustHostKey bool
}

func (o *agentOps) Close() { o.s.Close() }

// agentLock: the agent never waits for another corral's lock.
var agentLock = lockFlags{timeout: 0}

func (o *agentOps) executor(f *manifest.File) *apply.Executor {
	return &apply.Executor{Client: o.s.client, Secrets: secrets(f), LockWait: 2 * time.Minute, Guest: plan.GuestWorks(f, nil), Parallelism: 10,
		Stop: o.stop, Project: f.Project, Observer: newRedactObserver(f, o.observer)}
}

func (o *agentOps) Load() (*manifest.File, error) { return loadManifestIn(o.path, false, o.confine) }

func (o *agentOps) Observe(ctx context.Context, f *manifest.File) (*agent.Observation, error) {
	obs, err := apply.Observe(ctx, o.s.client)
	if err != nil {
		return nil, redactErr(f, err)
	}
	apps := plan.FromManifest(f)
	if err := apply.ObserveApps(ctx, o.s.client, obs, apps); err != nil {
		return nil, redactErr(f, err)
	}
	p, perr := plan.Make(apps, obs)
	var refused *plan.RefusedError
	if perr != nil && !errors.As(perr, &refused) {
		return nil, redactErr(f, perr)
	}
	out := &agent.Observation{InSync: refused == nil && p != nil && !p.HasChanges(), Apps: []agent.AppView{}, Nodes: []agent.NodeView{}}
	inv := plan.Inventory(obs)
	for _, a := range apps {
		v := agent.AppView{Name: a.Name, State: "not created", Drift: "unknown", DriftReasons: []string{}, Volumes: []agent.VolumeView{}}
		if cts := obs.Apps[a.Name]; len(cts) > 0 {
			ct := cts[0]
			v.Node, v.VMID, v.State = ct.Node, ct.VMID, ct.Status
			if ip, err := apply.Address(ctx, o.s.client, ct); err == nil {
				v.IP = ip
			}
		} else if vms := obs.VMs[a.Name]; len(vms) > 0 {
			// A VM app (issue 34): seen, so that its scheduled backups
			// run; it has no health checks the agent would act on.
			v.Node, v.VMID, v.State = vms[0].Node, vms[0].VMID, vms[0].Status
		}
		for _, vol := range inv {
			if vol.App == a.Name {
				v.Volumes = append(v.Volumes, agent.VolumeView{Name: vol.Name, VolID: vol.VolID, Mount: vol.Mount, Size: vol.Size})
			}
		}
		if refused != nil {
			v.Drift = "refused"
			for _, pr := range refused.Problems {
				v.DriftReasons = append(v.DriftReasons, f.Redact(fmt.Sprint(pr)))
			}
		}
		if p != nil {
			for _, c := range p.Changes {
				if c.App == a.Name {
					v.Drift = c.Action.String()
					for _, r := range c.Reasons {
						v.DriftReasons = append(v.DriftReasons, f.Redact(r))
					}
				}
			}
		}
		out.Apps = append(out.Apps, v)
	}
	for _, node := range obs.Nodes {
		n := agent.NodeView{Name: node, Online: true}
		for _, off := range obs.Offline {
			if off == node {
				n.Online = false
			}
		}
		for _, k := range obs.Keepers[node] { // the first, or one a lock made (apply/lockclaim.go)
			if k.Lease != nil && time.Now().Before(k.Lease.Until) {
				n.Lock = k.Lease.String()
			}
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out, nil
}

// Reconcile is corral apply --auto-approve --lock-timeout 0: the same
// preflight, plan, lock and executor.
func (o *agentOps) Reconcile(ctx context.Context, f *manifest.File) (bool, error) {
	if err := doctor.Preflight(ctx, o.s.client, f); err != nil {
		return false, fmt.Errorf("preflight: %w; `corral doctor` explains", redactErr(f, err))
	}
	p, obs, pj, err := makePlan(ctx, o.s, f)
	if err != nil {
		return false, redactErr(f, err)
	}
	if !p.HasChanges() {
		return false, nil
	}
	a := &applyArgs{lf: agentLock, autoApprove: true, parallelism: 10, lockWait: 2 * time.Minute, trustHostKey: o.trustHostKey}
	return applyUnderLock(ctx, o.st, o.s, f, o.executor(f), a, makePlan, p, obs, pj, func(*ui.PlanJSON) {})
}

// Check runs one health check as apply runs it, once, over SSH.
func (o *agentOps) Check(ctx context.Context, f *manifest.File, app agent.AppView, check string) error {
	for _, chk := range plan.GuestWorks(f, nil)[app.Name].Checks {
		if chk.Name != check {
			continue
		}
		ex := o.executor(f)
		var err error
		if ex.SSH, err = sshConfig(o.s, o.trustHostKey); err != nil {
			return err
		}
		ex.SSH.ConnectTimeout = 30 * time.Second
		return redactErr(f, ex.Health().CheckOnce(ctx, &plan.CT{VMID: app.VMID, Node: app.Node, Status: app.State}, chk))
	}
	return fmt.Errorf("app %s has no health check %q", app.Name, check)
}

// Restart is corral restart APP with --lock-timeout 0.
func (o *agentOps) Restart(ctx context.Context, f *manifest.File, app string) error {
	j := &backupJob{f: f, s: o.s, ex: o.executor(f)}
	obs, ct, err := j.appCT(ctx, app)
	if err != nil {
		return err
	}
	lock, ct, err := j.lockApp(ctx, o.st, obs, app, ct, "restart", agentLock)
	if err != nil {
		return err
	}
	defer lock.release()
	return j.err(j.ex.Power().Restart(lock.ctx, app, ct))
}

// Backup is corral backup APP with the manifest's backup section and
// --lock-timeout 0.
func (o *agentOps) Backup(ctx context.Context, f *manifest.File, app string) (*apply.BackupResult, error) {
	m, ok := f.App(app)
	if !ok {
		return nil, fmt.Errorf("app %q is not in %s", app, f.Path)
	}
	j := &backupJob{f: f, s: o.s, ex: o.executor(f)}
	return j.backup(ctx, o.st, app, apply.BackupOptions{Mode: m.Backup.Mode, Storage: m.Backup.Storage, Keep: m.Backup.Keep}, agentLock)
}

func (o *agentOps) Archives(ctx context.Context) ([]apply.Archive, error) {
	obs, err := apply.Observe(ctx, o.s.client)
	if err != nil {
		return nil, err
	}
	return apply.ListBackups(ctx, o.s.client, obs, "")
}

// logWriter turns each line written to it into an info log record.
type logWriter struct {
	log  *slog.Logger
	mu   sync.Mutex
	part []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		if line := strings.TrimSpace(string(w.part[:i])); line != "" {
			w.log.Info(line)
		}
		w.part = w.part[i+1:]
	}
}
