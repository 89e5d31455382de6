package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/testenv"
)

// These tests run the built binary with no endpoint configured and
// without CORRAL_SIM_INPROCESS, as a user does: the first command starts
// the local emulator (`corral sim serve` in the background) and later
// ones find it (issue 28). Each test has its own state home and stops its
// emulator in cleanup.

// daemonTest is one test's local emulator: the environment that reaches
// it and its state directory.
type daemonTest struct {
	t   testing.TB
	env []string
	dir string // $XDG_STATE_HOME/corral/sim
}

// daemonRecord is the part of DIR/daemon.json the tests read.
type daemonRecord struct {
	PID int    `json:"pid"`
	URL string `json:"url"`
}

// newDaemonTest gives a fresh state home and the view runtime (fast, no
// lxc needed); extra variables go after the defaults and win.
func newDaemonTest(t testing.TB, extra ...string) *daemonTest {
	t.Helper()
	home := t.TempDir()
	env := append([]string{"PROXMOX_VE_ENDPOINT=", "PROXMOX_VE_API_TOKEN=", "PROXMOX_VE_FINGERPRINT=",
		"XDG_STATE_HOME=" + home, "CORRAL_SIM_INPROCESS=", "CORRAL_SIM_TIME_SCALE=0",
		"CORRAL_SIM_RUNTIME=view", "CORRAL_SIM_UNISOLATED=1"}, extra...)
	d := &daemonTest{t: t, env: env, dir: filepath.Join(home, "corral", "sim")}
	// Its CTs run in the unisolated view, on the host's loopback: a block
	// of addresses of its own, or two tests' quickstart servers meet on
	// 127.1.0.101:8080.
	pvetest.ReserveGuestBlock(t, d.dir)
	t.Cleanup(d.cleanup)
	return d
}

// cleanup stops the emulator the test started, by corral sim stop, and
// kills it if that failed: no test leaves an emulator running.
func (d *daemonTest) cleanup() {
	if code, out, errs := corral(d.t, d.env, "sim", "stop"); code != 0 {
		d.t.Errorf("sim stop in cleanup: exit %d\n%s%s", code, out, errs)
	}
	if rec, ok := d.record(); ok {
		if p := d.emulatorProcess(rec.PID); p != nil {
			if alive(rec.PID) {
				d.t.Errorf("the local emulator (pid %d) still runs after sim stop: killing it", rec.PID)
				p.Kill()
			}
			p.Release()
		}
	}
	killOrphanGuests(d.dir)
}

// killOrphanGuests kills the processes that run in a CT of the state
// directory dir (their working directory is under it): in the unisolated
// view a CT's processes are the host's, and those of an emulator killed
// by the test (TestDaemon_killedIsRestarted) outlive it, reparented to
// init. Left running, the quickstart's web server holds its address's
// port 8080 after the test, and a later test given the same guest block
// fails to bind it.
func killOrphanGuests(dir string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", p.Name(), "cwd"))
		if err == nil && strings.HasPrefix(cwd, dir+string(filepath.Separator)) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// emulatorProcess is a handle (a pidfd) on process pid if it is this
// test's emulator (its command line names the state directory), else
// nil. Signals go through the handle: they reach that process or none.
// A number alone may be another process's by the time it is used
// (pid_max is 32768 on this project's machine, and a full run wraps it): a SIGKILL
// this file once sent by number from a cleanup, to an emulator gone long
// before, killed a process of another package's test.
func (d *daemonTest) emulatorProcess(pid int) *os.Process {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	// Checked after the handle is taken: a process that got the number
	// after the check cannot be the handle's.
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !slices.Contains(strings.Split(string(cmdline), "\x00"), d.dir) {
		p.Release()
		return nil
	}
	return p
}

// mustEmulatorProcess is emulatorProcess, failing the test without one.
func (d *daemonTest) mustEmulatorProcess(pid int) *os.Process {
	d.t.Helper()
	p := d.emulatorProcess(pid)
	if p == nil {
		d.t.Fatalf("pid %d is not the local emulator of %s", pid, d.dir)
	}
	return p
}

func (d *daemonTest) record() (daemonRecord, bool) {
	var rec daemonRecord
	data, err := os.ReadFile(filepath.Join(d.dir, "daemon.json"))
	if err != nil {
		return rec, false
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		d.t.Fatalf("daemon.json: %v\n%s", err, data)
	}
	return rec, true
}

func (d *daemonTest) run(args ...string) (int, string, string) {
	d.t.Helper()
	return corral(d.t, d.env, args...)
}

func (d *daemonTest) mustRun(args ...string) (string, string) {
	d.t.Helper()
	code, out, errs := d.run(args...)
	if code != 0 {
		d.t.Fatalf("corral %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out, errs
}

// simStatus is `corral sim status -o json`.
type simStatus struct {
	Running           bool   `json:"running"`
	PID               int    `json:"pid"`
	Endpoint          string `json:"endpoint"`
	State             string `json:"state"`
	Log               string `json:"log"`
	UptimeSeconds     *int64 `json:"uptime_seconds"`
	ContainersRunning *int   `json:"containers_running"`
}

func (d *daemonTest) status() simStatus {
	d.t.Helper()
	out, _ := d.mustRun("sim", "status", "-o", "json")
	var s simStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		d.t.Fatalf("sim status -o json: %v\n%s", err, out)
	}
	return s
}

// alive: pid is a process, and not a zombie waiting for its parent.
func alive(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

func waitGone(t testing.TB, pid int) {
	t.Helper()
	testenv.WaitFor(t, fmt.Sprintf("pid %d to end", pid), func() bool { return !alive(pid) })
}

const quickstart = "examples/quickstart/corral.yaml"

// pageFromInside fetches the quickstart's page from inside its container:
// it answers only while the web server its provision step started runs.
var pageFromInside = []string{"exec", "hello", "-f", quickstart, "--", "sh", "-c",
	`curl -fsS "http://$(echo "$SSH_CONNECTION" | cut -d' ' -f3):8080/index.html"`}

// TestDaemon_keepsContainersRunning: the first command starts the local
// emulator and says where its log is; the web server apply's provision
// step started in the container still serves at the second command, which
// finds the emulator and says only that it uses it. sim status -o json
// reports it with its one running CT; the record and the log hold no
// token.
func TestDaemon_keepsContainersRunning(t *testing.T) {
	t.Parallel()
	d := newDaemonTest(t)
	_, errs := d.mustRun("apply", "-f", quickstart, "--auto-approve")
	if !strings.Contains(errs, "started the local Proxmox VE emulator") || !strings.Contains(errs, filepath.Join(d.dir, "daemon.log")) {
		t.Fatalf("first command's stderr does not say it started the emulator and where its log is:\n%s", errs)
	}
	rec, ok := d.record()
	if !ok || !alive(rec.PID) || !strings.HasPrefix(rec.URL, "https://127.0.0.1:") {
		t.Fatalf("no running emulator recorded: %+v", rec)
	}
	fi, err := os.Stat(filepath.Join(d.dir, "daemon.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("daemon.json: %v %v, want mode 0600", fi.Mode(), err)
	}

	out, errs := d.mustRun(pageFromInside...)
	if out != "hello from corral\n" {
		t.Fatalf("the web server did not survive to the second command: %q\n%s", out, errs)
	}
	if strings.Contains(errs, "started the local") || strings.Count(errs, "using the local Proxmox VE emulator") != 1 {
		t.Fatalf("second command's stderr, want one line saying it uses the running emulator:\n%s", errs)
	}

	s := d.status()
	if !s.Running || s.PID != rec.PID || s.Endpoint != rec.URL+"/api2/json" || s.State != d.dir ||
		s.ContainersRunning == nil || *s.ContainersRunning != 1 || s.UptimeSeconds == nil || s.Log != filepath.Join(d.dir, "daemon.log") {
		t.Fatalf("sim status -o json: %+v", s)
	}
	if out, _ := d.mustRun("sim", "status"); !strings.Contains(out, "running") || !strings.Contains(out, rec.URL) {
		t.Fatalf("sim status:\n%s", out)
	}

	token := envFileValue(t, filepath.Join(d.dir, "env"), "PROXMOX_VE_API_TOKEN")
	_, secret, _ := strings.Cut(token, "=")
	logs, _ := d.mustRun("sim", "logs")
	record, _ := os.ReadFile(filepath.Join(d.dir, "daemon.json"))
	if secret == "" || !strings.Contains(logs, "Proxmox VE") || strings.Contains(logs, secret) || strings.Contains(string(record), secret) {
		t.Fatalf("sim logs (want the emulator's log, without the token):\n%s\nrecord:\n%s", logs, record)
	}
}

// envFileValue reads one export of an env file.
func envFileValue(t *testing.T, path, name string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "export "+name+"="); ok {
			return strings.Trim(v, "'")
		}
	}
	t.Fatalf("%s exports no %s", path, name)
	return ""
}

// TestDaemon_concurrentFirstCommands: two commands started at once with
// no emulator running both succeed; one starts it, the other waits for
// the start-up lock and uses the same one.
func TestDaemon_concurrentFirstCommands(t *testing.T) {
	t.Parallel()
	d := newDaemonTest(t)
	var wg sync.WaitGroup
	errs := make([]string, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, e := d.run("volumes")
			if code != 0 {
				t.Errorf("command %d: exit %d\n%s%s", i, code, out, e)
			}
			errs[i] = e
		}()
	}
	wg.Wait()
	started := strings.Count(errs[0]+errs[1], "started the local Proxmox VE emulator")
	using := strings.Count(errs[0]+errs[1], "using the local Proxmox VE emulator")
	if started != 1 || using != 1 {
		t.Fatalf("want one command to start the emulator and the other to use it:\n%s\n---\n%s", errs[0], errs[1])
	}
}

// TestDaemon_stopThenNextCommandBringsContainersBack: sim stop ends the
// emulator cleanly; status says so; the next command starts it again with
// the state on disk, and the CT that ran is running again.
func TestDaemon_stopThenNextCommandBringsContainersBack(t *testing.T) {
	t.Parallel()
	d := newDaemonTest(t)
	d.mustRun("apply", "-f", quickstart, "--auto-approve")
	rec, _ := d.record()
	out, _ := d.mustRun("sim", "stop")
	if !strings.Contains(out, "stopped the local emulator") {
		t.Fatalf("sim stop:\n%s", out)
	}
	waitGone(t, rec.PID)
	if s := d.status(); s.Running || s.State != d.dir {
		t.Fatalf("sim status after stop: %+v", s)
	}
	if out, _ := d.mustRun("sim", "stop"); !strings.Contains(out, "not running") {
		t.Fatalf("second sim stop:\n%s", out)
	}
	out, errs := d.mustRun("status", "-f", quickstart, "-o", "json")
	if !strings.Contains(errs, "started the local Proxmox VE emulator") {
		t.Fatalf("the command after sim stop did not start the emulator:\n%s", errs)
	}
	if !strings.Contains(out, `"status": "running"`) {
		t.Fatalf("the CT is not running after the restart:\n%s", out)
	}
	if s := d.status(); !s.Running || s.ContainersRunning == nil || *s.ContainersRunning != 1 {
		t.Fatalf("sim status after restart: %+v", s)
	}
}

// TestDaemon_killedIsRestarted: a SIGKILLed emulator is found dead by the
// next command, which starts a new one on the same state.
func TestDaemon_killedIsRestarted(t *testing.T) {
	t.Parallel()
	d := newDaemonTest(t)
	d.mustRun("apply", "-f", quickstart, "--auto-approve")
	rec, _ := d.record()
	if err := d.mustEmulatorProcess(rec.PID).Kill(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, rec.PID)
	out, errs := d.mustRun("status", "-f", quickstart, "-o", "json")
	if !strings.Contains(errs, "started the local Proxmox VE emulator") || !strings.Contains(out, `"status": "running"`) {
		t.Fatalf("after SIGKILL: want a restarted emulator and the CT running:\n%s\n%s", out, errs)
	}
	rec2, _ := d.record()
	if rec2.PID == rec.PID || !alive(rec2.PID) {
		t.Fatalf("pid %d after restart (was %d)", rec2.PID, rec.PID)
	}
}

// TestDaemon_settingsDifferSaysSo: a command whose emulator settings
// differ from the running emulator's says so in one line, naming the fix.
func TestDaemon_settingsDifferSaysSo(t *testing.T) {
	t.Parallel()
	d := newDaemonTest(t)
	d.mustRun("volumes")
	env := append(d.env, "CORRAL_SIM_TIME_SCALE=1")
	code, out, errs := corral(t, env, "volumes")
	if code != 0 || !strings.Contains(errs, "CORRAL_SIM_TIME_SCALE") || !strings.Contains(errs, "corral sim stop") {
		t.Fatalf("exit %d, want a note about the time scale:\n%s%s", code, out, errs)
	}
}

// TestDaemon_refusesUnisolatedGuests: a local emulator that cannot
// isolate containers (view runtime, no opt-in) makes apply stop before
// its first change, as the in-process one did; --unisolated-guests then
// restarts it with the opt-in and apply runs.
func TestDaemon_refusesUnisolatedGuests(t *testing.T) {
	t.Parallel()
	d := newDaemonTest(t, "CORRAL_SIM_UNISOLATED=")
	code, out, errs := d.run("apply", "-f", quickstart, "--auto-approve")
	if code != 1 || !strings.Contains(errs, "cannot isolate containers") || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("exit %d, want the refusal:\n%s%s", code, out, errs)
	}
	if out, _ := d.mustRun("volumes"); strings.Contains(out, "hello") {
		t.Fatalf("apply changed something:\n%s", out)
	}
	_, errs = d.mustRun("--unisolated-guests", "apply", "-f", quickstart, "--auto-approve")
	if !strings.Contains(errs, "started the local Proxmox VE emulator") || !strings.Contains(errs, "UNISOLATED") {
		t.Fatalf("--unisolated-guests: want a restarted emulator and the warning:\n%s", errs)
	}
}

// The cost of a command as a user feels it, from the CLI (the process's
// whole run: start, connect, its requests, exit), with the local
// emulator's default settings and the view runtime. Run with
//
//	go test ./cmd/corral -run '^$' -bench Daemon -benchtime 20x
//
// README.md quotes the figures; nothing asserts on them.

// BenchmarkDaemonWarmVolumes: `corral volumes` with the emulator running.
func BenchmarkDaemonWarmVolumes(b *testing.B) {
	d := newDaemonTest(b, "CORRAL_SIM_TIME_SCALE=")
	d.mustRun("volumes")
	b.ResetTimer()
	for range b.N {
		d.mustRun("volumes")
	}
}

// BenchmarkDaemonWarmStatus: `corral status -f` of the quickstart, its
// one CT running, with the emulator running.
func BenchmarkDaemonWarmStatus(b *testing.B) {
	d := newDaemonTest(b, "CORRAL_SIM_TIME_SCALE=")
	d.mustRun("apply", "-f", quickstart, "--auto-approve")
	b.ResetTimer()
	for range b.N {
		d.mustRun("status", "-f", quickstart)
	}
}

// BenchmarkDaemonColdFirstCommand: `corral volumes` on a fresh state:
// the first command ever, which starts the emulator.
func BenchmarkDaemonColdFirstCommand(b *testing.B) {
	for range b.N {
		b.StopTimer()
		d := newDaemonTest(b, "CORRAL_SIM_TIME_SCALE=")
		b.StartTimer()
		d.mustRun("volumes")
		b.StopTimer()
		d.cleanup()
		b.StartTimer()
	}
}

// BenchmarkDaemonColdRestartStatus: `corral status -f` of the quickstart
// after corral sim stop: the command starts the emulator, which starts
// the CT that was running.
func BenchmarkDaemonColdRestartStatus(b *testing.B) {
	d := newDaemonTest(b, "CORRAL_SIM_TIME_SCALE=")
	d.mustRun("apply", "-f", quickstart, "--auto-approve")
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		d.mustRun("sim", "stop")
		b.StartTimer()
		d.mustRun("status", "-f", quickstart)
	}
}

// BenchmarkInProcessStatus: the same status with CORRAL_SIM_INPROCESS=1,
// as every command ran before the local emulator: it boots the emulator
// and the running CT, and stops them at exit.
func BenchmarkInProcessStatus(b *testing.B) {
	d := newDaemonTest(b, "CORRAL_SIM_TIME_SCALE=", "CORRAL_SIM_INPROCESS=1")
	d.mustRun("apply", "-f", quickstart, "--auto-approve")
	b.ResetTimer()
	for range b.N {
		d.mustRun("status", "-f", quickstart)
	}
}

// TestDaemon_hungIsReplaced: an emulator whose process lives but does not
// answer (SIGSTOP here) is killed by the next command, which starts a new
// one; the test's cleanup then stops that one.
func TestDaemon_hungIsReplaced(t *testing.T) {
	t.Parallel()
	d := newDaemonTest(t)
	d.mustRun("volumes")
	rec, _ := d.record()
	p := d.mustEmulatorProcess(rec.PID)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Through the handle: by cleanup the next command has killed it and
	// its number may be any process's.
	t.Cleanup(func() { p.Kill() })
	_, errs := d.mustRun("volumes")
	if !strings.Contains(errs, "started the local Proxmox VE emulator") {
		t.Fatalf("the command after the emulator hung did not start a new one:\n%s", errs)
	}
	waitGone(t, rec.PID)
	if rec2, _ := d.record(); rec2.PID == rec.PID || !alive(rec2.PID) {
		t.Fatalf("pid %d after the hang (was %d)", rec2.PID, rec.PID)
	}
}

// TestDaemon_agentInstall: with no endpoint configured, agent install
// runs on the local emulator as every other command does (before, it
// asked for PROXMOX_VE_ENDPOINT): it makes the agent's token with the
// emulator's root token, starts the agent in its container, and the
// agent, which outlives the command, reconciles the manifest's app.
func TestDaemon_agentInstall(t *testing.T) {
	t.Parallel()
	d := newDaemonTest(t)
	m := filepath.Join(t.TempDir(), "corral.yaml")
	manifest := "project: agentlocal\napps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    memory: 256\n"
	if err := os.WriteFile(m, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs := d.mustRun("agent", "install", "-f", m)
	if !strings.Contains(errs, "started the local Proxmox VE emulator") || !strings.Contains(out+errs, "agent for project agentlocal") {
		t.Fatalf("agent install on the local emulator:\n%s\n%s", out, errs)
	}
	root := envFileValue(t, filepath.Join(d.dir, "env"), "PVE_ROOT_TOKEN")
	if _, secret, _ := strings.Cut(root, "="); secret == "" || strings.Contains(out+errs, secret) {
		t.Fatalf("root's token secret printed, or none in the env file")
	}
	testenv.WaitFor(t, "the agent to create the app", func() bool {
		code, out, _ := d.run("status", "-f", m, "-o", "json")
		return code == 0 && strings.Contains(out, `"status": "running"`)
	})
}
