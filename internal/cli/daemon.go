package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/localfile"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/ui"
)

// The local emulator (issue 28). With no endpoint configured, the first
// corral command starts `corral sim serve --daemon` in the background on
// the default state directory, as kind or minikube start their cluster,
// and every command then talks to it over HTTPS like to any endpoint,
// with its certificate pinned: containers keep running between commands
// and several commands can run at once (their lock is the cluster's, as
// on PVE). In the state directory:
//
//	daemon.json  the running emulator: pid, URL, fingerprint, guest SSH
//	             port, whether it refuses guests, its settings (0600; no
//	             secret: the token stays in env, where sim serve keeps it)
//	daemon.lock  flock held while a command checks for, starts or stops it
//	daemon.log   its output and log lines (nothing on the user's terminal)
//
// CORRAL_SIM_INPROCESS=1 keeps the former mode, where each command runs
// the emulator inside itself and stops it at exit (tests use it).
const (
	inProcessEnv     = "CORRAL_SIM_INPROCESS"
	daemonRecordFile = "daemon.json"
	daemonLockFile   = "daemon.lock"
	daemonLogFile    = "daemon.log"
	// realTemplatesEnv is model.RealTemplateEnv (package cli reaches the
	// emulator's model only through package sim).
	realTemplatesEnv = "CORRAL_SIM_REAL_TEMPLATES"
	runtimeEnv       = "CORRAL_SIM_RUNTIME"
	timeScaleEnv     = "CORRAL_SIM_TIME_SCALE"
	// defaultTimeScale is the local emulator's task durations × real PVE's.
	defaultTimeScale = 0.25
	// daemonLogMax: a longer log is moved to daemon.log.1 when the
	// emulator starts.
	daemonLogMax = 8 << 20
)

// daemonSettings are the environment's emulator settings the local
// emulator was started with.
type daemonSettings struct {
	TimeScale     float64 `json:"time_scale"`
	Runtime       string  `json:"runtime,omitempty"`        // CORRAL_SIM_RUNTIME
	Unisolated    bool    `json:"unisolated,omitempty"`     // CORRAL_SIM_UNISOLATED=1 (--unisolated-guests)
	RealTemplates bool    `json:"real_templates,omitempty"` // CORRAL_SIM_REAL_TEMPLATES=1
}

// simSettingsFromEnv are the settings this command asks of the emulator.
func simSettingsFromEnv() (daemonSettings, error) {
	s := daemonSettings{TimeScale: defaultTimeScale, Runtime: os.Getenv(runtimeEnv),
		Unisolated: os.Getenv(guest.UnisolatedEnv) == "1", RealTemplates: os.Getenv(realTemplatesEnv) == "1"}
	if v := os.Getenv(timeScaleEnv); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return s, fmt.Errorf("%s=%q: want a number >= 0", timeScaleEnv, v)
		}
		s.TimeScale = f
	}
	return s, nil
}

// differences lists, one phrase each, how want differs from s.
func (s daemonSettings) differences(want daemonSettings) []string {
	var d []string
	if s.TimeScale != want.TimeScale {
		d = append(d, fmt.Sprintf("%s=%v (here %v)", timeScaleEnv, s.TimeScale, want.TimeScale))
	}
	if s.Runtime != want.Runtime {
		d = append(d, fmt.Sprintf("%s=%q (here %q)", runtimeEnv, s.Runtime, want.Runtime))
	}
	if s.Unisolated != want.Unisolated {
		d = append(d, fmt.Sprintf("%s=%s (here %s)", guest.UnisolatedEnv, onOff(s.Unisolated), onOff(want.Unisolated)))
	}
	if s.RealTemplates != want.RealTemplates {
		d = append(d, fmt.Sprintf("%s=%s (here %s)", realTemplatesEnv, onOff(s.RealTemplates), onOff(want.RealTemplates)))
	}
	return d
}

func onOff(b bool) string {
	if b {
		return "1"
	}
	return "unset"
}

// daemonRecord is daemon.json, written by the emulator once it serves.
type daemonRecord struct {
	PID          int       `json:"pid"`
	URL          string    `json:"url"`
	Fingerprint  string    `json:"fingerprint"`
	Started      time.Time `json:"started"`
	GuestSSHPort int       `json:"guest_ssh_port"`
	// Isolated: CTs run as LXC containers; else in the unisolated view,
	// or not at all when GuestsRefused says why.
	Isolated      bool           `json:"isolated"`
	GuestsRefused string         `json:"guests_refused,omitempty"`
	Settings      daemonSettings `json:"settings"`
}

// localDaemon is the local emulator of a state directory.
type localDaemon struct{ dir string }

// newLocalDaemon is the local emulator of the default state directory,
// made absolute: the emulator runs in / and its command line names it.
func newLocalDaemon() localDaemon {
	dir := defaultSimDir()
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return localDaemon{dir: dir}
}

func (d localDaemon) path(name string) string { return filepath.Join(d.dir, name) }

// record reads daemon.json; nil when there is none.
func (d localDaemon) record() (*daemonRecord, error) {
	data, err := localfile.Read(d.path(daemonRecordFile), localfile.MaxState)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r daemonRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, nil // a torn or foreign file: as if none (the next start rewrites it)
	}
	return &r, nil
}

// writeRecord replaces daemon.json (0600) in one rename.
func (d localDaemon) writeRecord(r daemonRecord) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := d.path(daemonRecordFile + ".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.path(daemonRecordFile))
}

// token is the operator token from DIR/env, where sim serve writes it.
func (d localDaemon) token() (string, error) { return d.envToken("PROXMOX_VE_API_TOKEN") }

// rootToken is root@pam's token from DIR/env: the user owns the local
// emulator as root owns a PVE node (agent install makes users with it).
func (d localDaemon) rootToken() (string, error) { return d.envToken("PVE_ROOT_TOKEN") }

// envToken is the token exported as name in DIR/env.
func (d localDaemon) envToken(name string) (string, error) {
	path := d.path("env")
	data, err := localfile.Read(path, localfile.MaxState)
	if err != nil {
		return "", fmt.Errorf("the local emulator's credentials: %w (corral sim stop, then run the command again)", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "export "+name+"="); ok {
			return shellUnquote(v), nil
		}
	}
	return "", fmt.Errorf("%s holds no %s: corral sim stop, then run the command again", path, name)
}

// shellUnquote undoes sim's shellQuote: '…' runs joined by \'.
func shellUnquote(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '\'':
			j := strings.IndexByte(v[i+1:], '\'')
			if j < 0 {
				b.WriteString(v[i+1:])
				return b.String()
			}
			b.WriteString(v[i+1 : i+1+j])
			i += j + 1
		case v[i] == '\\' && i+1 < len(v):
			b.WriteByte(v[i+1])
			i++
		default:
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

// processAlive: pid is a process and not a zombie waiting for its parent.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	return data[i+2] != 'Z' && data[i+2] != 'X'
}

// isOurs: pid is this directory's local emulator (not a process that got
// the number of a dead one).
func (d localDaemon) isOurs(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	has := func(s string) bool {
		for _, a := range args {
			if a == s {
				return true
			}
		}
		return false
	}
	return has("serve") && has("--daemon") && has(d.dir)
}

// signal sends sig to pid if it is this directory's emulator, through a
// handle (a pidfd) taken before that check: a process that got the number
// after the check, once the emulator ended, is not the handle's and gets
// nothing. One that has ended is not an error.
func (d localDaemon) signal(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	defer p.Release()
	if !d.isOurs(pid) {
		return nil // ended: another process has the number, or none
	}
	if err := p.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// running is the record of a live emulator of this directory, or nil.
func (d localDaemon) running() (*daemonRecord, error) {
	r, err := d.record()
	if err != nil || r == nil {
		return nil, err
	}
	if !processAlive(r.PID) || !d.isOurs(r.PID) {
		return nil, nil
	}
	return r, nil
}

// errNotAnswering: the recorded process lives but its API does not answer.
var errNotAnswering = errors.New("the local emulator does not answer")

// client connects to the running emulator r and checks that it answers
// (the connection is then reused by the command's own requests).
func (d localDaemon) client(ctx context.Context, r *daemonRecord, log *slog.Logger) (*pve.Client, error) {
	token, err := d.token()
	if err != nil {
		return nil, err
	}
	// The emulator's tasks run at its recorded time scale: polls follow it.
	scale := r.Settings.TimeScale
	c, err := pve.New(pve.Config{Endpoint: r.URL, Token: token, Fingerprint: r.Fingerprint, Logger: log, TaskTimeScale: &scale})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Version(pctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w (%v)", errNotAnswering, err)
	}
	return c, nil
}

// lock takes daemon.lock, waiting for another command that holds it (one
// starting or stopping the emulator, and saying so on w after a second);
// unlock releases it.
func (d localDaemon) lock(ctx context.Context, w io.Writer) (unlock func(), err error) {
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(d.path(daemonLockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	said := time.Now().Add(time.Second)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			// Unlocked before the close: a child forked meanwhile holds
			// the descriptor (and so the lock) until it execs.
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
		if !said.IsZero() && time.Now().After(said) {
			ui.WriteEmulatorStartWait(w, d.path(daemonLogFile))
			said = time.Time{}
		}
	}
}

// localSession is a connection to the local emulator.
type localSession struct {
	rec     *daemonRecord
	client  *pve.Client
	started bool
	notes   []string // settings that differ from this command's
}

// ensure connects to the running local emulator, starting it (or, when
// start is false, failing) when none runs or it does not answer.
func (d localDaemon) ensure(ctx context.Context, want daemonSettings, start bool, w io.Writer, log *slog.Logger) (*localSession, error) {
	// The usual case, without the lock: it runs and answers.
	hung := 0 // the pid found not answering
	if r, err := d.running(); err != nil {
		return nil, err
	} else if r != nil && !needsRestart(r, want) {
		if c, err := d.client(ctx, r, log); err == nil {
			return d.session(r, c, false, want), nil
		} else if !errors.Is(err, errNotAnswering) {
			return nil, err
		}
		hung = r.PID
	}
	if !start {
		return nil, fmt.Errorf("the local emulator is not running (state in %s): any corral command starts it", d.dir)
	}
	unlock, err := d.lock(ctx, w)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another command may have started it while this one waited.
	r, err := d.running()
	if err != nil {
		return nil, err
	}
	if r != nil {
		if !needsRestart(r, want) {
			err := fmt.Errorf("%w within 5s", errNotAnswering)
			if r.PID != hung { // else it was just asked
				var c *pve.Client
				if c, err = d.client(ctx, r, log); err == nil {
					return d.session(r, c, false, want), nil
				}
				if !errors.Is(err, errNotAnswering) {
					return nil, err
				}
			}
			log.Warn("the local emulator does not answer: killing it to start it again", "pid", r.PID, "err", err)
			d.signal(r.PID, syscall.SIGKILL)
		} else {
			// It refuses the guests this command opted in to run: none
			// of them runs, so a restart loses nothing.
			d.signal(r.PID, syscall.SIGTERM)
		}
		if err := d.waitExit(ctx, r.PID, 30*time.Second); err != nil {
			return nil, fmt.Errorf("the local emulator (pid %d) did not stop: %w; kill -9 %d, then run the command again (its state is kept)", r.PID, err, r.PID)
		}
	}
	old, _ := d.record()
	if old != nil {
		d.waitReleased(ctx, old.PID, 10*time.Second)
	}
	if want.RealTemplates {
		ui.WriteRealTemplatesStarting(w, d.path(daemonLogFile))
	}
	r, err = d.start(ctx, want, old)
	if err != nil {
		return nil, err
	}
	c, err := d.client(ctx, r, log)
	if err != nil {
		return nil, fmt.Errorf("the local emulator started but %w: see %s", err, d.path(daemonLogFile))
	}
	return d.session(r, c, true, want), nil
}

// needsRestart: the emulator refuses guests and this command opts in to
// unisolated ones (--unisolated-guests).
func needsRestart(r *daemonRecord, want daemonSettings) bool {
	return r.GuestsRefused != "" && want.Unisolated && !r.Settings.Unisolated
}

func (d localDaemon) session(r *daemonRecord, c *pve.Client, started bool, want daemonSettings) *localSession {
	s := &localSession{rec: r, client: c, started: started}
	if !started {
		s.notes = r.Settings.differences(want)
	}
	return s
}

// start runs `corral sim serve --daemon` detached (own session, output to
// daemon.log) and waits until it has written its record. It listens on
// the port it had before when that is free, so that DIR/env stays right.
func (d localDaemon) start(ctx context.Context, want daemonSettings, old *daemonRecord) (*daemonRecord, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this corral binary to start the local emulator: %w", err)
	}
	if d.stateBusy() {
		return nil, fmt.Errorf("state directory %s is in use by another corral emulator (corral sim serve, or a corral run with %s=1): stop it, or point corral at it with '. %s'",
			d.dir, inProcessEnv, d.path("env"))
	}
	listen := "127.0.0.1:0"
	if old != nil {
		if _, port, err := net.SplitHostPort(strings.TrimPrefix(old.URL, "https://")); err == nil {
			if ln, err := net.Listen("tcp", "127.0.0.1:"+port); err == nil {
				ln.Close()
				listen = "127.0.0.1:" + port
			}
		}
	}
	logPath := d.path(daemonLogFile)
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > daemonLogMax {
		os.Rename(logPath, logPath+".1")
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the local emulator's log: %w", err)
	}
	defer logf.Close()
	ui.WriteDaemonLogStart(logf, time.Now(), os.Getpid())
	cmd := exec.Command(exe, "--log-level", "info", "sim", "serve", "--daemon", "--state", d.dir, "--listen", listen,
		"--time-scale", strconv.FormatFloat(want.TimeScale, 'g', -1, 64), "--guest-ssh-port", "0")
	cmd.Env = daemonEnv(os.Environ())
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the local emulator: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it should it stop while this process lives
	limit := 2 * time.Minute
	if want.RealTemplates {
		limit = 30 * time.Minute // the first real template is built with mmdebstrap
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if r, _ := d.record(); r != nil && r.PID == cmd.Process.Pid {
			return r, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("the local emulator exited as it started (%v): its log, %s, says why:\n%s", err, logPath, logTail(logPath, 15))
		case <-deadline.C:
			return nil, fmt.Errorf("the local emulator (pid %d) did not start within %s: see its log, %s; corral sim stop, then try again", cmd.Process.Pid, limit, logPath)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// daemonEnv is the environment of the local emulator: this command's,
// without the connection variables (it is no client) and the in-process
// opt-in. CORRAL_SIM_* reach it, and its record says what it got.
func daemonEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PROXMOX_VE_") || name == inProcessEnv || name == "CORRAL_SIM_GUEST_SSH_PORT" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// logTail is the last n lines of the file at path (read from its last
// 64 KiB: the log of an emulator that ran for months is large).
func logTail(path string, n int) string {
	data, err := localfile.Tail(path, 64<<10)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// stateBusy: an emulator holds the state directory's lock (DIR/.lock,
// taken by every emulator on it, see sim.New).
func (d localDaemon) stateBusy() bool {
	f, err := os.OpenFile(d.path(".lock"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil
}

// waitReleased waits, at most limit, while the recorded emulator pid
// still has a /proc entry (a SIGKILLed emulator's group leader is a zombie
// while its other threads close its files) and the state directory is
// still locked: the lock is that process's until its last thread is gone,
// and starting a new emulator in that window failed with "in use by
// another corral emulator". A pid without a /proc entry holds nothing, so
// a lock then is another emulator's and start says so at once.
func (d localDaemon) waitReleased(ctx context.Context, pid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for pidExists(pid) && d.stateBusy() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pidExists: pid has a /proc entry, a zombie's included.
func pidExists(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// waitExit waits until pid is gone and has let go of the state directory
// (a killed process's group leader is a zombie before its last thread
// has closed its files).
func (d localDaemon) waitExit(ctx context.Context, pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for processAlive(pid) || d.stateBusy() {
		if time.Now().After(deadline) {
			if processAlive(pid) {
				return fmt.Errorf("still running after %s", limit)
			}
			return nil // another emulator holds it: start says so
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// stop ends the running emulator with SIGTERM (it closes cleanly: CT
// state stays on disk and running CTs start again with it) and waits.
// It returns the stopped record, or nil when none ran.
func (d localDaemon) stop(ctx context.Context, w io.Writer) (*daemonRecord, error) {
	unlock, err := d.lock(ctx, w)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := d.running()
	if err != nil || r == nil {
		return nil, err
	}
	if err := d.signal(r.PID, syscall.SIGTERM); err != nil {
		return nil, fmt.Errorf("stop the local emulator (pid %d): %w", r.PID, err)
	}
	if err := d.waitExit(ctx, r.PID, 60*time.Second); err != nil {
		return nil, fmt.Errorf("the local emulator (pid %d) %w: see %s; kill -9 %d stops it (its state is kept)", r.PID, err, d.path(daemonLogFile), r.PID)
	}
	return r, nil
}

// followLog copies the log to w, then what is appended to it, until ctx
// ends or stop is closed.
func followLog(ctx context.Context, stop <-chan struct{}, path string, w io.Writer, follow bool) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no log in %s: the local emulator has not run (any corral command without PROXMOX_VE_ENDPOINT starts it)", filepath.Dir(path))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
