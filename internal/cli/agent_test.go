package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/metrics"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/testenv"
)

// These tests run corral agent's rounds against the emulator over HTTPS
// with the agent's clock in the test's hand: a round is one Tick, and
// time moves only when the test moves it.

// clock is a hand-moved clock, safe to read from the HTTP server.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type agentRig struct {
	t      *testing.T
	c      *cluster
	m      string
	ag     *agent.Agent
	ops    *agentOps
	clock  *clock
	stderr *bytes.Buffer
}

// newAgentRig makes an agent on c's emulator for manifest m, its clock
// starting at start.
func (c *cluster) newAgentRig(m, mode string, start time.Time, edit func(*agentArgs)) *agentRig {
	c.t.Helper()
	return c.newAgentRigLog(m, mode, start, edit, nil)
}

// newAgentRigLog is newAgentRig logging to log (nil: the rig's stderr).
func (c *cluster) newAgentRigLog(m, mode string, start time.Time, edit func(*agentArgs), log *slog.Logger) *agentRig {
	c.t.Helper()
	a := &agentArgs{ff: fileFlags{path: m}, mode: mode, listen: "127.0.0.1:0", interval: time.Minute, backoff: time.Minute, backoffMax: time.Hour,
		cf: connFlags{endpoint: c.srv.URL(), token: c.srv.Credentials().OperatorToken, fingerprint: c.srv.Fingerprint()}}
	if edit != nil {
		edit(a)
	}
	if err := a.check(); err != nil {
		c.t.Fatal(err)
	}
	var errb bytes.Buffer
	st := &streams{in: strings.NewReader(""), out: io.Discard, err: &lockedWriter{w: &errb}}
	clk := &clock{t: start}
	if log == nil {
		log = slog.New(slog.NewTextHandler(st.err, nil))
	}
	ag, ops, err := startAgent(context.Background(), st, a, log, clk.Now)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(ops.Close)
	return &agentRig{t: c.t, c: c, m: m, ag: ag, ops: ops, clock: clk, stderr: &errb}
}

func (r *agentRig) tick() { r.ag.Tick(context.Background()) }

// events returns the events of kind since seq (all when seq is 0), oldest
// first.
func (r *agentRig) events(kind string, after int64) []agent.Event {
	var out []agent.Event
	list := r.ag.Events.List()
	for i := len(list) - 1; i >= 0; i-- {
		if e := list[i]; e.Seq > after && (kind == "" || e.Kind == kind) {
			out = append(out, e)
		}
	}
	return out
}

func (r *agentRig) lastSeq() int64 {
	if l := r.ag.Events.List(); len(l) > 0 {
		return l[0].Seq
	}
	return 0
}

func (r *agentRig) app(name string) agent.AppView {
	r.t.Helper()
	for _, a := range r.ag.Status().Apps {
		if a.Name == name {
			return a
		}
	}
	r.t.Fatalf("app %s not in the agent's status: %+v", name, r.ag.Status())
	return agent.AppView{}
}

// metric reads one sample from the agent's /metrics text: the first one
// named name whose labels include the given name, value pairs; -1 when
// there is none.
func (r *agentRig) metric(name string, labels ...string) float64 {
	r.t.Helper()
	samples, err := metrics.Parse(r.metricsText())
	if err != nil {
		r.t.Fatal(err)
	}
next:
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.Labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return s.Value
	}
	return -1
}

// metricsText is what the agent's registry writes for /metrics.
func (r *agentRig) metricsText() string {
	r.t.Helper()
	var b strings.Builder
	if _, err := r.ag.Registry().WriteTo(&b); err != nil {
		r.t.Fatal(err)
	}
	return b.String()
}

func (c *cluster) pveClient() *pve.Client {
	c.t.Helper()
	pc := pvetest.Client(c.t, c.srv, c.srv.Credentials().OperatorToken)
	return pc
}

// drift sets the memory of app's container through the PVE API, as a
// human in the web UI would.
func (c *cluster) drift(m string, memory string) int {
	c.t.Helper()
	ct := c.status(m).Apps[0].Containers[0]
	if err := c.pveClient().UpdateContainerConfig(context.Background(), "pve", ct.VMID, &pve.ConfigUpdate{Raw: map[string]string{"memory": memory}}); err != nil {
		c.t.Fatal(err)
	}
	return ct.VMID
}

func hasEvent(evs []agent.Event, app, text string) bool {
	for _, e := range evs {
		if (app == "" || e.App == app) && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

// Drift made through the PVE API is reported in observe mode (event,
// API, metric) and left alone; in reconcile mode the next round repairs
// it through apply's code.
func TestAgent_drift(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode       string
		wantMemory string
		wantEvent  string
	}{
		{"observe", "1024", agent.KindDrift},
		{"reconcile", "512", agent.KindReconcile},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			c, m := appliedNotes(t)
			r := c.newAgentRig(m, tt.mode, time.Now(), nil)
			r.tick()
			if evs := r.events(agent.KindDrift, 0); len(evs) != 0 || !r.ag.Status().InSync {
				t.Fatalf("drift reported on a cluster in sync: %+v", evs)
			}
			if got := r.metric("corral_agent_app_drift", "app", "notes"); got != 0 {
				t.Errorf("corral_agent_app_drift before = %v, want 0", got)
			}
			seq := r.lastSeq()
			vmid := c.drift(m, "1024")
			// Not yet due: the interval has not passed.
			r.tick()
			if r.app("notes").Drift != "no-op" {
				t.Fatalf("planned before the interval was up")
			}
			r.clock.Add(time.Minute)
			r.tick()
			drift := r.events(agent.KindDrift, seq)
			if len(drift) != 1 || drift[0].App != "notes" || !strings.Contains(drift[0].Message, "memory") {
				t.Fatalf("drift events = %+v\nstderr:\n%s", drift, r.stderr)
			}
			if got := c.config(vmid)["memory"]; got != tt.wantMemory {
				t.Errorf("memory after the round = %s, want %s", got, tt.wantMemory)
			}
			if len(r.events(tt.wantEvent, seq)) == 0 {
				t.Errorf("no %s event: %+v", tt.wantEvent, r.events("", seq))
			}
			switch tt.mode {
			case "observe":
				if r.app("notes").Drift != "update" || r.metric("corral_agent_app_drift", "app", "notes") != 1 || r.metric("corral_agent_in_sync") != 0 {
					t.Errorf("observe: app %+v, drift metric %v", r.app("notes"), r.metric("corral_agent_app_drift", "app", "notes"))
				}
				// Reported once, not every round.
				r.clock.Add(time.Minute)
				r.tick()
				if n := len(r.events(agent.KindDrift, seq)); n != 1 {
					t.Errorf("drift reported %d times over two rounds, want once", n)
				}
			case "reconcile":
				if r.app("notes").Drift != "no-op" || r.metric("corral_agent_reconciles_total", "result", "applied") != 1 ||
					len(r.events(agent.KindInSync, seq)) != 1 {
					t.Errorf("reconcile: app %+v, events %+v", r.app("notes"), r.events("", seq))
				}
				if r := c.run("plan", "-f", m); r.code != 0 {
					t.Errorf("plan after the agent reconciled: exit %d\n%s", r.code, r.stdout)
				}
			}
		})
	}
}

// A manifest changed on disk is planned at once, not at the next
// interval.
func TestAgent_manifestChangePlansAtOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifestIn(t, "demo", strings.ReplaceAll(appManifest, "MEMORY", "512")) // defaulted: edited in place below
	c.mustRun("apply", "-f", m, "--auto-approve")
	r := c.newAgentRig(m, "reconcile", time.Now(), nil)
	r.tick()
	seq := r.lastSeq()
	if err := os.WriteFile(m, []byte(strings.ReplaceAll(appManifest, "MEMORY", "768")), 0o644); err != nil {
		t.Fatal(err)
	}
	r.tick() // same instant: only the file changed
	if !hasEvent(r.events(agent.KindManifest, seq), "", "changed") {
		t.Errorf("no manifest event: %+v", r.events("", seq))
	}
	vmid := c.status(m).Apps[0].Containers[0].VMID
	if got := c.config(vmid)["memory"]; got != "768" {
		t.Errorf("memory = %s after the manifest changed, want 768\n%s", got, r.stderr)
	}
	// An invalid manifest is reported and the last valid one kept.
	seq = r.lastSeq()
	if err := os.WriteFile(m, []byte("apps: [{name: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.tick()
	if !hasEvent(r.events(agent.KindManifest, seq), "", "not valid") || r.app("notes").Drift != "no-op" {
		t.Errorf("invalid manifest: events %+v, app %+v", r.events("", seq), r.app("notes"))
	}
	// A file that is gone is reported once, and the last valid manifest
	// stays in force.
	seq = r.lastSeq()
	if err := os.Remove(m); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		r.clock.Add(time.Minute)
		r.tick()
	}
	if evs := r.events(agent.KindManifest, seq); len(evs) != 1 || !strings.Contains(evs[0].Message, "keeping the last valid one") || r.app("notes").Drift != "no-op" {
		t.Errorf("manifest gone: events %+v, app %+v", evs, r.app("notes"))
	}
}

// The agent never fights a human's run: while another corral holds the
// lock, its reconcile round is skipped and recorded, and nothing
// changes; the next round after the lock is released repairs the drift.
func TestAgent_skipsWhileLockHeld(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t)
	r := c.newAgentRig(m, "reconcile", time.Now(), nil)
	r.tick()
	vmid := c.drift(m, "1024")

	ctx := context.Background()
	pc := c.pveClient()
	obs, err := apply.Observe(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	human := &apply.Executor{Client: pc}
	lock, err := human.Lock(ctx, obs, []string{"pve"}, apply.LockOptions{Command: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	seq := r.lastSeq()
	r.clock.Add(time.Minute)
	r.tick()
	skipped := r.events(agent.KindSkipped, seq)
	if len(skipped) != 1 || !strings.Contains(skipped[0].Message, "holds corral's lock on node pve") {
		t.Fatalf("skipped events = %+v\nall: %+v", skipped, r.events("", seq))
	}
	if got := c.config(vmid)["memory"]; got != "1024" {
		t.Errorf("the agent changed memory to %s under a human's lock", got)
	}
	if got := r.metric("corral_agent_reconciles_total", "result", "skipped"); got != 1 {
		t.Errorf("reconciles_total{skipped} = %v", got)
	}
	lock.Release()
	r.clock.Add(time.Minute)
	r.tick()
	if got := c.config(vmid)["memory"]; got != "512" {
		t.Errorf("memory = %s after the lock was released, want 512\n%s", got, r.stderr)
	}
}

// The agent and a concurrent corral apply never interleave: both run at
// once against the same drift; exactly one of them changes the cluster,
// the other finds the lock taken (the agent skips) or the work done (apply
// says so), and the cluster ends as the manifest says.
func TestAgent_concurrentApply(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t)
	c.srv.SetFaults(sim.FaultSpec{Latency: 5 * time.Millisecond})
	for round := 0; round < 3; round++ {
		r := c.newAgentRig(m, "reconcile", time.Now(), nil)
		vmid := c.drift(m, "1024")
		var wg sync.WaitGroup
		var res result
		wg.Add(1)
		go func() {
			defer wg.Done()
			res = c.run("apply", "-f", m, "--auto-approve", "--lock-timeout", "1m")
		}()
		r.tick()
		wg.Wait()
		if res.code != 0 {
			t.Fatalf("round %d: apply: exit %d\n%s", round, res.code, res.stderr)
		}
		agentApplied := r.metric("corral_agent_reconciles_total", "result", "applied") == 1
		humanApplied := strings.Contains(res.stderr, "Apply complete")
		t.Logf("round %d: agent applied %v, skipped %v; apply applied %v", round, agentApplied, r.metric("corral_agent_reconciles_total", "result", "skipped") == 1, humanApplied)
		if agentApplied == humanApplied {
			t.Errorf("round %d: agent applied %v, apply applied %v: want exactly one\napply:\n%s\nagent events: %+v", round, agentApplied, humanApplied, res.stderr, r.events("", 0))
		}
		if got := c.config(vmid)["memory"]; got != "512" {
			t.Errorf("round %d: memory = %s, want 512", round, got)
		}
	}
}

// The server: /healthz, /metrics (valid exposition text: metrics.Check), the
// JSON API and the status page, read-only, and the bearer token when one
// is set.
func TestAgent_server(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t)
	r := c.newAgentRig(m, "observe", time.Now(), nil)
	r.tick()
	c.drift(m, "1024")
	r.clock.Add(time.Minute)
	r.tick()

	text := r.metricsText()
	if err := metrics.Check(text); err != nil {
		t.Errorf("metrics: %v\n%s", err, text)
	}
	const token = "agent-test-token-7f3a"
	for _, tok := range []string{"", token} {
		srv := httptest.NewServer(r.ag.Handler(tok))
		get := func(path, auth string) (int, string, http.Header) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), resp.Header
		}
		if code, body, _ := get("/healthz", ""); code != 200 || strings.TrimSpace(body) != "ok" {
			t.Errorf("token %q: /healthz = %d %q", tok, code, body)
		}
		if tok != "" {
			for _, p := range []string{"/", "/metrics", "/api/v1/apps", "/api/v1/events"} {
				if code, _, _ := get(p, ""); code != http.StatusUnauthorized {
					t.Errorf("%s without the token: %d, want 401", p, code)
				}
				if code, _, _ := get(p, "wrong"); code != http.StatusUnauthorized {
					t.Errorf("%s with a wrong token: %d, want 401", p, code)
				}
			}
		}
		code, body, h := get("/metrics", tok)
		if ct := h.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("/metrics: Content-Type %q", ct)
		}
		if err := metrics.Check(body); err != nil {
			t.Errorf("/metrics: %v\n%s", err, body)
		}
		for _, want := range []string{`corral_agent_app_drift{app="notes"} 1`, `corral_agent_apps 1`, `corral_agent_app_running{app="notes",node="pve"} 1`,
			"corral_agent_operation_duration_seconds_bucket", "corral_agent_in_sync 0"} {
			if code != 200 || !strings.Contains(body, want) {
				t.Errorf("/metrics: %d, no %q", code, want)
			}
		}
		code, body, _ = get("/api/v1/apps", tok)
		var st agent.Status
		if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
			t.Fatalf("/api/v1/apps: %d %v\n%s", code, err, body)
		}
		if len(st.Apps) != 1 || st.Apps[0].Name != "notes" || st.Apps[0].State != "running" || st.Apps[0].Drift != "update" ||
			len(st.Apps[0].Volumes) != 2 || st.Mode != "observe" || len(st.Nodes) != 1 {
			t.Errorf("/api/v1/apps = %s", body)
		}
		code, body, _ = get("/api/v1/events", tok)
		var ev struct{ Events []agent.Event }
		if err := json.Unmarshal([]byte(body), &ev); err != nil || code != 200 || !hasEvent(ev.Events, "notes", "drifted") {
			t.Errorf("/api/v1/events: %d %v\n%s", code, err, body)
		}
		code, body, h = get("/", tok)
		if code != 200 || !strings.Contains(body, `data-app="notes"`) || !strings.Contains(body, "http-equiv=\"refresh\"") ||
			strings.Contains(body, "http://") && !strings.Contains(body, "<code>") || strings.Contains(body, "src=\"http") || strings.Contains(body, "href=\"http") {
			t.Errorf("/: %d\n%s", code, body)
		}
		if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("/ without a CSP that forbids external assets: %q", h.Get("Content-Security-Policy"))
		}
		// Read-only: nothing but GET.
		resp, err := http.Post(srv.URL+"/api/v1/apps", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST /api/v1/apps: %d", resp.StatusCode)
		}
		srv.Close()
	}
}

// corral agent refuses --listen off the loopback without a token before
// it reads or connects to anything (the address table is in package
// agent's TestCheckListen).
func TestAgent_listenNeedsTokenOffLoopback(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:9120", ":9120", "192.168.1.5:9120"} {
		r := runCorral(t, "agent", "-f", "nope.yaml", "--listen", listen)
		if r.code != 1 || !strings.Contains(r.stderr, "not a loopback address") || !strings.Contains(r.stderr, "--auth-token") {
			t.Errorf("corral agent --listen %s: exit %d %s", listen, r.code, r.stderr)
		}
	}
	// With a token it gets past the check (to the missing manifest).
	t.Setenv("CORRAL_AGENT_TOKEN", "s3cret")
	if r := runCorral(t, "agent", "-f", "nope.yaml", "--listen", "0.0.0.0:9120"); r.code != 1 || !strings.Contains(r.stderr, "nope.yaml not found") {
		t.Errorf("with a token: exit %d %s", r.code, r.stderr)
	}
}

func runCorral(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// pausingObserver holds the agent's first executor step until released,
// telling the test that it started (the agent then holds the lock).
type pausingObserver struct {
	apply.Observer
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (p *pausingObserver) Step(app, phase, detail string) func(error) {
	p.once.Do(func() {
		close(p.started)
		<-p.release
	})
	return p.Observer.Step(app, phase, detail)
}

// The other order: the agent is in the middle of its reconcile, holding
// the lock, when a human runs corral apply. apply waits for the lock,
// saying who holds it, plans again under it, and finds nothing left to do;
// nothing of the two runs interleaves.
func TestAgent_applyWaitsForTheAgent(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t)
	r := c.newAgentRig(m, "reconcile", time.Now(), nil)
	vmid := c.drift(m, "1024")
	pause := &pausingObserver{Observer: r.ops.observer, started: make(chan struct{}), release: make(chan struct{})}
	r.ops.observer = pause
	ticked := make(chan struct{})
	go func() {
		r.tick()
		close(ticked)
	}()
	<-pause.started
	var stderr syncBuffer
	applied := make(chan int, 1)
	go func() {
		args := append([]string{"apply", "-f", m, "--auto-approve", "--lock-timeout", "1m"}, c.connArgs()...)
		applied <- Run(context.Background(), args, strings.NewReader(""), io.Discard, &stderr)
	}()
	testenv.WaitFor(t, "apply to wait for the agent's lock", func() bool {
		select {
		case code := <-applied:
			t.Fatalf("apply exit %d without waiting for the agent's lock:\n%s", code, stderr.String())
		default:
		}
		return strings.Contains(stderr.String(), "waiting for the lock on node pve")
	})
	if got := c.config(vmid)["memory"]; got != "1024" {
		t.Fatalf("memory = %s while the agent's step is held back", got)
	}
	close(pause.release)
	<-ticked
	if code := <-applied; code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Another corral made these changes meanwhile; nothing left to do.") {
		t.Errorf("apply after the agent's reconcile:\n%s", stderr.String())
	}
	if r.metric("corral_agent_reconciles_total", "result", "applied") != 1 || c.config(vmid)["memory"] != "512" {
		t.Errorf("agent events %+v, memory %s", r.events("", 0), c.config(vmid)["memory"])
	}
}

// A cluster that cannot be read is an error event (once while it lasts),
// corral_agent_api_errors_total and the API's error; the agent keeps its
// last view and recovers on its own.
func TestAgent_apiErrors(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t)
	r := c.newAgentRig(m, "observe", time.Now(), nil)
	r.tick()
	seq := r.lastSeq()
	c.srv.SetFaults(sim.FaultSpec{Read5xx: 1, Match: "/cluster/resources"})
	for i := 0; i < 2; i++ {
		r.clock.Add(time.Minute)
		r.tick()
	}
	errs := r.events(agent.KindError, seq)
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "read the cluster") {
		t.Errorf("error events over two failed rounds: %+v", errs)
	}
	if got := r.metric("corral_agent_api_errors_total", "operation", "observe"); got != 2 {
		t.Errorf("api_errors_total{observe} = %v, want 2", got)
	}
	if st := r.ag.Status(); st.Error == "" || len(st.Apps) != 1 || st.Apps[0].State != "running" {
		t.Errorf("status while the cluster cannot be read: %+v", st)
	}
	c.srv.SetFaults(sim.FaultSpec{})
	r.clock.Add(time.Minute)
	r.tick()
	if st := r.ag.Status(); st.Error != "" {
		t.Errorf("error kept after recovery: %q", st.Error)
	}
}
