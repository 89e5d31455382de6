package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/corralhq/corral/internal/testenv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/ui"
)

// The concurrency soak (issues 11 and 26): in rounds, eight or more real
// corral processes at once work on a two-node cluster: apply (with changed
// manifests, among them a pinned app's change of node), destroy, restore
// --replace from a backup storage both nodes read, volumes prune, move,
// drain, snapshot, rollback and snapshot deletion, over several projects
// whose apps share each node's keeper, one of them adopting a stranger's
// volume, while a reconciling corral agent keeps one project on its
// manifest. A third of the processes (and now and then the agent) get a
// SIGKILL at a random moment, and the emulator's faults are on (latency,
// 5xx answers, dropped connections, failed tasks). After each round the
// faults stop, the agent stops, and the soak edits a record of corral's the
// way a web-UI user would (tags, Notes lines, descriptions, protection,
// pending changes, a keeper's or carrier's kind tag); an edit corral
// must refuse is checked to be refused before anything changed on its
// node, then repaired as the refusal says. Then one converging apply per
// project runs, and an invariant checker reads the cluster through the
// API as root. Any violation fails the test.
//
// The short run is part of go test; the full one:
//
//	go test ./cmd/corral -run TestSoak -soak.rounds 200 -timeout 3h -v
var (
	soakRounds = flag.Int("soak.rounds", 2, "rounds of the concurrency soak")
	soakProcs  = flag.Int("soak.procs", 8, "corral processes at once per round")
	soakSeed   = flag.Uint64("soak.seed", 1, "seed of the soak's choices")
)

// soakApps are the projects: a directory each. alpha's apps go where
// placement puts them (and move and drain), beta's one app is pinned with
// node: (which the soak changes), gamma's is pinned to pve1, where the
// stranger whose volume it adopts lives, and the agent reconciles it.
var soakApps = map[string][]string{"alpha": {"a1", "a2"}, "beta": {"b1"}, "gamma": {"c1"}}

// soakProjects is soakApps' keys in a fixed order (the soak's choices must
// not depend on map order, or a seed would not repeat a run).
var soakProjects = []string{"alpha", "beta", "gamma"}

// soakNodes are the emulated cluster's nodes.
var soakNodes = []string{"pve1", "pve2"}

// soakManifest is project's manifest with memory for its apps and node for
// beta's pinned app.
func soakManifest(project string, memory int, node string) string {
	var b strings.Builder
	b.WriteString("apps:\n")
	for _, app := range soakApps[project] {
		fmt.Fprintf(&b, "  - name: %s\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    memory: %d\n", app, memory)
		switch app {
		case "b1":
			fmt.Fprintf(&b, "    node: %s\n", node)
		case "c1":
			b.WriteString("    node: pve1\n")
		}
		b.WriteString("    rootfs:\n      size: 1G\n    volumes:\n      - name: data\n        size: 1G\n        mount: /srv/data\n")
		if app == "c1" {
			b.WriteString("      - name: legacy\n        mount: /srv/legacy\n        adopt: local-lvm:vm-150-disk-1\n")
		}
	}
	return b.String()
}

type soakRig struct {
	t       *testing.T
	srv     *sim.Server
	env     []string
	dir     string
	root    *pve.Client
	archive string // a backup of a1 on the shared storage, for restore --replace
	rng     *rand.Rand
	ops     map[string]int
	edits   map[string]int
	kills   int
	mu      sync.Mutex
	results []soakResult // of the current round
	// memory and betaNode are what the manifests say now.
	memory   map[string]int
	betaNode string
	// snaps are the snapshot names the soak took, by app (some since
	// deleted, rolled away or gone with their container: a rollback or
	// delete of one is then refused, which is no violation).
	snaps map[string][]string
	nsnap int
	agent *soakAgent
	// placeholders counts create placeholders (lock: create, no tags) that
	// a killed corral or an injected fault left without a task to finish
	// them; corral refuses to guess whose they are, and only root can
	// remove them, so the soak does what it tells the operator to.
	placeholders int
	// refusals counts edits corral refused, as it must, until repaired.
	refusals int
}

// soakResult is how one process of a round ended.
type soakResult struct {
	project, kind string
	ok, killed    bool
	end           time.Time
	out           string
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: real processes")
	}
	// The soak is about API calls, volumes and SIGKILLs: its emulator's
	// CTs run in the fallback view, without an LXC boot per start (the
	// LXC runtime is tested in internal/sim/guest and internal/cli).
	t.Parallel()
	scale := 0.0
	srv, err := sim.New(sim.Options{Dir: rigDir(t), Listener: sim.ListenTLS, Listen: "127.0.0.1:0", TimeScale: &scale,
		Nodes: len(soakNodes), SharedStorage: []string{"nfs"}, ViewRuntime: viewRuntime()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cr := srv.Credentials()
	r := &soakRig{t: t, srv: srv, dir: t.TempDir(), ops: map[string]int{}, edits: map[string]int{}, rng: rand.New(rand.NewPCG(*soakSeed, 7)),
		memory: map[string]int{}, betaNode: "pve1", snaps: map[string][]string{},
		env: []string{"PROXMOX_VE_ENDPOINT=" + srv.URL(), "PROXMOX_VE_API_TOKEN=" + cr.OperatorToken, "PROXMOX_VE_FINGERPRINT=" + srv.Fingerprint(),
			"CORRAL_SIM_TIME_SCALE=" + strconv.FormatFloat(scale, 'g', -1, 64), "XDG_STATE_HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}}
	if r.root, err = pve.New(pve.Config{Endpoint: srv.URL(), Token: cr.RootToken, HTTPClient: srv.HTTPClient()}); err != nil {
		t.Fatal(err)
	}
	// A stranger's container whose volume project gamma adopts.
	c := srv.Cluster()
	upid, err := c.CreateCT(model.Auth{UserID: "root@pam"}, "pve1", map[string]string{
		"vmid": "150", "ostemplate": "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "hostname": "legacy",
		"rootfs": "local-lvm:1", "mp0": "local-lvm:1,mp=/legacy",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTask(context.Background(), "pve1", upid); err != nil {
		t.Fatal(err)
	}
	for _, p := range soakProjects {
		r.memory[p] = 256
		r.write(p)
		r.must("apply", "-f", r.manifest(p), "--auto-approve")
	}
	r.markVolumes()
	r.archive = r.backup("a1")
	r.agent = r.startAgent()
	t.Cleanup(func() { r.agent.stop() })

	violations := 0
	start := time.Now()
	for round := 1; round <= *soakRounds; round++ {
		srv.SetFaults(sim.FaultSpec{Seed: uint64(round), Latency: time.Millisecond, Read5xx: 0.02, Write5xx: 0.01, Drop: 0.005, TaskFail: 0.02})
		r.round()
		srv.SetFaults(sim.FaultSpec{})
		if r.agent.stop() {
			r.results = append(r.results, soakResult{project: "gamma", kind: "agent", killed: true, end: time.Now()})
		}
		r.cleanPlaceholders()
		bad := r.checkReported()
		bad = append(bad, r.edit()...)
		if len(bad) == 0 {
			bad = r.converge()
		}
		if len(bad) == 0 {
			bad = r.check()
		}
		for _, v := range bad {
			violations++
			t.Errorf("round %d: %s", round, v)
		}
		if violations > 0 {
			for _, res := range r.results {
				t.Logf("round %d process %s %s ok=%v killed=%v:\n%s", round, res.project, res.kind, res.ok, res.killed, res.out)
			}
			break
		}
		if testing.Verbose() && round%10 == 0 {
			t.Logf("round %d: %d SIGKILLs, %d placeholders, %d refused edits so far, %s", round, r.kills, r.placeholders, r.refusals, time.Since(start).Round(time.Second))
		}
		r.markVolumes()
		r.agent = r.startAgent()
	}
	t.Logf("soak: %d rounds, %d processes each, %s; web-UI edits %s (%d refused until repaired); %d SIGKILLs, %d create placeholders removed as root, %d violations, %s",
		*soakRounds, *soakProcs, tally(r.ops, "operations"), tally(r.edits, ""), r.refusals, r.kills, r.placeholders, violations, time.Since(start).Round(time.Second))
}

// tally is "N what (kind n, kind n, ...)" of counts, sorted by kind.
func tally(counts map[string]int, what string) string {
	kinds := make([]string, 0, len(counts))
	total := 0
	for k, n := range counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		total += n
	}
	sort.Strings(kinds)
	if what == "" {
		return fmt.Sprintf("%d (%s)", total, strings.Join(kinds, ", "))
	}
	return fmt.Sprintf("%d %s (%s)", total, what, strings.Join(kinds, ", "))
}

func (r *soakRig) manifest(project string) string {
	return filepath.Join(r.dir, project, "corral.yaml")
}

// write writes project's manifest as r says it is now, atomically (the
// agent reads it whenever it changes).
func (r *soakRig) write(project string) {
	dir := filepath.Join(r.dir, project)
	os.MkdirAll(dir, 0o755)
	tmp := filepath.Join(dir, ".corral.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(soakManifest(project, r.memory[project], r.betaNode)), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, r.manifest(project)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *soakRig) command(args ...string) *exec.Cmd {
	cmd := exec.Command(corralBin, args...)
	cmd.Env = append(os.Environ(), r.env...)
	return cmd
}

func (r *soakRig) must(args ...string) string {
	r.t.Helper()
	out, err := r.command(args...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("corral %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// backup backs app up to the shared storage, which both nodes read.
func (r *soakRig) backup(app string) string {
	out := r.must("backup", app, "-f", r.manifest("alpha"), "--storage", "nfs", "-o", "json")
	_, rest, _ := strings.Cut(out, `"archive": "`)
	archive, _, _ := strings.Cut(rest, `"`)
	if archive == "" {
		r.t.Fatalf("no archive in: %s", out)
	}
	return archive
}

// soakAgent is a reconciling corral agent on project gamma.
type soakAgent struct {
	cmd    *exec.Cmd
	done   chan struct{}
	killed bool
	mu     sync.Mutex
}

func (r *soakRig) startAgent() *soakAgent {
	cmd := r.command("agent", "-f", r.manifest("gamma"), "--mode", "reconcile", "--interval", "1s", "--listen", "127.0.0.1:0")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	a := &soakAgent{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	return a
}

// kill SIGKILLs the agent, as an OOM killer or a power cut would.
func (a *soakAgent) kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.done:
	default:
		if a.cmd.Process.Signal(syscall.SIGKILL) == nil {
			a.killed = true
		}
	}
}

// stop ends the agent as systemd would (SIGTERM: it finishes its step and
// releases the lock), SIGKILL after a minute; it reports whether the agent
// was killed during the round.
func (a *soakAgent) stop() bool {
	a.mu.Lock()
	select {
	case <-a.done:
	default:
		a.cmd.Process.Signal(syscall.SIGTERM)
	}
	a.mu.Unlock()
	select {
	case <-a.done:
	case <-time.After(time.Minute):
		a.kill()
		<-a.done
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.killed
}

// soakOp is one process of a round: its project, kind and arguments.
type soakOp struct {
	project, kind string
	args          []string
}

// pick chooses one process's operation.
func (r *soakRig) pick() soakOp {
	p := soakProjects[r.rng.IntN(len(soakProjects))]
	m := r.manifest(p)
	app := soakApps[p][r.rng.IntN(len(soakApps[p]))]
	node := soakNodes[r.rng.IntN(len(soakNodes))]
	switch n := r.rng.IntN(20); {
	case n < 5:
		return soakOp{p, "apply", []string{"apply", "-f", m, "--auto-approve"}}
	case n < 7:
		return soakOp{p, "destroy", []string{"destroy", "-f", m, "--auto-approve"}}
	case n < 9:
		return soakOp{"alpha", "restore --replace", []string{"restore", "a1", "--archive", r.archive, "--replace", "-f", r.manifest("alpha"), "--auto-approve"}}
	case n < 11:
		return soakOp{p, "volumes prune", []string{"volumes", "prune", "-f", m, "--auto-approve"}}
	case n < 13:
		args := []string{"move", soakApps["alpha"][r.rng.IntN(2)], "--to", node, "-f", r.manifest("alpha"), "--auto-approve"}
		if r.rng.IntN(2) == 0 {
			args = append(args, "--delete-snapshots")
		}
		return soakOp{"alpha", "move", args}
	case n < 14:
		args := []string{"drain", node, "-f", r.manifest("alpha"), "--auto-approve"}
		if r.rng.IntN(2) == 0 {
			args = append(args, "--delete-snapshots")
		}
		return soakOp{"alpha", "drain", args}
	case n < 16:
		r.nsnap++
		name := fmt.Sprintf("s%d", r.nsnap)
		r.snaps[app] = append(r.snaps[app], name)
		return soakOp{p, "snapshot", []string{"snapshot", app, name, "-f", m}}
	case n < 18 && len(r.snaps[app]) > 0:
		name := r.snaps[app][r.rng.IntN(len(r.snaps[app]))]
		return soakOp{p, "rollback", []string{"rollback", app, name, "-f", m, "--auto-approve"}}
	case n < 19 && len(r.snaps[app]) > 0:
		i := r.rng.IntN(len(r.snaps[app]))
		name := r.snaps[app][i]
		r.snaps[app] = append(r.snaps[app][:i:i], r.snaps[app][i+1:]...)
		return soakOp{p, "snapshot --delete", []string{"snapshot", app, name, "--delete", "-f", m}}
	default:
		return soakOp{p, "apply", []string{"apply", "-f", m, "--auto-approve"}}
	}
}

// round runs the processes of one round at once, killing some. The
// manifests change (or not) before any starts, so that every process of
// a round reads the same ones.
func (r *soakRig) round() {
	r.results = nil
	for _, p := range soakProjects {
		if r.rng.IntN(2) == 0 {
			r.memory[p] = 256 + 64*r.rng.IntN(4)
			if p == "beta" && r.rng.IntN(3) == 0 {
				r.betaNode = soakNodes[r.rng.IntN(len(soakNodes))]
			}
			r.write(p)
			r.ops["manifest changed"]++
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < *soakProcs; i++ {
		op := r.pick()
		kill := r.rng.IntN(3) == 0
		delay := time.Duration(r.rng.IntN(600)) * time.Millisecond
		r.ops[op.kind]++
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := op.args
			if op.kind != "snapshot" && op.kind != "snapshot --delete" {
				args = append(args, "--lock-timeout", "2m")
			}
			cmd := r.command(args...)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				r.t.Error(err)
				return
			}
			killed := false
			var timer *time.Timer
			if kill {
				timer = time.AfterFunc(delay, func() {
					if cmd.Process.Signal(syscall.SIGKILL) == nil {
						r.mu.Lock()
						r.kills++
						killed = true
						r.mu.Unlock()
					}
				})
			}
			err := cmd.Wait()
			if timer != nil {
				timer.Stop()
			}
			r.mu.Lock()
			r.results = append(r.results, soakResult{project: op.project, kind: op.kind, ok: err == nil && !killed, killed: killed, end: time.Now(), out: out.String()})
			r.mu.Unlock()
		}()
	}
	// Now and then the agent is killed in the middle of the round.
	if r.rng.IntN(5) == 0 {
		agent := r.agent
		timer := time.AfterFunc(time.Duration(r.rng.IntN(600))*time.Millisecond, func() {
			agent.kill()
			r.mu.Lock()
			r.kills++
			r.mu.Unlock()
		})
		defer timer.Stop()
	}
	wg.Wait()
}

// converge runs what a user runs after trouble: apply of every project
// (up to three times: apply exits 1 while anything is left, and a failed
// task or a finished interrupted operation can leave something), then
// plan, which must find nothing to do. It returns what went wrong.
func (r *soakRig) converge() []string {
	var bad []string
	for _, p := range soakProjects {
		var out []byte
		var err error
		for try := 0; try < 3; try++ {
			if out, err = r.command("apply", "-f", r.manifest(p), "--auto-approve").CombinedOutput(); err == nil {
				break
			}
			// beta's pinned app, destroyed on one node and pinned to the
			// other: the refusal's fix is two edits of node:, each applied.
			if m := pinFix.FindStringSubmatch(string(out)); m != nil && p == "beta" {
				r.betaNode = m[1]
				r.write(p)
				if out, err = r.command("apply", "-f", r.manifest(p), "--auto-approve").CombinedOutput(); err != nil {
					break
				}
				r.betaNode = m[2]
				r.write(p)
				r.refusals++
				r.edits["followed a refusal's fix (node: twice)"]++
			}
			// A change of node: of an app with snapshots: delete them, as
			// the refusal says, with corral.
			if m := snapFix.FindStringSubmatch(string(out)); m != nil {
				for _, name := range r.snapshotsOf(m[1]) {
					r.must("snapshot", m[1], name, "--delete", "-f", r.manifest(p))
				}
				r.refusals++
				r.edits["followed a refusal's fix (delete snapshots)"]++
			}
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("converging apply of %s (3 tries): %v\n%s", p, err, out))
			continue
		}
		if !saysComplete(string(out)) {
			bad = append(bad, fmt.Sprintf("converging apply of %s exited 0 without saying it is complete:\n%s", p, out))
		}
		if out, err := r.command("plan", "-f", r.manifest(p)).CombinedOutput(); err != nil {
			bad = append(bad, fmt.Sprintf("plan of %s after the converging apply: %v\n%s", p, err, out))
		}
	}
	return bad
}

// pinFix is the fix of the refusal of a pinned app whose data is on
// another node: set node: to that node and apply, then back.
var pinFix = regexp.MustCompile(`set node: (\S+) and apply \(the app is created there on its volume\), then set node: (\S+) again and apply`)

// snapFix is the refusal to move an app whose container has snapshots.
var snapFix = regexp.MustCompile(`app (\S+): container \d+ has snapshots \(the latest is \S+\).*delete them with corral snapshot`)

// snapshotsOf lists the snapshots of app's container, read as root.
func (r *soakRig) snapshotsOf(app string) []string {
	cts := r.observe().Apps[app]
	if len(cts) != 1 {
		return nil
	}
	snaps, err := r.root.Snapshots(context.Background(), cts[0].Node, cts[0].VMID)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, s := range snaps {
		if s.Name != "current" {
			out = append(out, s.Name)
		}
	}
	return out
}

// saysComplete: apply's output ends in one of the ways it says the
// cluster matches the manifest.
func saysComplete(out string) bool {
	for _, s := range []string{"Apply complete", "No changes. The cluster matches the manifest.", "nothing left to do"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// markVolumes writes each recorded volume's key into it.
func (r *soakRig) markVolumes() {
	obs := r.observe()
	for _, vi := range plan.Inventory(obs) {
		if err := os.WriteFile(r.marker(vi.Node, vi.VolID), []byte(vi.App+"/"+vi.Name), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *soakRig) marker(node, volid string) string {
	dir, err := r.srv.Cluster().VolumePath(node, volid)
	if err != nil {
		r.t.Fatalf("volume %s on %s: %v", volid, node, err)
	}
	return filepath.Join(dir, ".soak-marker")
}

func (r *soakRig) observe() *plan.Observed {
	obs, err := apply.Observe(context.Background(), r.root)
	if err != nil {
		r.t.Fatal(err)
	}
	return obs
}

// references reads every guest config of every node (as root, through the
// API), by volid.
func (r *soakRig) references() map[string][]apply.Reference {
	all := map[string][]apply.Reference{}
	for _, node := range soakNodes {
		refs, err := apply.NodeReferences(context.Background(), r.root, node)
		if err != nil {
			r.t.Fatal(err)
		}
		for volid, rs := range refs {
			for _, ref := range rs {
				ref.Node = node
				all[volid] = append(all[volid], ref)
			}
		}
	}
	return all
}

// check reads the cluster through the API and returns every violated
// invariant.
func (r *soakRig) check() []string {
	obs := r.observe()
	refs := r.references()
	var bad []string
	keeperOf := map[int]bool{}
	for _, node := range soakNodes {
		if n := len(obs.Keepers[node]); n > 1 {
			bad = append(bad, fmt.Sprintf("node %s has %d keepers (a second one is only for more than %d volumes)", node, n, plan.MaxKeeperVolumes))
		}
		for _, k := range obs.Keepers[node] {
			keeperOf[k.VMID] = true
			// An empty keeper is no keeper data can be lost through: no
			// plan repairs one on a node no manifest uses.
			if !k.Protected && len(k.Records) > 0 {
				bad = append(bad, fmt.Sprintf("keeper %d on %s is unprotected", k.VMID, node))
			}
			// A lease a killed corral left is no violation: the next corral
			// takes it over at once (its holder is gone), or it lapses.
			if len(k.Lost) > 0 {
				bad = append(bad, fmt.Sprintf("keeper %d on %s has records without their mount point: %v", k.VMID, node, k.Lost))
			}
		}
	}
	for _, d := range obs.Damaged {
		bad = append(bad, fmt.Sprintf("a damaged keeper or carrier is left after the converging apply: %+v", d))
	}
	if len(obs.Carriers) > 0 || len(obs.LeftoverCarriers) > 0 || len(obs.BadCarriers) > 0 {
		bad = append(bad, fmt.Sprintf("moves left after the converging apply: %v %v %v", obs.Carriers, obs.LeftoverCarriers, obs.BadCarriers))
	}
	if len(obs.Restores) > 0 {
		bad = append(bad, fmt.Sprintf("interrupted restores left after the converging apply: %v", obs.Restores))
	}
	// Every recorded volume exists, is recorded once, is referenced by at
	// most its app's container and still holds its data; every app volume
	// is reachable from exactly one record, on its container's node.
	seen := map[string]string{}
	recordedOn := map[plan.VolumeKey][]string{}
	for _, node := range soakNodes {
		for _, k := range obs.Keepers[node] {
			for vk, volid := range k.Records {
				recordedOn[vk] = append(recordedOn[vk], node+"/"+volid)
				if other, dup := seen[node+"/"+volid]; dup {
					bad = append(bad, fmt.Sprintf("volume %s on %s recorded twice: %s and %s", volid, node, other, vk))
				}
				seen[node+"/"+volid] = vk.String()
				if _, ok := obs.Volumes[node+"/"+volid]; !ok {
					bad = append(bad, fmt.Sprintf("volume %s (%s) on %s is recorded but does not exist", volid, vk, node))
					continue
				}
				var holders []apply.Reference
				for _, ref := range refs[volid] {
					if ref.Node == node && !keeperOf[ref.VMID] {
						holders = append(holders, ref)
					}
				}
				if len(holders) > 1 {
					bad = append(bad, fmt.Sprintf("volume %s (%s) on %s is referenced by %d guests: %v", volid, vk, node, len(holders), holders))
				}
				for _, h := range holders {
					if h.Key != "" && !strings.HasPrefix(h.Key, "mp") {
						bad = append(bad, fmt.Sprintf("volume %s (%s) on %s is referenced by ct %d as %s", volid, vk, node, h.VMID, h.Key))
					}
					if cts := obs.Apps[vk.App]; len(cts) != 1 || cts[0].VMID != h.VMID {
						bad = append(bad, fmt.Sprintf("volume %s (%s) on %s is mounted by ct %d, which is not app %s's container", volid, vk, node, h.VMID, vk.App))
					}
				}
				if strings.Contains(vk.Name, "-replaced-") || strings.Contains(vk.Name, "-restored-") {
					continue
				}
				if b, err := os.ReadFile(r.marker(node, volid)); err != nil || string(b) != vk.String() {
					bad = append(bad, fmt.Sprintf("volume %s (%s) on %s lost its data: marker %q (%v)", volid, vk, node, b, err))
				}
			}
		}
	}
	for vk, where := range recordedOn {
		if len(where) > 1 {
			bad = append(bad, fmt.Sprintf("app %s's volume %s is recorded %d times: %v", vk.App, vk.Name, len(where), where))
		}
	}
	// Every app has one container, on the node its manifest pins, that
	// mounts exactly its declared volumes, as recorded on its node.
	for _, p := range soakProjects {
		for _, app := range soakApps[p] {
			cts := obs.Apps[app]
			if len(cts) != 1 {
				bad = append(bad, fmt.Sprintf("app %s has %d containers after the converging apply", app, len(cts)))
				continue
			}
			ct := cts[0]
			if want := map[string]string{"b1": r.betaNode, "c1": "pve1"}[app]; want != "" && ct.Node != want {
				bad = append(bad, fmt.Sprintf("app %s runs on %s, its manifest says node: %s", app, ct.Node, want))
			}
			bad = append(bad, mountsRecorded(obs, ct, app, soakVolumes(app))...)
		}
	}
	return bad
}

// soakVolumes are the volumes app's manifest declares.
func soakVolumes(app string) []string {
	if app == "c1" {
		return []string{"data", "legacy"}
	}
	return []string{"data"}
}

// mountsRecorded checks that ct mounts each of app's volumes as its node's
// keeper records it, and no other corral volume.
func mountsRecorded(obs *plan.Observed, ct *plan.CT, app string, volumes []string) []string {
	var bad []string
	mounted := map[string]bool{}
	for key, v := range ct.Config {
		if strings.HasPrefix(key, "mp") {
			mounted[plan.ParseMountPoint(v).Volume] = true
		}
	}
	recorded := map[string]bool{}
	for _, name := range volumes {
		k := obs.Holder(ct.Node, plan.VolumeKey{App: app, Name: name})
		if k == nil {
			bad = append(bad, fmt.Sprintf("app %s has no record of volume %s on its node %s", app, name, ct.Node))
			continue
		}
		volid := k.Records[plan.VolumeKey{App: app, Name: name}]
		recorded[volid] = true
		if !mounted[volid] {
			bad = append(bad, fmt.Sprintf("app %s's container %d on %s does not mount its volume %s (%s)", app, ct.VMID, ct.Node, name, volid))
		}
	}
	for volid := range mounted {
		if !recorded[volid] {
			bad = append(bad, fmt.Sprintf("app %s's container %d on %s mounts %s, which is not one of its recorded volumes", app, ct.VMID, ct.Node, volid))
		}
	}
	return bad
}

// checkReported: an apply that said "Apply complete" made the cluster
// match its manifest. Judged where nothing after it could undo that: in a
// project whose last process of the round to end was an apply that exited
// 0 (and whose agent, for gamma, was not killed), every app has one
// running container that mounts exactly its recorded volumes, read as
// root through the API, and corral's own plan (faults off) is empty.
func (r *soakRig) checkReported() []string {
	last := map[string]soakResult{}
	agentKilled := false
	for _, res := range r.results {
		if res.kind == "agent" {
			agentKilled = true
			continue
		}
		if l, ok := last[res.project]; !ok || res.end.After(l.end) {
			last[res.project] = res
		}
	}
	obs := r.observe()
	var bad []string
	for _, p := range soakProjects {
		res, ok := last[p]
		if !ok || res.kind != "apply" || !res.ok || (p == "gamma" && agentKilled) {
			continue
		}
		if !saysComplete(res.out) {
			bad = append(bad, fmt.Sprintf("an apply of %s exited 0 without saying it is complete:\n%s", p, res.out))
		}
		for _, app := range soakApps[p] {
			cts := obs.Apps[app]
			if len(cts) != 1 || cts[0].Status != "running" {
				bad = append(bad, fmt.Sprintf("an apply of %s said Apply complete, but app %s has %d containers (%v)", p, app, len(cts), cts))
				continue
			}
			for _, v := range mountsRecorded(obs, cts[0], app, soakVolumes(app)) {
				bad = append(bad, "an apply of "+p+" said Apply complete, but "+v)
			}
		}
		if left := r.planLeft(p); left != "" {
			bad = append(bad, fmt.Sprintf("an apply of %s said Apply complete, and nothing of the project ran after it, but plan finds: %s", p, left))
		}
	}
	return bad
}

// planLeft is what corral's plan of project p (faults off) still finds to
// do for p's own apps: a change, a refusal, an app it could not check or
// an interrupted operation of p's; "" when nothing. (Keeper repairs and
// other projects' interrupted operations, which any project's plan shows,
// may come from processes of other projects that ended later.)
func (r *soakRig) planLeft(p string) string {
	out, err := r.command("plan", "-f", r.manifest(p), "-o", "json").Output()
	var pj ui.PlanJSON
	if jerr := json.Unmarshal(out, &pj); jerr != nil {
		return fmt.Sprintf("plan -o json: %v (%v)\n%s", jerr, err, out)
	}
	var left []string
	for _, c := range pj.Changes {
		if c.Action != "no-op" {
			left = append(left, fmt.Sprintf("app %s: %s %v", c.App, c.Action, c.Reasons))
		}
	}
	left = append(left, pj.Refused...)
	for _, u := range pj.Unchecked {
		left = append(left, "not checked: "+u.App+": "+u.Why)
	}
	for _, rec := range pj.Recover {
		for _, app := range soakApps[p] {
			if strings.Contains(rec, " app "+app+" ") {
				left = append(left, rec)
			}
		}
	}
	return strings.Join(left, "; ")
}

// cleanPlaceholders removes, as root on the node would (pct unlock, pct
// destroy), the create placeholders no task is finishing any more:
// through the API, the emulator's admin unlock and root's DELETE.
func (r *soakRig) cleanPlaceholders() {
	ctx := context.Background()
	// A create still under way (its corral was killed, its task runs on)
	// is not a placeholder to remove: wait for every create task to end,
	// which at time scale 0 takes moments, however loaded the machine.
	testenv.WaitFor(r.t, "the creates under way to finish", func() bool {
		for _, tk := range r.srv.Cluster().Tasks("") {
			if tk.Type == "vzcreate" && tk.Status == "running" {
				return false
			}
		}
		return true
	})
	res, err := r.root.ClusterResources(ctx, "vm")
	if err != nil {
		r.t.Fatal(err)
	}
	for _, g := range res {
		if g.Type != "lxc" || g.Lock != "create" || g.Tags != "" {
			continue
		}
		r.adminUnlock(g.VMID)
		var upid string
		if err := r.root.Delete(ctx, fmt.Sprintf("/nodes/%s/lxc/%d", g.Node, g.VMID), url.Values{"purge": {"1"}}, &upid); err != nil {
			r.t.Fatalf("pct destroy %d: %v", g.VMID, err)
		}
		if _, err := r.root.WaitTask(ctx, upid, pve.WaitOptions{}); err != nil {
			r.t.Fatalf("pct destroy %d: %v", g.VMID, err)
		}
		r.placeholders++
	}
}

// adminUnlock is pct unlock VMID, through the emulator's admin API.
func (r *soakRig) adminUnlock(vmid int) {
	req, err := http.NewRequest(http.MethodPost, r.srv.URL()+"/_corral/unlock", strings.NewReader(fmt.Sprintf(`{"vmid":%d}`, vmid)))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "PVEAPIToken="+r.srv.Credentials().RootToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.srv.HTTPClient().Do(req)
	if err != nil {
		r.t.Fatalf("pct unlock %d: %v", vmid, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("pct unlock %d: %s %s", vmid, resp.Status, body)
	}
}
