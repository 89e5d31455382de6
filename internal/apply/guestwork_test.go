package apply_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/testenv"
)

// recorder is an apply.Observer that keeps what it is told.
type recorder struct {
	mu    sync.Mutex
	steps []string
	lines []string
}

func (r *recorder) Step(app, phase, detail string) func(error) {
	r.mu.Lock()
	r.steps = append(r.steps, phase+" "+detail)
	r.mu.Unlock()
	return func(error) {}
}
func (r *recorder) TaskLog(app, upid, line string) {
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
}
func (r *recorder) Warn(app, msg string) {}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.steps, "\n") + "\n" + strings.Join(r.lines, "\n")
}

// guestRig is an emulator whose containers have SSH on a free port.
type guestRig struct {
	t      *testing.T
	srv    *sim.Server
	client *pve.Client
	ssh    apply.SSH
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newGuestRig(t *testing.T) *guestRig {
	port := freePort(t)
	e := pvetest.Start(t, func(o *sim.Options) { o.GuestSSHPort = port })
	signer, ak, err := guest.NewKey("corral-test")
	if err != nil {
		t.Fatal(err)
	}
	return &guestRig{t: t, srv: e.Server, client: e.Client, ssh: apply.SSH{Signer: signer, AuthorizedKey: ak, Port: port, ConnectTimeout: 20 * time.Second}}
}

const guestApp = `apps:
  - name: hermes
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    features: {nesting: true}
    volumes:
      - {name: home, size: 1G, mount: /home/hermes}
`

// apply plans the guest app (edited by edits) with digest as its guest
// digest and applies it with work.
func (g *guestRig) apply(work apply.GuestWork, digest string, obsr apply.Observer, edits ...func(*plan.App)) error {
	g.t.Helper()
	apps := loadAppsText(g.t, guestApp)
	apps[0].GuestDigest = digest
	for _, edit := range edits {
		edit(&apps[0])
	}
	ctx := context.Background()
	obs, err := apply.Observe(ctx, g.client)
	if err != nil {
		return err
	}
	p, err := plan.Make(apps, obs)
	if err != nil {
		return err
	}
	ex := &apply.Executor{Client: g.client, Observer: obsr, SSH: g.ssh, Guest: map[string]apply.GuestWork{"hermes": work}}
	return ex.Apply(ctx, p, obs)
}

func (g *guestRig) plan(digest string) *plan.Plan {
	apps := loadAppsText(g.t, guestApp)
	apps[0].GuestDigest = digest
	obs, err := apply.Observe(context.Background(), g.client)
	if err != nil {
		g.t.Fatal(err)
	}
	p, err := plan.Make(apps, obs)
	if err != nil {
		g.t.Fatal(err)
	}
	return p
}

func (g *guestRig) ct() *plan.CT {
	obs, err := apply.Observe(context.Background(), g.client)
	if err != nil {
		g.t.Fatal(err)
	}
	return obs.Apps["hermes"][0]
}

// path is a file in the container's view: in the volume for /home/hermes,
// else in its rootfs.
func (g *guestRig) path(p string) string {
	ct := g.ct()
	if rest, ok := strings.CutPrefix(p, "/home/hermes/"); ok {
		for k, v := range ct.Config {
			if strings.HasPrefix(k, "mp") {
				dir, _ := g.srv.Cluster().VolumePath("pve", plan.ParseMountPoint(v).Volume)
				return filepath.Join(dir, rest)
			}
		}
	}
	dir, _ := g.srv.Cluster().VolumePath("pve", plan.ParseMountPoint(ct.Config["rootfs"]).Volume)
	return filepath.Join(dir, p)
}

// skipIfNoGuestExec stops the test when err says guest commands cannot
// run on this machine (testenv.GuestExec).
func skipIfNoGuestExec(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), "guest exec unavailable") {
		testenv.NeedGuestExec(t, err)
	}
}

func work(config string) apply.GuestWork {
	return apply.GuestWork{
		Steps: []apply.Step{
			{Name: "user: hermes", Kind: "user", Account: &apply.Account{Name: "hermes", UID: 10000, Home: "/home/hermes", Shell: "/bin/sh"}},
			{Name: "file: config", Kind: "file", Path: "/etc/hermes/config.yaml", Content: config, Mode: 0o644},
			{Name: "envFile: .env", Kind: "envFile", Path: "/home/hermes/.env", Env: []manifest.EnvVar{{Name: "API_KEY", Value: manifest.NewSecret("", "sk-very-secret-value")}}, Mode: 0o600, Owner: "hermes"},
			{Name: "run: install", Kind: "run", Script: "echo installing hermes\necho done > /home/hermes/installed.txt\n"},
		},
		Checks: []apply.Check{{Name: "installed", Kind: "command", Command: "test -f /home/hermes/installed.txt", Retries: 2, Interval: 100 * time.Millisecond}},
	}
}

func TestGuestWorkProvisionsAndSkipsWhatIsDone(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "provisioning with useradd (a writable guest view)")
	g := newGuestRig(t)
	rec := &recorder{}
	err := g.apply(work("port: 9119\n"), "d1", rec)
	skipIfNoGuestExec(t, err)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, rec.all())
	}
	for _, f := range []string{"/etc/hermes/config.yaml", "/home/hermes/.env", "/home/hermes/installed.txt"} {
		if _, err := os.Stat(g.path(f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if fi, err := os.Stat(g.path("/home/hermes/.env")); err == nil && fi.Mode().Perm() != 0o600 {
		t.Errorf(".env mode %v, want 0600", fi.Mode().Perm())
	}
	if !strings.Contains(rec.all(), "installing hermes") {
		t.Errorf("run step output not streamed:\n%s", rec.all())
	}
	if strings.Contains(rec.all(), "sk-very-secret-value") {
		t.Fatal("the envFile secret was shown")
	}
	m := plan.ParseMarker(g.ct().Config["description"])
	if m.HostKey == "" || m.Provisioned != "d1" {
		t.Fatalf("markers after provisioning: %+v", m)
	}
	// Nothing changed: the plan knows without logging in.
	if p := g.plan("d1"); p.HasChanges() {
		t.Fatalf("plan after provisioning: %+v", p.Changes)
	}
	// One step changed: only it runs.
	rec = &recorder{}
	if err := g.apply(work("port: 9120\n"), "d2", rec); err != nil {
		t.Fatalf("second apply: %v\n%s", err, rec.all())
	}
	out := rec.all()
	for _, want := range []string{"provision user: hermes (unchanged, skipped)", "provision file: config\n", "provision run: install (unchanged, skipped)"} {
		if !strings.Contains(out+"\n", want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(g.path("/etc/hermes/config.yaml")); string(b) != "port: 9120\n" {
		t.Errorf("config = %q", b)
	}
}

func TestGuestWorkUnhealthyFails(t *testing.T) {
	t.Parallel()
	g := newGuestRig(t)
	w := apply.GuestWork{Checks: []apply.Check{{Name: "web", Kind: "command", Command: "echo not listening; false", Retries: 1, Interval: 50 * time.Millisecond}}}
	err := g.apply(w, "h1", &recorder{})
	skipIfNoGuestExec(t, err)
	if err == nil || !strings.Contains(err.Error(), "unhealthy after 2 attempts") || !strings.Contains(err.Error(), "not listening") {
		t.Fatalf("err = %v", err)
	}
	if m := plan.ParseMarker(g.ct().Config["description"]); m.Provisioned != "" {
		t.Errorf("an unhealthy app was marked provisioned: %+v", m)
	}
}

// A tcp check whose host holds shell syntax still reports the closed
// port, not a broken script.
func TestGuestWorkTCPCheckQuotesItsAddress(t *testing.T) {
	t.Parallel()
	g := newGuestRig(t)
	w := apply.GuestWork{Checks: []apply.Check{{Name: "port", Kind: "tcp", Address: "no'such.invalid:1", Timeout: time.Second}}}
	err := g.apply(w, "t1", &recorder{})
	skipIfNoGuestExec(t, err)
	if err == nil || !strings.Contains(err.Error(), "nothing listens on no'such.invalid:1") || strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("err = %v", err)
	}
	// The container's own sshd listens: that check passes.
	addr, err := apply.Address(context.Background(), g.client, g.ct())
	if err != nil || addr == "" {
		t.Fatalf("address %q: %v", addr, err)
	}
	w.Checks[0].Address = net.JoinHostPort(addr, strconv.Itoa(g.ssh.Port))
	if err := g.apply(w, "t2", &recorder{}); err != nil {
		t.Fatalf("tcp check of the guest's sshd at %s: %v", w.Checks[0].Address, err)
	}
}

func TestGuestWorkRejectsChangedHostKey(t *testing.T) {
	t.Parallel()
	g := newGuestRig(t)
	w := apply.GuestWork{Steps: []apply.Step{{Name: "run: hi", Kind: "run", Script: "echo hi"}}}
	err := g.apply(w, "k1", &recorder{})
	skipIfNoGuestExec(t, err)
	if err != nil {
		t.Fatal(err)
	}
	// Someone swaps the pinned key (or the container): corral refuses.
	ct := g.ct()
	_, other, _ := guest.NewKey("impostor")
	desc := plan.WithGuestMarkers(ct.Config["description"], other, "k1")
	if err := g.client.Put(context.Background(), "/nodes/pve/lxc/"+itoa(ct.VMID)+"/config", map[string][]string{"description": {desc}}, nil); err != nil {
		t.Fatal(err)
	}
	err = g.apply(w, "k2", &recorder{})
	var hk *guest.HostKeyError
	if !errors.As(err, &hk) || !strings.Contains(err.Error(), "host key changed") {
		t.Fatalf("err = %v", err)
	}
}

func loadAppsText(t *testing.T, text string) []plan.App {
	t.Helper()
	f, err := manifest.Parse("corral.yaml", []byte(text), manifest.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return plan.FromManifest(f)
}

func itoa(n int) string { return strconv.Itoa(n) }

// Where the emulator cannot run commands in containers, apply says which
// steps and checks it did not run, and the work stays pending.
func TestGuestWorkUnavailableIsReported(t *testing.T) {
	t.Parallel()
	g := newGuestRig(t)
	if !g.srv.Guests().DisableExec("user namespaces are disabled (test)") {
		t.Fatal("could not disable guest exec")
	}
	w := apply.GuestWork{
		Steps:  []apply.Step{{Name: "run: install", Kind: "run", Script: "echo hi"}},
		Checks: []apply.Check{{Name: "web", Kind: "command", Command: "true"}},
	}
	warns := &warnRecorder{}
	if err := g.apply(w, "u1", warns); err != nil {
		t.Fatalf("apply: %v", err)
	}
	got := strings.Join(warns.msgs, "\n")
	for _, want := range []string{"user namespaces are disabled (test)", "NOT run: step run: install; health check web"} {
		if !strings.Contains(got, want) {
			t.Errorf("warning lacks %q:\n%s", want, got)
		}
	}
	if p := g.plan("u1"); !p.HasChanges() || !p.Changes[0].Guest {
		t.Errorf("the work should still be pending: %+v", p.Changes)
	}
}

type warnRecorder struct {
	recorder
	msgs []string
}

func (w *warnRecorder) Warn(app, msg string) { w.msgs = append(w.msgs, msg) }

// snapshotBeforeChange: a change that leaves the app unhealthy is rolled
// back to the snapshot taken before it, volume data included.
func TestSnapshotBeforeChangeRollsBack(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "the emulator's writable guest view")
	g := newGuestRig(t)
	health := []apply.Check{{Name: "flag", Kind: "command", Command: "test -f /home/hermes/flag"}}
	v1 := apply.GuestWork{Steps: []apply.Step{{Name: "run: flag", Kind: "run", Script: "echo up > /home/hermes/flag"}}, Checks: health}
	var rec *recorder // the last apply's
	phases := func(phase string) int {
		n := 0
		for _, s := range rec.steps {
			if strings.HasPrefix(s, phase+" ") {
				n++
			}
		}
		return n
	}
	applyWith := func(w apply.GuestWork, digest string) error {
		rec = &recorder{}
		return g.apply(w, digest, rec, func(a *plan.App) { a.SnapshotBeforeChange = true })
	}
	err := applyWith(v1, "s1")
	skipIfNoGuestExec(t, err)
	if err != nil {
		t.Fatal(err)
	}
	// v2 breaks the app: its new step removes what the health check needs.
	v2 := apply.GuestWork{Steps: append(v1.Steps, apply.Step{Name: "run: break", Kind: "run", Script: "rm /home/hermes/flag; echo broken > /home/hermes/state"}), Checks: health}
	err = applyWith(v2, "s2")
	var rb *apply.RolledBackError
	if !errors.As(err, &rb) || !strings.Contains(err.Error(), "rolled back to snapshot") {
		t.Fatalf("err = %v", err)
	}
	// Each is one step: take, roll back to, remove the snapshot.
	if n, m := phases("snapshot"), phases("rollback"); n != 2 || m != 1 {
		t.Errorf("%d snapshot and %d rollback steps, want 2 and 1:\n%s", n, m, rec.all())
	}
	if _, err := os.Stat(g.path("/home/hermes/flag")); err != nil {
		t.Errorf("the volume's file was not rolled back: %v", err)
	}
	if _, err := os.Stat(g.path("/home/hermes/state")); err == nil {
		t.Errorf("the broken change's file survived the rollback")
	}
	ct := g.ct()
	if ct.Status != "running" {
		t.Errorf("container %s after the rollback, want running", ct.Status)
	}
	if m := plan.ParseMarker(ct.Config["description"]); m.Provisioned != "s1" {
		t.Errorf("provisioned marker %q after rollback, want s1 (the change is still pending)", m.Provisioned)
	}
	snaps, err := g.client.Snapshots(context.Background(), "pve", ct.VMID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if strings.HasPrefix(s.Name, "corral_pre_") {
			t.Errorf("snapshot %s left behind", s.Name)
		}
	}
	// A change that keeps the app healthy leaves no snapshot either.
	v3 := apply.GuestWork{Steps: append(v1.Steps, apply.Step{Name: "run: fine", Kind: "run", Script: "echo fine > /home/hermes/state"}), Checks: health}
	if err := applyWith(v3, "s3"); err != nil {
		t.Fatal(err)
	}
	if n := phases("snapshot"); n != 2 {
		t.Errorf("%d snapshot steps, want 2 (take and remove):\n%s", n, rec.all())
	}
	snaps, _ = g.client.Snapshots(context.Background(), "pve", ct.VMID)
	for _, s := range snaps {
		if strings.HasPrefix(s.Name, "corral_pre_") {
			t.Errorf("snapshot %s left behind after a good change", s.Name)
		}
	}
}

// A run step fails when any command of a pipeline fails (issue 16 item 1),
// and its checksum is not recorded, so the next apply runs it again.
func TestGuestWorkRunStepPipefail(t *testing.T) {
	t.Parallel()
	g := newGuestRig(t)
	w := apply.GuestWork{Steps: []apply.Step{
		{Name: "run: download", Kind: "run", Script: "false | cat\necho after > /root/after.txt\n"},
	}}
	err := g.apply(w, "d1", nil)
	skipIfNoGuestExec(t, err)
	if err == nil || !strings.Contains(err.Error(), `step "run: download" failed`) {
		t.Fatalf("apply with a failing pipeline: %v", err)
	}
	if _, err := os.Stat(g.path("/root/after.txt")); err == nil {
		t.Errorf("the script went on after the failed pipeline")
	}
	if p := g.plan("d1"); !p.Changes[0].Guest {
		t.Errorf("the failed step is planned as done")
	}
}

// Parents a file step creates are 0755 and its owner's (issue 16 item 2).
func TestGuestWorkFileParentsOwnedByOwner(t *testing.T) {
	t.Parallel()
	g := newGuestRig(t)
	w := apply.GuestWork{Steps: []apply.Step{
		{Name: "user: hermes", Kind: "user", Account: &apply.Account{Name: "hermes", UID: 10000, Home: "/home/hermes", Shell: "/bin/sh"}},
		{Name: "file: config", Kind: "file", Path: "/home/hermes/.hermes/conf/config.yaml", Content: "a: 1\n", Mode: 0o644, Owner: "hermes"},
	}}
	err := g.apply(w, "d1", nil)
	skipIfNoGuestExec(t, err)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/home/hermes/.hermes", "/home/hermes/.hermes/conf"} {
		fi, err := os.Stat(g.path(d + "/"))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o755 || st.Uid != 10000 {
			t.Errorf("%s: mode %o uid %d, want 755 and hermes (10000)", d, fi.Mode().Perm(), st.Uid)
		}
	}
}

// owner: USER:GROUP (the documented form both Hermes examples use), USER
// and numeric ids all own a file step's new parents; an owner that does
// not exist fails the step with the fix and leaves no root-owned
// directory behind (issue 32 item 1: was chown: invalid group
// 'hermes:hermes:').
func TestGuestWorkFileOwnerForms(t *testing.T) {
	t.Parallel()
	g := newGuestRig(t)
	user := apply.Step{Name: "user: hermes", Kind: "user", Account: &apply.Account{Name: "hermes", UID: 10000, Home: "/home/hermes", Shell: "/bin/sh"}}
	w := apply.GuestWork{Steps: []apply.Step{
		user,
		{Name: "file: a", Kind: "file", Path: "/home/hermes/a/b/a.yaml", Content: "a: 1\n", Mode: 0o644, Owner: "hermes:hermes"},
		{Name: "file: n", Kind: "file", Path: "/srv/n/m/n.yaml", Content: "n: 1\n", Mode: 0o644, Owner: "10000:10000"},
		{Name: "file: u", Kind: "file", Path: "/srv/u/v/u.yaml", Content: "u: 1\n", Mode: 0o644, Owner: "hermes"},
		{Name: "file: x", Kind: "file", Path: "/srv/x/y/x.yaml", Content: "x: 1\n", Mode: 0o644, Owner: "54321"},
	}}
	err := g.apply(w, "d1", nil)
	skipIfNoGuestExec(t, err)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path     string
		uid, gid uint32
	}{
		{"/home/hermes/a", 10000, 10000}, {"/home/hermes/a/b", 10000, 10000}, {"/home/hermes/a/b/a.yaml", 10000, 10000},
		{"/srv/n", 10000, 10000}, {"/srv/n/m/n.yaml", 10000, 10000},
		{"/srv/u", 10000, 10000}, {"/srv/u/v", 10000, 10000},
		{"/srv/x", 54321, 0}, {"/srv/x/y/x.yaml", 54321, 0},
	} {
		fi, err := os.Stat(g.path(c.path))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != c.uid || st.Gid != c.gid {
			t.Errorf("%s: owner %d:%d, want %d:%d", c.path, st.Uid, st.Gid, c.uid, c.gid)
		}
	}

	for i, owner := range []string{"nosuch", "hermes:nosuch", "nosuch:hermes"} {
		w := apply.GuestWork{Steps: []apply.Step{user,
			{Name: "file: bad", Kind: "file", Path: "/opt/bad/deep/f.yaml", Content: "f: 1\n", Mode: 0o644, Owner: owner}}}
		err := g.apply(w, "bad"+strconv.Itoa(i), nil)
		if err == nil || !strings.Contains(err.Error(), "owner "+owner+": no such user or group in the container; create it with a user step") {
			t.Errorf("owner %s: %v", owner, err)
		}
		if _, err := os.Stat(g.path("/opt/bad")); err == nil {
			t.Errorf("owner %s: the step left /opt/bad behind", owner)
		}
	}
}

// A user step whose home exists already (a volume mounted there) prints
// no useradd warning about it (issue 32 item 7: "the home directory
// already exists ... Not copying any file from skel directory" shown as
// the step's output).
func TestGuestWorkUserOnExistingHomeQuiet(t *testing.T) {
	t.Parallel()
	g := newGuestRig(t)
	rec := &recorder{}
	w := apply.GuestWork{Steps: []apply.Step{
		{Name: "user: hermes", Kind: "user", Account: &apply.Account{Name: "hermes", UID: 10000, Home: "/home/hermes", Shell: "/bin/sh"}},
		{Name: "run: check", Kind: "run", Script: "test \"$(stat -c %u /home/hermes)\" = 10000\ntest \"$(getent passwd hermes | cut -d: -f6)\" = /home/hermes\n"},
	}}
	err := g.apply(w, "d1", rec)
	skipIfNoGuestExec(t, err)
	if err != nil {
		t.Fatal(err)
	}
	if out := rec.all(); strings.Contains(out, "already exists") || strings.Contains(out, "skel") {
		t.Errorf("useradd's warning shown:\n%s", out)
	}
}
