package apply_test

import (
	"bytes"
	"context"
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

// windowGate sends a run's requests to PVE and makes the first keeper
// window on pve2 wait until every carrier has reached pve2 and been read
// there by handOver, so that the next window takes two moves at once. Its
// kill picks a request of that shared window (see the modes below).
type windowGate struct {
	base   http.RoundTripper
	kill   string
	cancel context.CancelFunc

	mu       sync.Mutex
	carriers map[string]bool // VMIDs of the carriers created
	reads    map[string]int  // GETs of their config on pve2
	ready    chan struct{}
	until    time.Time // the gate's hang guard: shortly before the test's deadline
	gated    bool
	shared   bool // a window's intent write named two or more volumes
	moves    int  // move_volume into the target keeper since then
	dead     bool
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
	wait := false
	kill, drop := false, false
	if m != nil && m[1] == "pve2" {
		switch {
		case r.Method == http.MethodGet && m[3] == "/config" && g.carriers[m[2]]:
			g.reads[m[2]]++
			if !g.gated {
				break
			}
			n := 0
			for id := range g.carriers {
				if g.reads[id] >= 2 {
					n++
				}
			}
			if n == len(windowApps) {
				select {
				case <-g.ready:
				default:
					close(g.ready)
				}
			}
		case r.Method == http.MethodPut && m[3] == "/config" && form.Get("protection") == "0" && !g.gated:
			g.gated, wait = true, true
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
		select {
		case <-g.ready:
		case <-time.After(time.Until(g.until)): // a hang guard: the test then fails below, the window not shared
		}
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
	return g.base.RoundTrip(r)
}

// gateUntil is when the gate stops waiting for the carriers: two minutes
// on, or a minute before the test's deadline (-timeout) if that is
// sooner. Some runs never reach the gate's count of carrier reads (seen
// at 1edcd71: two of ten subtests held until the guard, then passed
// with the window shared), and a guard at the deadline alone held such a
// subtest for 29 minutes of CI's 30; two minutes is far more than the
// carriers' creates and migrations take at time scale 0.
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
