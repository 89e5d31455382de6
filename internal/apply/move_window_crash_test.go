package apply_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
)

// Three apps move to one node at once (the executor's parallel moves):
// the target keeper takes their volumes in shared protection windows
// (keeperbatch.go). corral is killed inside a window that takes the
// volumes of two apps: right after its intent write, between its
// move_volume tasks, before and after its record write. The next apply
// converges: every app runs on the manifest's node, every volume is
// recorded there once, with its data, the keeper is protected again, no
// carrier and no stray volume is left.

// windowApp is one of the three apps (windowApps), each with one volume.
const windowApp = `  - name: APP
    node: NODE
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 128
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
`

var windowApps = []string{"a1", "a2", "a3"}

func windowPlan(t *testing.T, node string) []plan.App {
	yaml := "apps:\n"
	for _, app := range windowApps {
		yaml += strings.NewReplacer("APP", app, "NODE", node).Replace(windowApp)
	}
	f, err := manifest.Parse("corral.yaml", []byte(yaml), manifest.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return plan.FromManifest(f)
}

var (
	ctPath     = regexp.MustCompile(`^/api2/json/nodes/([^/]+)/lxc/(\d+)(/.*)?$`)
	adoptLines = regexp.MustCompile(`(?m)^corral-adopting: `)
)

// windowGate sends a run's requests to PVE and holds the first keeper
// window on pve2 (its protection=0 write) open until every carrier has
// been handed over as far as the keeper's queue (keeperbatch.go), so
// that the window after it takes two moves at once. Its kill picks a
// request of that shared window (see the modes below).
//
// A carrier reaches the queue right after the last request of its hand-
// over: handOver's read of its unusedN entries on the target node (move.go
// unusedKeys), the second read of its config there after handOverCarried's.
// The gate counts those reads as they are answered, and looks at the
// count whenever it changes and when it starts holding: a count complete
// before the first window opened (every carrier read before the first
// protection write arrived) used to be looked at by no later read, and
// the gate held the window until its guard (seen in CI, 20 minutes). If
// the guard ever ends the hold, the test fails: the gate waited for a
// read the code no longer makes.
type windowGate struct {
	base   http.RoundTripper
	kill   string
	cancel context.CancelFunc

	mu       sync.Mutex
	carriers map[string]bool // VMIDs of the carriers created
	reads    map[string]int  // answered GETs of their config on pve2
	ready    chan struct{}   // closed once every carrier is at the queue
	until    time.Time       // the gate's hang guard: shortly before the test's deadline
	gated    bool
	timedOut bool // the guard, not the carriers, ended the hold
	shared   bool // a window's intent write named two or more volumes
	moves    int  // move_volume into the target keeper since then
	dead     bool
}

// handOverReads is how often a hand-over reads its carrier on the
// target node before it queues for the keeper (handOverCarried's read,
// then unusedKeys').
const handOverReads = 2

// atQueue closes ready once every carrier is at the keeper's queue;
// g.mu is held.
func (g *windowGate) atQueue() {
	if !g.gated || len(g.carriers) < len(windowApps) {
		return
	}
	for id := range g.carriers {
		if g.reads[id] < handOverReads {
			return
		}
	}
	select {
	case <-g.ready:
	default:
		close(g.ready)
	}
}

func (g *windowGate) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	form, _ := url.ParseQuery(string(body))
	m := ctPath.FindStringSubmatch(r.URL.Path)
	g.mu.Lock()
	if g.dead {
		g.mu.Unlock()
		return nil, errKilled
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/lxc") && form.Get("hostname") == plan.CarrierName {
		g.carriers[form.Get("vmid")] = true
	}
	carrierRead := false
	wait := false
	kill, drop := false, false
	if m != nil && m[1] == "pve2" {
		switch {
		case r.Method == http.MethodGet && m[3] == "/config" && g.carriers[m[2]]:
			carrierRead = true
		case r.Method == http.MethodPut && m[3] == "/config" && form.Get("protection") == "0" && !g.gated:
			g.gated, wait = true, true
			g.atQueue()
		case r.Method == http.MethodPut && m[3] == "/config" && len(adoptLines.FindAllString(form.Get("description"), -1)) >= 2 && !g.shared:
			g.shared = true
			kill = g.kill == "after-intent"
		case r.Method == http.MethodPost && m[3] == "/move_volume" && g.carriers[m[2]] && g.shared:
			g.moves++
			kill = g.kill == "during-first-move" && g.moves == 1
			kill, drop = kill || g.kill == "before-second-move" && g.moves == 2, g.kill == "before-second-move"
		case r.Method == http.MethodPut && m[3] == "/config" && g.shared && hasMountRecord(form):
			kill, drop = g.kill == "before-record" || g.kill == "after-record", g.kill == "before-record"
		}
	}
	if kill {
		g.dead = true
	}
	g.mu.Unlock()
	if wait {
		g.hold()
	}
	if kill {
		if !drop {
			if resp, err := g.base.RoundTrip(r); err == nil {
				resp.Body.Close()
			}
		}
		g.cancel()
		return nil, errKilled
	}
	resp, err := g.base.RoundTrip(r)
	if carrierRead && err == nil {
		// Counted once answered: the hand-over queues right after it.
		g.mu.Lock()
		g.reads[m[2]]++
		g.atQueue()
		g.mu.Unlock()
	}
	return resp, err
}

// hold waits until every carrier is at the keeper's queue, or the guard.
func (g *windowGate) hold() {
	select {
	case <-g.ready:
	case <-time.After(time.Until(g.until)):
		g.mu.Lock()
		g.timedOut = true
		g.mu.Unlock()
	}
}

// gateUntil is when the gate stops holding the first window: two minutes
// on, or a minute before the test's deadline (-timeout) if that is
// sooner; far more than the carriers' creates and migrations take at
// time scale 0. A run that reaches it fails (windowGate).
func gateUntil(t *testing.T) time.Time {
	until := time.Now().Add(2 * time.Minute)
	if dl, ok := t.Deadline(); ok && dl.Add(-time.Minute).Before(until) {
		return dl.Add(-time.Minute)
	}
	return until
}

func hasMountRecord(form url.Values) bool {
	for k, v := range form {
		if strings.HasPrefix(k, "mp") && strings.Contains(v[0], "mp=/corral/") {
			return true
		}
	}
	return false
}

func TestMoveCrashInSharedKeeperWindow(t *testing.T) {
	t.Parallel()
	// Without CORRAL_TEST_FULL each window is killed once, finished or
	// rolled back by the day's seed (testenv.SampleOf); CI runs both.
	t.Logf("windows: both ends with %s=1, else one (%s=%d)", testenv.FullVar, testenv.SweepSeedVar, testenv.Seed())
	for i, kill := range []string{"after-intent", "during-first-move", "before-second-move", "before-record", "after-record"} {
		for j, then := range []string{"pve2", "pve1"} {
			if !testenv.SampleOf(t, i+j, 2) {
				continue
			}
			name := kill + "/finish"
			if then == "pve1" {
				name = kill + "/back"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := startMoveRig(t, t.TempDir())
				r.plan = windowPlan
				if _, err := r.run("pve1", 0); err != nil {
					t.Fatalf("first apply: %v", err)
				}
				r.mark("pve1")
				g := &windowGate{base: r.srv.HTTPClient().Transport, kill: kill, carriers: map[string]bool{}, reads: map[string]int{}, ready: make(chan struct{}), until: gateUntil(t)}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				g.cancel = cancel
				c := pvetest.Client(t, r.srv, r.srv.Credentials().OperatorToken, pvetest.Transport(g), fastRetry)
				obs, err := apply.Observe(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				p, err := plan.Make(windowPlan(t, "pve2"), obs)
				if err != nil {
					t.Fatal(err)
				}
				err = (&apply.Executor{Client: c}).Apply(ctx, p, obs)
				g.mu.Lock()
				timedOut, seen := g.timedOut, fmt.Sprintf("carriers %v, hand-over reads %v", g.carriers, g.reads)
				g.mu.Unlock()
				if timedOut {
					t.Fatalf("the gate held the first window until its guard: the carriers never all reached the keeper's queue (%s): %v", seen, err)
				}
				if !g.shared || !g.dead {
					t.Fatalf("no shared window was killed (shared %v, killed %v, carriers %v): %v", g.shared, g.dead, g.carriers, err)
				}
				r.settle(then)
				r.convergedApps(then, windowApps)
			})
		}
	}
}

// convergedApps checks the end state of apps (one retained volume each)
// on node: settled, each running there with its volume recorded once,
// attached once, with its data; keepers protected; no carrier, no
// stray volume.
func (r *moveRig) convergedApps(node string, apps []string) {
	t := r.t
	t.Helper()
	obs := r.observe()
	if len(obs.Carriers)+len(obs.LeftoverCarriers)+len(obs.BadCarriers) != 0 {
		t.Fatalf("carriers left: %+v %+v %+v", obs.Carriers, obs.LeftoverCarriers, obs.BadCarriers)
	}
	recs := r.records(obs, node)
	for _, app := range apps {
		cts := obs.Apps[app]
		if len(cts) != 1 || cts[0].Node != node || cts[0].Status != "running" {
			t.Fatalf("%s containers %+v, want one running on %s", app, cts, node)
		}
		if recs[plan.VolumeKey{App: app, Name: "data"}] == "" {
			t.Fatalf("%s/data is not recorded on %s: %v", app, node, recs)
		}
	}
	if len(recs) != len(apps) {
		t.Fatalf("records on %s: %v, want one per app", node, recs)
	}
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			if !k.Protected {
				t.Fatalf("keeper %d on %s is not protected", k.VMID, k.Node)
			}
			if len(k.Intents) > 0 {
				t.Fatalf("keeper %d still notes adoptions %v", k.VMID, k.Intents)
			}
		}
	}
	r.checkVolumes(obs, node, recs)
}
