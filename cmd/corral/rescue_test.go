package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/plan"
)

// rescueManifest is one app with a retained volume and nothing to
// provision, so that apply is quick.
const rescueManifest = `project: rescue
apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    node: pve1
    rootfs:
      size: 1G
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
`

// rescueRig is moveKillRig's emulator (scaled task durations, a root
// client), with its guests' SSH port given to the corral processes, and
// the quickstart-like app applied, its volume marked.
type rescueRig struct {
	*moveKillRig
	m     string
	volid string
}

func newRescueRig(t *testing.T) *rescueRig {
	t.Helper()
	r := &rescueRig{moveKillRig: newMoveKillRig(t)}
	r.env = append(r.env, "CORRAL_SIM_GUEST_SSH_PORT="+strconv.Itoa(r.srv.Guests().Port()))
	r.m = filepath.Join(t.TempDir(), "rescue", "corral.yaml")
	os.MkdirAll(filepath.Dir(r.m), 0o755)
	if err := os.WriteFile(r.m, []byte(rescueManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	r.must("apply", "-f", r.m, "--auto-approve")
	r.markVolumes()
	r.volid = r.recorded()
	return r
}

// recorded is the volid the keeper records for web/data.
func (r *rescueRig) recorded() string {
	r.t.Helper()
	k := r.observe().Holder("pve1", plan.VolumeKey{App: "web", Name: "data"})
	if k == nil {
		r.t.Fatal("no keeper on pve1 records web/data")
	}
	return k.Records[plan.VolumeKey{App: "web", Name: "data"}]
}

// settled checks, as root, that no rescue container is left, web has
// one container mounting its recorded volume (the same volid as before
// the rescue: nothing freed or replaced), and the volume's marker is
// intact.
func (r *rescueRig) settled() []string {
	obs := r.observe()
	var bad []string
	if len(obs.Rescues) > 0 {
		for app, rs := range obs.Rescues {
			for _, res := range rs {
				bad = append(bad, fmt.Sprintf("app %s's rescue ct %d is left holding %s", app, res.VMID, res.HoldList()))
			}
		}
	}
	if v := r.recorded(); v != r.volid {
		bad = append(bad, fmt.Sprintf("web/data is recorded as %s, was %s", v, r.volid))
	}
	cts := obs.Apps["web"]
	if len(cts) != 1 {
		return append(bad, fmt.Sprintf("web has %d containers", len(cts)))
	}
	bad = append(bad, mountsRecorded(obs, cts[0], "web", []string{"data"})...)
	if b, err := os.ReadFile(r.marker("pve1", r.volid)); err != nil || string(b) != "web/data" {
		bad = append(bad, fmt.Sprintf("web's volume lost its marker: %q (%v)", b, err))
	}
	return bad
}

// TestRescue_commandFormWritesThroughToTheApp is the data marker test of
// issue 32 item 6: a file written on the volume through corral rescue's
// COMMAND form is what the app sees after corral apply. On the way: a
// running app is refused without --stop (nothing made), -o json says
// what the rescue held and the command's exit status, the rescue leaves
// the app stopped with its volume attached, and an exit status of the
// command is corral's.
func TestRescue_commandFormWritesThroughToTheApp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: real processes and task durations")
	}
	r := newRescueRig(t)
	code, out, errs := r.run("rescue", "web", "-f", r.m, "--", "true")
	if code == 0 || !strings.Contains(errs, "--stop") {
		t.Fatalf("rescue of a running app without --stop: exit %d, want a refusal naming --stop\n%s%s", code, out, errs)
	}
	if obs := r.observe(); len(obs.Rescues) > 0 || obs.Apps["web"][0].Status != "running" {
		t.Fatalf("the refused rescue changed something: rescues %v, web %s", obs.Rescues, obs.Apps["web"][0].Status)
	}

	code, out, errs = r.run("rescue", "web", "--stop", "-f", r.m, "-o", "json", "--", "sh", "-c", "echo rescued > /srv/data/fixed && echo to-stdout")
	if code != 0 {
		t.Fatalf("rescue -o json -- COMMAND: exit %d\n%s%s", code, out, errs)
	}
	var doc struct {
		App        string `json:"app"`
		VMID       int    `json:"rescue_vmid"`
		AppVMID    int    `json:"app_vmid"`
		ExitStatus int    `json:"exit_status"`
		Ended      bool   `json:"ended"`
		Volumes    []struct{ Key, Volid, Mount string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("rescue -o json printed no one JSON document (%v):\n%s", err, out)
	}
	if doc.App != "web" || doc.VMID == 0 || !doc.Ended || doc.ExitStatus != 0 || len(doc.Volumes) != 1 || doc.Volumes[0].Mount != "/srv/data" || doc.Volumes[0].Volid != r.volid {
		t.Fatalf("rescue -o json: %+v, want web's rescue, ended, exit 0, holding %s at /srv/data", doc, r.volid)
	}
	if !strings.Contains(errs, "to-stdout") {
		t.Fatalf("the command's stdout did not reach stderr under -o json:\n%s", errs)
	}
	if bad := r.settled(); len(bad) > 0 {
		t.Fatalf("after the rescue:\n  %s", strings.Join(bad, "\n  "))
	}
	if st := r.web().Status; st != "stopped" {
		t.Fatalf("web after the rescue is %s, want stopped", st)
	}
	code, _, errs = r.run("rescue", "web", "-f", r.m, "--", "sh", "-c", "cat /srv/data/fixed; exit 7")
	if code != 7 || !strings.Contains(errs, "corral start web") {
		t.Fatalf("rescue -- exit 7: exit %d, want 7 and the way to start the app\n%s", code, errs)
	}
	r.must("apply", "-f", r.m, "--auto-approve")
	if got := strings.TrimSpace(r.must("exec", "web", "-f", r.m, "--", "cat", "/srv/data/fixed")); got != "rescued" {
		t.Fatalf("the app reads %q from the file written in the rescue, want rescued", got)
	}
	if bad := r.settled(); len(bad) > 0 {
		t.Fatalf("after apply:\n  %s", strings.Join(bad, "\n  "))
	}
}

// TestRescueKilledThenApply kills corral rescue (a real SIGKILL of the
// binary, as TestMoveKilledThenApply does a move) while the rescue
// container is created, while it starts holding the app's volume, and
// while the user's command runs in it. Each kill leaves a state that
// plan and status say is a rescue (naming the rescue CT and the way out),
// and that the next corral apply or corral rescue repairs: the volume
// back with the app, the same volid, its data intact, no rescue CT left.
func TestRescueKilledThenApply(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: real processes and task durations")
	}
	for _, moment := range []struct{ name, task, repair string }{
		{"rescue create", "vzcreate", "apply"},
		{"rescue start", "vzstart", "rescue"},
		{"command running", "", "apply"},
	} {
		t.Run(moment.name, func(t *testing.T) {
			t.Parallel()
			r := newRescueRig(t)
			r.killRescueAt(moment.task)
			code, out, errs := r.run("plan", "-f", r.m)
			if code != 2 || !strings.Contains(out+errs, "in rescue") || !strings.Contains(out+errs, "rescue CT") {
				t.Fatalf("plan after the kill: exit %d, want 2 and the rescue named\n%s%s", code, out, errs)
			}
			if code, out, errs = r.run("status", "-f", r.m); !strings.Contains(out, "in rescue") || !strings.Contains(out, "--end") {
				t.Fatalf("status after the kill: exit %d, want the rescue and how to end it\n%s%s", code, out, errs)
			}
			if moment.repair == "rescue" {
				code, out, errs = r.run("rescue", "web", "-f", r.m, "--", "cat", "/srv/data/.soak-marker")
				if code != 0 || !strings.Contains(errs, "an earlier corral rescue left") || !strings.Contains(out, "web/data") {
					t.Fatalf("a second rescue after the kill: exit %d, want it to end the left one and read the marker\n%s%s", code, out, errs)
				}
			}
			out = r.must("apply", "-f", r.m, "--auto-approve")
			if !strings.Contains(out, "Apply complete") {
				t.Fatalf("apply after the killed rescue:\n%s", out)
			}
			if bad := append(r.settled(), r.converged()...); len(bad) > 0 {
				t.Fatalf("after the kill during %s and corral %s, apply:\n  %s\n%s", moment.name, moment.repair, strings.Join(bad, "\n  "), out)
			}
			if code, out, errs := r.run("plan", "-f", r.m); code != 0 {
				t.Fatalf("plan after Apply complete: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}

// killRescueAt starts corral rescue web --stop -- sleep 60 and SIGKILLs
// it as soon as a task of type typ runs on pve1, or, with typ "", once
// the rescue container runs holding the volume (the command runs).
func (r *rescueRig) killRescueAt(typ string) {
	r.t.Helper()
	cmd := r.command("rescue", "web", "--stop", "-f", r.m, "--", "sleep", "60")
	what := fmt.Sprintf("rescue at %q", typ)
	killWhen(r.t, cmd, what, func(out string) bool { return r.moment(typ, out) })
}

// moment reports whether the kill moment came: a running task of type
// typ on pve1 (not the app's own shutdown), or for typ "" the rescue's
// command under way (corral said so, and the rescue CT runs).
func (r *rescueRig) moment(typ, out string) bool {
	if typ != "" {
		return r.running(typ) != ""
	}
	if !strings.Contains(out, "/srv/data") {
		return false
	}
	rs := r.observe().Rescues["web"]
	return len(rs) == 1 && rs[0].Status == "running" && len(rs[0].Holds) == 1
}

// TestRescueHoldsTheLock: while a rescue runs, apply and a second rescue
// are refused by corral's lock (--lock-timeout 0), naming the holder.
// The rescue's command runs until the test, done with the refusals,
// writes a file on the volume it holds: a fixed sleep would make the
// test last that long, and fail when the machine is slower than it.
func TestRescueHoldsTheLock(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: real processes and task durations")
	}
	r := newRescueRig(t)
	release := filepath.Join(filepath.Dir(r.marker("pve1", r.volid)), ".release")
	cmd := r.command("rescue", "web", "--stop", "-f", r.m, "--", "sh", "-c", "until [ -e /srv/data/.release ]; do sleep 1; done")
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for !r.moment("", out.String()) {
		select {
		case err := <-done:
			t.Fatalf("the rescue ended early (%v):\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	for _, args := range [][]string{
		{"apply", "-f", r.m, "--auto-approve", "--lock-timeout", "0"},
		{"rescue", "web", "-f", r.m, "--lock-timeout", "0", "--", "true"},
	} {
		code, o, e := r.run(args...)
		if code == 0 || !strings.Contains(o+e, "rescue") || !strings.Contains(o+e, "lock") {
			t.Fatalf("corral %s while a rescue runs: exit %d, want a refusal by the lock naming the rescue\n%s%s", strings.Join(args, " "), code, o, e)
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the rescue: %v\n%s", err, out.String())
	}
	if bad := r.settled(); len(bad) > 0 {
		t.Fatalf("after the rescue:\n  %s", strings.Join(bad, "\n  "))
	}
}
