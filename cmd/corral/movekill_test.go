package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/testenv"
)

// moveKillManifest is one unpinned app with a retained volume.
const moveKillManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 1G
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
`

// TestMoveKilledThenApply is issue 26's scenario "a move killed while its
// carrier is being created: the next apply exits 0 with Apply complete
// while the app runs on the new node with its volumes unattached", with a
// real SIGKILL of the corral binary (TestApplyAfterMoveStoppedAtTheCarrier
// stops the move with an injected fault instead). corral move web --to
// pve2 runs as a subprocess on a two-node emulator whose task durations
// are real ones scaled down; the test watches the cluster as root and
// kills the process at a moment of the move: while the carrier's create
// task runs on the source node, while a volume is handed to the carrier
// (move_volume on the source node), while the carrier migrates. Then
// corral apply must converge (one running container of web, on either
// node, mounting exactly its recorded volume, its data intact, no
// carrier left, a fresh plan empty) and say "Apply complete", or refuse
// (non-zero, naming a CT and what to do), never "Apply complete" with
// the volume unattached.
func TestMoveKilledThenApply(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: real processes and task durations")
	}
	t.Parallel()
	// Without CORRAL_TEST_FULL one moment a day (testenv.SampleOf); CI
	// kills at all three.
	t.Logf("moments: all with %s=1, else one (%s=%d)", testenv.FullVar, testenv.SweepSeedVar, testenv.Seed())
	for i, moment := range []struct{ name, task string }{
		{"carrier create", "vzcreate"},
		{"volume into the carrier", "move_volume"},
		{"carrier migration", "vzmigrate"},
	} {
		if !testenv.SampleOf(t, i, 3) {
			continue
		}
		t.Run(moment.name, func(t *testing.T) {
			t.Parallel()
			r := newMoveKillRig(t)
			m := filepath.Join(t.TempDir(), "movekill", "corral.yaml")
			os.MkdirAll(filepath.Dir(m), 0o755)
			if err := os.WriteFile(m, []byte(moveKillManifest), 0o644); err != nil {
				t.Fatal(err)
			}
			r.must("apply", "-f", m, "--auto-approve")
			if ct := r.web(); ct == nil || ct.Node != "pve1" {
				t.Fatalf("web after the first apply: %+v, want it on pve1 (placement's first node)", ct)
			}
			r.markVolumes()
			r.killMoveAt(m, moment.task)
			// The kill left the move unfinished (the container was stopped
			// and its volume detached before the carrier was made), and
			// the checker sees it.
			if bad := r.converged(); len(bad) == 0 {
				t.Fatalf("the cluster looks converged right after the move was killed during its %s", moment.name)
			}
			cmd := r.command("apply", "-f", m, "--auto-approve")
			out, err := cmd.CombinedOutput()
			if err != nil {
				if strings.Contains(string(out), "Apply complete") || !refusesWithFix(string(out)) {
					t.Fatalf("apply after the killed move: %v, want convergence or a refusal naming the CT and the fix:\n%s", err, out)
				}
				t.Logf("apply after the killed move refused (allowed):\n%s", out)
				return
			}
			if !strings.Contains(string(out), "Apply complete") {
				t.Fatalf("apply after the killed move exited 0 without Apply complete:\n%s", out)
			}
			if bad := r.converged(); len(bad) > 0 {
				t.Fatalf("apply said Apply complete, but:\n  %s\n%s", strings.Join(bad, "\n  "), out)
			}
			if code, pout, perr := r.run("plan", "-f", m); code != 0 {
				t.Fatalf("plan after Apply complete: exit %d\n%s%s", code, pout, perr)
			}
			t.Logf("killed during the %s; the next apply left web on %s", moment.name, r.web().Node)
		})
	}
}

// refusesWithFix reports whether a failed run's output names a container
// and tells what to do.
func refusesWithFix(out string) bool {
	names := strings.Contains(out, "CT ") || strings.Contains(out, "ct ") || strings.Contains(out, "container ")
	return names && (strings.Contains(out, "run ") || strings.Contains(out, "pct ") || strings.Contains(out, "corral "))
}

// moveKillRig is a two-node emulator with scaled task durations and a
// root client, reusing the soak's helpers (observe, markers).
type moveKillRig struct {
	*soakRig
}

func newMoveKillRig(t *testing.T) *moveKillRig {
	t.Helper()
	// Scaled so that a create (11 s at scale 1) takes about a second and
	// a move_volume a fifth of one: long enough to be seen by polling
	// every few milliseconds, even on a loaded machine.
	scale := 0.1
	srv, err := sim.New(sim.Options{Dir: rigDir(t), Listener: sim.ListenTLS, Listen: "127.0.0.1:0", TimeScale: &scale, Nodes: 2,
		ViewRuntime: viewRuntime()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cr := srv.Credentials()
	r := &soakRig{t: t, srv: srv, dir: t.TempDir(),
		env: []string{"PROXMOX_VE_ENDPOINT=" + srv.URL(), "PROXMOX_VE_API_TOKEN=" + cr.OperatorToken, "PROXMOX_VE_FINGERPRINT=" + srv.Fingerprint(),
			"CORRAL_SIM_TIME_SCALE=" + strconv.FormatFloat(scale, 'g', -1, 64), "XDG_STATE_HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}}
	if r.root, err = pve.New(pve.Config{Endpoint: srv.URL(), Token: cr.RootToken, HTTPClient: srv.HTTPClient()}); err != nil {
		t.Fatal(err)
	}
	return &moveKillRig{r}
}

// rigDir is a fresh state directory for a test's in-process emulator,
// with a guest address block of its own (pvetest.ReserveGuestBlock), so
// that the rigs of tests side by side never share CT addresses.
func rigDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	pvetest.ReserveGuestBlock(t, dir)
	return dir
}

// viewRuntime reports whether a rig's in-process emulator runs its CTs in
// the unisolated view (no LXC boot per start; TestMain opts in with
// CORRAL_SIM_UNISOLATED=1): unless the run chose a runtime with
// CORRAL_SIM_RUNTIME. It is an option of the emulator rather than a
// t.Setenv, which would keep the test from running in parallel.
func viewRuntime() bool { return os.Getenv("CORRAL_SIM_RUNTIME") == "" }

// run runs corral with args and returns its exit code and output.
func (r *moveKillRig) run(args ...string) (int, string, string) {
	return corralCmd(r.t, r.env, exec.Command(corralBin, args...))
}

// web is app web's one container, or nil.
func (r *moveKillRig) web() *plan.CT {
	if cts := r.observe().Apps["web"]; len(cts) == 1 {
		return cts[0]
	}
	return nil
}

// killMoveAt starts corral move web --to pve2 and SIGKILLs it as soon as
// a task of type typ runs on pve1, the node the move leaves (read as root
// through the API): the carrier is created there, takes the volumes
// there and migrates from there (a keeper made for the move is created
// on pve2, the target keeper adopts there). It fails the test if the
// move ends before that.
func (r *moveKillRig) killMoveAt(m, typ string) {
	r.t.Helper()
	cmd := r.command("move", "web", "--to", "pve2", "-f", m, "--auto-approve")
	what := "a " + typ + " task of the move"
	killWhen(r.t, cmd, what, func(string) bool { return r.running(typ) != "" })
}

// killWhen starts cmd and SIGKILLs it as soon as moment (given its output
// so far) says so; it fails the test if cmd ends first or the moment has
// not come by the test's deadline (testenv.GiveUp: a loaded machine
// makes the moment later, never the test fail).
func killWhen(t *testing.T, cmd *exec.Cmd, what string, moment func(out string) bool) {
	t.Helper()
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := testenv.Expiry(t)
	for {
		select {
		case <-done:
			t.Fatalf("%s: corral ended before the moment to kill it:\n%s", what, out.String())
		case <-deadline:
			cmd.Process.Kill()
			<-done
			t.Fatalf("%s: the moment had not come by the test's deadline:\n%s", what, out.String())
		case <-time.After(5 * time.Millisecond):
		}
		if moment(out.String()) {
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			t.Logf("SIGKILLed corral at %s:\n%s", what, out.String())
			return
		}
	}
}

// running is the guest ID of a running task of type typ on pve1, or "".
func (r *moveKillRig) running(typ string) string {
	var tasks []struct {
		ID string `json:"id"`
	}
	q := url.Values{"source": {"active"}, "typefilter": {typ}}
	if err := r.root.Get(context.Background(), "/nodes/pve1/tasks", q, &tasks); err != nil {
		r.t.Fatal(err)
	}
	if len(tasks) > 0 {
		return tasks[0].ID
	}
	return ""
}

// converged checks, as root through the API, that web has one running
// container mounting exactly its recorded volume, whose marker data is
// intact, with no carrier left.
func (r *moveKillRig) converged() []string {
	obs := r.observe()
	var bad []string
	if len(obs.Carriers) > 0 || len(obs.LeftoverCarriers) > 0 || len(obs.BadCarriers) > 0 || len(obs.Damaged) > 0 {
		bad = append(bad, fmt.Sprintf("a move is left: carriers %v, leftovers %v, bad %v, damaged %v", obs.Carriers, obs.LeftoverCarriers, obs.BadCarriers, obs.Damaged))
	}
	cts := obs.Apps["web"]
	if len(cts) != 1 {
		return append(bad, fmt.Sprintf("web has %d containers", len(cts)))
	}
	ct := cts[0]
	if ct.Status != "running" {
		bad = append(bad, fmt.Sprintf("web's container %d on %s is %s", ct.VMID, ct.Node, ct.Status))
	}
	bad = append(bad, mountsRecorded(obs, ct, "web", []string{"data"})...)
	vk := plan.VolumeKey{App: "web", Name: "data"}
	if k := obs.Holder(ct.Node, vk); k != nil {
		if b, err := os.ReadFile(r.marker(ct.Node, k.Records[vk])); err != nil || string(b) != vk.String() {
			bad = append(bad, fmt.Sprintf("web's data volume %s on %s lost its data: marker %q (%v)", k.Records[vk], ct.Node, b, err))
		}
	}
	return bad
}
