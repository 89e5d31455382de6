package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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
)

// The concurrency soak (issue 11): in rounds, eight or more real corral
// processes at once apply, destroy, restore --replace, prune and change
// manifests of several projects whose apps share one node's keeper, one
// of them adopting a stranger's volume, with SIGKILLs at random moments
// and the emulator's faults on. After each round the faults stop, one
// converging apply per project runs, and an invariant checker reads the
// cluster through the API. Any violation fails the test.
//
// The short run is part of go test; the full one:
//
//	go test ./cmd/corral -run TestSoak -soak.rounds 200 -timeout 3h -v
var (
	soakRounds = flag.Int("soak.rounds", 2, "rounds of the concurrency soak")
	soakProcs  = flag.Int("soak.procs", 8, "corral processes at once per round")
	soakSeed   = flag.Uint64("soak.seed", 1, "seed of the soak's choices")
)

// soakApps are the projects: a directory each, apps sharing node pve.
var soakApps = map[string][]string{"alpha": {"a1", "a2"}, "beta": {"b1"}, "gamma": {"c1"}}

func soakManifest(project string, memory int) string {
	var b strings.Builder
	b.WriteString("apps:\n")
	for _, app := range soakApps[project] {
		fmt.Fprintf(&b, "  - name: %s\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    memory: %d\n    rootfs:\n      size: 1G\n    volumes:\n      - name: data\n        size: 1G\n        mount: /srv/data\n", app, memory)
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
	archive string // a backup of a1, for restore --replace
	rng     *rand.Rand
	ops     map[string]int
	kills   int
	mu      sync.Mutex
	results []soakResult // of the current round
	// placeholders counts create placeholders (lock: create, no tags) that
	// a killed corral or an injected fault left without a task to finish
	// them; corral refuses to guess whose they are, and only root can
	// remove them, so the soak does what it tells the operator to.
	placeholders int
}

// soakResult is how one process of a round ended.
type soakResult struct {
	project, kind string
	ok, killed    bool
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: real processes")
	}
	// The soak is about API calls, volumes and SIGKILLs: its emulator's
	// CTs run in the fallback view, without an LXC boot per start (the
	// LXC runtime is tested in internal/sim/guest and internal/cli).
	if os.Getenv("CORRAL_SIM_RUNTIME") == "" {
		t.Setenv("CORRAL_SIM_RUNTIME", "view")
		t.Setenv("CORRAL_SIM_UNISOLATED", "1") // the view's explicit opt-in
	}
	scale := 0.0
	srv, err := sim.New(sim.Options{Dir: t.TempDir(), Listener: sim.ListenTLS, Listen: "127.0.0.1:0", TimeScale: &scale})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cr := srv.Credentials()
	r := &soakRig{t: t, srv: srv, dir: t.TempDir(), ops: map[string]int{}, rng: rand.New(rand.NewPCG(*soakSeed, 7)),
		env: []string{"PROXMOX_VE_ENDPOINT=" + srv.URL(), "PROXMOX_VE_API_TOKEN=" + cr.OperatorToken, "PROXMOX_VE_FINGERPRINT=" + srv.Fingerprint()}}
	if r.root, err = pve.New(pve.Config{Endpoint: srv.URL(), Token: cr.RootToken, HTTPClient: srv.HTTPClient()}); err != nil {
		t.Fatal(err)
	}
	// A stranger's container whose volume project gamma adopts.
	c := srv.Cluster()
	upid, err := c.CreateCT(model.Auth{UserID: "root@pam"}, "pve", map[string]string{
		"vmid": "150", "ostemplate": "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "hostname": "legacy",
		"rootfs": "local-lvm:1", "mp0": "local-lvm:1,mp=/legacy",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTask(context.Background(), "pve", upid); err != nil {
		t.Fatal(err)
	}
	for p := range soakApps {
		r.write(p, 256)
		r.must("apply", "-f", r.manifest(p), "--auto-approve")
	}
	r.markVolumes()
	r.archive = r.backup("a1")

	violations := 0
	start := time.Now()
	for round := 1; round <= *soakRounds; round++ {
		srv.SetFaults(sim.FaultSpec{Seed: uint64(round), Latency: time.Millisecond, Read5xx: 0.02, Write5xx: 0.01, Drop: 0.005, TaskFail: 0.02})
		r.round()
		srv.SetFaults(sim.FaultSpec{})
		r.cleanPlaceholders()
		for _, v := range r.checkReported() {
			violations++
			t.Errorf("round %d: %s", round, v)
		}
		r.converge()
		for _, v := range r.check() {
			violations++
			t.Errorf("round %d: %s", round, v)
		}
		if violations > 0 {
			t.Logf("round %d processes: %+v", round, r.results)
		}
		if testing.Verbose() && round%10 == 0 {
			t.Logf("round %d: %d SIGKILLs and %d placeholders so far, %s", round, r.kills, r.placeholders, time.Since(start).Round(time.Second))
		}
		if violations > 0 {
			break
		}
		r.markVolumes()
	}
	ops := make([]string, 0, len(r.ops))
	total := 0
	for k, n := range r.ops {
		ops = append(ops, fmt.Sprintf("%s %d", k, n))
		total += n
	}
	sort.Strings(ops)
	t.Logf("soak: %d rounds, %d processes each, %d operations (%s), %d SIGKILLs, %d create placeholders removed as root, %d violations, %s",
		*soakRounds, *soakProcs, total, strings.Join(ops, ", "), r.kills, r.placeholders, violations, time.Since(start).Round(time.Second))
}

func (r *soakRig) manifest(project string) string {
	return filepath.Join(r.dir, project, "corral.yaml")
}

func (r *soakRig) write(project string, memory int) {
	os.MkdirAll(filepath.Join(r.dir, project), 0o755)
	if err := os.WriteFile(r.manifest(project), []byte(soakManifest(project, memory)), 0o644); err != nil {
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

func (r *soakRig) backup(app string) string {
	out := r.must("backup", app, "-f", r.manifest("alpha"), "-o", "json")
	_, rest, _ := strings.Cut(out, `"archive": "`)
	archive, _, _ := strings.Cut(rest, `"`)
	if archive == "" {
		r.t.Fatalf("no archive in: %s", out)
	}
	return archive
}

// round runs the processes of one round at once, killing some.
func (r *soakRig) round() {
	r.results = nil
	projects := []string{"alpha", "beta", "gamma"}
	var wg sync.WaitGroup
	for i := 0; i < *soakProcs; i++ {
		p := projects[r.rng.IntN(len(projects))]
		var args []string
		kind := ""
		switch n := r.rng.IntN(10); {
		case n < 4:
			kind = "apply"
			if r.rng.IntN(2) == 0 {
				kind = "apply (changed manifest)"
				r.write(p, 256+64*r.rng.IntN(4))
			}
			args = []string{"apply", "-f", r.manifest(p), "--auto-approve"}
		case n < 6:
			kind = "destroy"
			args = []string{"destroy", "-f", r.manifest(p), "--auto-approve"}
		case n < 8:
			kind, p = "restore --replace", "alpha"
			args = []string{"restore", "a1", "--archive", r.archive, "--replace", "-f", r.manifest("alpha"), "--auto-approve"}
		default:
			kind = "volumes prune"
			args = []string{"volumes", "prune", "-f", r.manifest(p), "--auto-approve"}
		}
		kill := r.rng.IntN(3) == 0
		delay := time.Duration(r.rng.IntN(600)) * time.Millisecond
		r.ops[kind]++
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := r.command(append(args, "--lock-timeout", "2m")...)
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
			r.results = append(r.results, soakResult{project: p, kind: kind, ok: err == nil && !killed, killed: killed})
			r.mu.Unlock()
		}()
	}
	wg.Wait()
}

// converge runs what a user runs after trouble: apply of every project
// (twice at most: a first run may finish an interrupted restore).
func (r *soakRig) converge() {
	for p := range soakApps {
		var out []byte
		var err error
		for try := 0; try < 3; try++ {
			if out, err = r.command("apply", "-f", r.manifest(p), "--auto-approve").CombinedOutput(); err == nil {
				break
			}
		}
		if err != nil {
			r.t.Fatalf("converging apply of %s: %v\n%s", p, err, out)
		}
		if out, err := r.command("plan", "-f", r.manifest(p)).CombinedOutput(); err != nil {
			r.t.Errorf("plan of %s after the converging apply: %v\n%s", p, err, out)
		}
	}
}

// markVolumes writes each recorded volume's key into it.
func (r *soakRig) markVolumes() {
	obs := r.observe()
	for _, vi := range plan.Inventory(obs) {
		if err := os.WriteFile(r.marker(vi.VolID), []byte(vi.App+"/"+vi.Name), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *soakRig) marker(volid string) string {
	dir, err := r.srv.Cluster().VolumePath("pve", volid)
	if err != nil {
		r.t.Fatalf("volume %s: %v", volid, err)
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

// check reads the cluster through the API and returns every violated
// invariant.
func (r *soakRig) check() []string {
	ctx := context.Background()
	obs := r.observe()
	refs, err := apply.NodeReferences(ctx, r.root, "pve")
	if err != nil {
		r.t.Fatal(err)
	}
	var bad []string
	keeperOf := map[int]bool{}
	for _, k := range obs.Keepers["pve"] {
		keeperOf[k.VMID] = true
		if !k.Protected {
			bad = append(bad, fmt.Sprintf("keeper %d is unprotected", k.VMID))
		}
		// A lease a killed corral left is no violation: the next corral
		// takes it over at once (its holder is gone), or it lapses.
		if len(k.Lost) > 0 {
			bad = append(bad, fmt.Sprintf("keeper %d has records without their mount point: %v", k.VMID, k.Lost))
		}
	}
	seen := map[string]string{}
	for _, k := range obs.Keepers["pve"] {
		for vk, volid := range k.Records {
			if other, dup := seen[volid]; dup {
				bad = append(bad, fmt.Sprintf("volume %s recorded twice: %s and %s", volid, other, vk))
			}
			seen[volid] = vk.String()
			if _, ok := obs.Volumes["pve/"+volid]; !ok {
				bad = append(bad, fmt.Sprintf("volume %s (%s) is recorded but does not exist", volid, vk))
				continue
			}
			var holders []apply.Reference
			for _, ref := range refs[volid] {
				if !keeperOf[ref.VMID] {
					holders = append(holders, ref)
				}
			}
			if len(holders) > 1 {
				bad = append(bad, fmt.Sprintf("volume %s (%s) is referenced by %d guests: %v", volid, vk, len(holders), holders))
			}
			for _, h := range holders {
				if h.Key != "" && !strings.HasPrefix(h.Key, "mp") {
					bad = append(bad, fmt.Sprintf("volume %s (%s) is referenced by ct %d as %s", volid, vk, h.VMID, h.Key))
				}
				if cts := obs.Apps[vk.App]; len(cts) != 1 || cts[0].VMID != h.VMID {
					bad = append(bad, fmt.Sprintf("volume %s (%s) is mounted by ct %d, which is not app %s's container", volid, vk, h.VMID, vk.App))
				}
			}
			if strings.Contains(vk.Name, "-replaced-") || strings.Contains(vk.Name, "-restored-") {
				continue
			}
			if b, err := os.ReadFile(r.marker(volid)); err != nil || string(b) != vk.String() {
				bad = append(bad, fmt.Sprintf("volume %s (%s) lost its data: marker %q (%v)", volid, vk, b, err))
			}
		}
	}
	// Every app has one container that mounts exactly its declared volumes.
	for _, apps := range soakApps {
		for _, app := range apps {
			cts := obs.Apps[app]
			if len(cts) != 1 {
				bad = append(bad, fmt.Sprintf("app %s has %d containers after the converging apply", app, len(cts)))
				continue
			}
			for _, name := range []string{"data", "legacy"} {
				if name == "legacy" && app != "c1" {
					continue
				}
				volid := obs.Holder("pve", plan.VolumeKey{App: app, Name: name})
				if volid == nil {
					bad = append(bad, fmt.Sprintf("app %s has no record of volume %s", app, name))
					continue
				}
				want := volid.Records[plan.VolumeKey{App: app, Name: name}]
				mounted := false
				for _, ref := range refs[want] {
					mounted = mounted || ref.VMID == cts[0].VMID
				}
				if !mounted {
					bad = append(bad, fmt.Sprintf("app %s's container %d does not mount its volume %s (%s)", app, cts[0].VMID, name, want))
				}
			}
		}
	}
	if len(obs.Restores) > 0 {
		bad = append(bad, fmt.Sprintf("interrupted restores left after the converging apply: %v", obs.Restores))
	}
	return bad
}

// checkReported: a process that said it succeeded made a change that is
// in the cluster. Judged where nothing else of the round could undo it: an
// apply that exited 0 in a project no destroy or prune of the round
// touched leaves every app of the project with one running container that
// mounts its volumes.
func (r *soakRig) checkReported() []string {
	applied, undone := map[string]bool{}, map[string]bool{}
	for _, res := range r.results {
		switch {
		case strings.HasPrefix(res.kind, "apply") && res.ok:
			applied[res.project] = true
		case res.kind == "destroy", res.kind == "volumes prune", res.kind == "restore --replace":
			undone[res.project] = true
		}
	}
	obs := r.observe()
	var bad []string
	for p := range applied {
		if undone[p] {
			continue
		}
		for _, app := range soakApps[p] {
			cts := obs.Apps[app]
			if len(cts) != 1 || cts[0].Status != "running" {
				bad = append(bad, fmt.Sprintf("an apply of %s exited 0, but app %s has %d containers (%v)", p, app, len(cts), cts))
				continue
			}
			k := obs.Holder("pve", plan.VolumeKey{App: app, Name: "data"})
			if k == nil {
				bad = append(bad, fmt.Sprintf("an apply of %s exited 0, but app %s has no data volume recorded", p, app))
				continue
			}
			volid := k.Records[plan.VolumeKey{App: app, Name: "data"}]
			mounted := false
			for key, v := range cts[0].Config {
				mounted = mounted || (strings.HasPrefix(key, "mp") && plan.ParseMountPoint(v).Volume == volid)
			}
			if !mounted {
				bad = append(bad, fmt.Sprintf("an apply of %s exited 0, but app %s's container does not mount %s", p, app, volid))
			}
		}
	}
	return bad
}

// cleanPlaceholders removes, as root on the node would (pct unlock, pct
// destroy), the create placeholders no task is finishing any more.
func (r *soakRig) cleanPlaceholders() {
	ctx := context.Background()
	time.Sleep(200 * time.Millisecond) // a create still under way finishes at time scale 0
	res, err := r.root.ClusterResources(ctx, "vm")
	if err != nil {
		r.t.Fatal(err)
	}
	c := r.srv.Cluster()
	root := model.Auth{UserID: "root@pam"}
	for _, g := range res {
		if g.Type != "lxc" || g.Lock != "create" || g.Tags != "" {
			continue
		}
		if err := c.Unlock(g.VMID); err != nil {
			r.t.Fatalf("pct unlock %d: %v", g.VMID, err)
		}
		upid, err := c.DestroyCT(root, g.Node, g.VMID, map[string]string{"purge": "1"})
		if err != nil {
			r.t.Fatalf("pct destroy %d: %v", g.VMID, err)
		}
		if _, err := c.WaitTask(ctx, g.Node, upid); err != nil {
			r.t.Fatal(err)
		}
		r.placeholders++
	}
}
