package guest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/sim/model"
)

// Containers run through LXC, the runtime PVE itself drives (Debian's
// lxc package): lxc-start boots each running CT with its own PID, mount,
// UTS, IPC and network namespaces and cgroups, lxc-attach runs every SSH
// session inside it, lxc-stop shuts it down (init's power-off signal) or
// kills it. LXC was chosen over systemd-nspawn (which wants a systemd
// host and registers machines with machined) and bubblewrap (no boot,
// no attach to a running sandbox) because it is what a PVE node runs,
// so the guest sees the same /proc, /sys, cgroup and /dev layout.
//
// lxc-start runs in the foreground as a child of the emulator with a
// parent-death signal, and LXC gives the container's init a death signal
// on its monitor: a SIGKILLed emulator takes its containers with it. The
// lxcpath (config and logs) is under the state directory and emptied at
// every start; empty cgroups a killed run left behind are removed then.
//
// Where LXC cannot run (not root, no lxc package, CORRAL_SIM_RUNTIME=view)
// the Manager refuses to start CTs unless CORRAL_SIM_UNISOLATED=1 opts
// in to the unisolated filesystem view (view.go; manager.go's
// refuseUnisolated): it is never a quiet fallback.

// LXCTools are the programs of Debian's lxc package the runtime runs.
var LXCTools = []string{"lxc-start", "lxc-attach", "lxc-stop", "lxc-wait"}

// InstallLXC is the command that installs them.
const InstallLXC = "apt-get install --no-install-recommends lxc"

// CheckLXC is nil when CTs will run as LXC containers on this machine,
// else why not (a Manager then refuses to start CTs, or runs them in the
// unisolated view with its opt-in). It changes nothing on the machine:
// `corral sim doctor` asks it what a Manager would decide.
func CheckLXC() error {
	switch v := os.Getenv(runtimeEnv); v {
	case "", "lxc":
	case "view":
		return fmt.Errorf("%s=view", runtimeEnv)
	default:
		return fmt.Errorf("%s=%q: want lxc or view", runtimeEnv, v)
	}
	if os.Geteuid() != 0 {
		return errors.New("not root: LXC needs root for a container's namespaces and cgroups (run the emulator as root)")
	}
	for _, tool := range LXCTools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: install Debian's lxc package (%s)", tool, InstallLXC)
		}
	}
	return nil
}

// CheckUserNamespace is nil when unprivileged CTs get PVE's user
// namespace (container root = host uid 100000) here, else why not: it
// runs true under lxc-usernsexec with PVE's map, as the runtime does at
// its start. It needs root and lxc (CheckLXC) to say anything useful.
func CheckUserNamespace() error { return probeUserns() }

// runtimeEnv selects the runtime: "lxc" (the default where it works)
// or "view" (LXC forced off; the view still needs its opt-in).
const runtimeEnv = "CORRAL_SIM_RUNTIME"

// lxcRuntime runs one Manager's containers.
type lxcRuntime struct {
	path   string // lxcpath
	prefix string // container names: prefix + vmid, unique per Manager
	log    *slog.Logger
	net    *bridgeNet // the emulator's network namespace; nil without one
	// userns is nil when unprivileged CTs get PVE's user namespace
	// (idmap.go), else why not.
	userns error
	// data is the emulator's data directory (every rootfs and volume is
	// below it); view is where an unprivileged CT's lxc-start sees it
	// (startInView).
	data, view string
	idmap      *idmapHolder // a user namespace with PVE's map, for idmapped mounts; nil without
}

// newLXCRuntime checks that LXC can run here and prepares the lxcpath
// under dir. Its error says why not (the Manager then falls back).
func newLXCRuntime(dir string, log *slog.Logger) (*lxcRuntime, error) {
	if err := CheckLXC(); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "lxc")
	if err := os.RemoveAll(path); err != nil {
		return nil, fmt.Errorf("clear %s: %w", path, err)
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	removeStaleCgroups()
	removeStaleViews()
	var err error
	b := make([]byte, 3)
	rand.Read(b)
	// The emulator's PID in the names tells removeStaleCgroups whose
	// cgroups they are.
	r := &lxcRuntime{path: path, prefix: "corral" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b) + "-", log: log}
	if r.net, err = newBridgeNet(log); err != nil {
		log.Warn("CTs get no network (only lo): no bridge namespace", "err", err)
	}
	r.data = filepath.Join(dir, "data")
	r.userns = probeUserns()
	if r.userns == nil {
		// LXC wants container root to reach the lxcpath too.
		base := filepath.Join(viewRoot, strings.TrimSuffix(r.prefix, "-"))
		r.view = filepath.Join(base, "data")
		if err := os.MkdirAll(r.view, 0o755); err != nil {
			r.userns = fmt.Errorf("make %s: %w", r.view, err)
		} else if err := os.MkdirAll(filepath.Join(base, "lxc"), 0o755); err != nil {
			r.userns = fmt.Errorf("make %s: %w", base, err)
		} else {
			os.Chmod(viewRoot, 0o755)
			os.RemoveAll(path)
			r.path = filepath.Join(base, "lxc")
			for _, d := range overlayDirs {
				if fi, err := os.Lstat("/" + d); err == nil && fi.IsDir() {
					os.MkdirAll(r.lowerDir(d), 0o755)
				}
			}
			if r.idmap, err = newIdmapHolder(); err != nil {
				log.Warn("tiny-template CTs see the host's directories as nobody's", "err", err)
			}
		}
	}
	return r, nil
}

// close ends the emulator's network namespace (the containers are gone
// by then: every ctServer stopped its own).
func (r *lxcRuntime) close() {
	if r.net != nil {
		r.net.close()
	}
	if r.idmap != nil {
		r.idmap.close()
	}
	if r.view != "" {
		os.RemoveAll(filepath.Dir(r.view))
	}
}

// lxcCT is one boot of one container.
type lxcCT struct {
	r       *lxcRuntime
	name    string
	root    string // rootfs directory on the host
	work    string // overlay work directory (host-overlay CTs), or ""
	systemd bool   // init is systemd
	pid     int    // init's host PID
	cmd     *exec.Cmd
	userns  bool          // runs in PVE's user namespace (unprivileged)
	done    chan struct{} // closed when lxc-start exited
	log     bytes.Buffer  // lxc-start's own output
}

// hasOwnSystem reports whether root holds a system of its own (a real
// template); the tiny built-in templates do not, and their CTs see the
// host's programs through overlays, as in the view.
func hasOwnSystem(root string) bool {
	for _, p := range []string{"usr/bin/sh", "bin/sh"} {
		if fi, err := os.Lstat(filepath.Join(root, p)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// initOf is the CT's /sbin/init resolved inside root, "" without one.
func initOf(root string) string {
	p := "/sbin/init"
	for i := 0; i < 8; i++ {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			// merged /usr: /sbin may itself be a link
			if dir, err := os.Readlink(filepath.Join(root, filepath.Dir(p))); err == nil {
				if !filepath.IsAbs(dir) {
					dir = filepath.Join(filepath.Dir(filepath.Dir(p)), dir)
				}
				p = filepath.Join(dir, filepath.Base(p))
				continue
			}
			return ""
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if fi.Mode()&0o111 == 0 {
				return ""
			}
			return p
		}
		l, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(p), l)
		}
		p = l
	}
	return ""
}

// start boots CT vmid from root with its mount points, and waits until
// LXC reports it RUNNING (and, for systemd, until boot finished or
// bootWait passed).
func (r *lxcRuntime) start(ctx context.Context, vmid int, root string, mps []viewMount, run model.GuestRun, bootWait time.Duration) (*lxcCT, error) {
	ct, err := r.startOnce(ctx, vmid, root, mps, run, bootWait)
	if err != nil && (run.MemoryMiB > 0 || run.Cores > 0) && strings.Contains(err.Error(), "cgfsng") {
		// Limits on a legacy (v1) cgroup hierarchy fail now and then
		// when containers start side by side; the CT runs without them.
		r.log.Warn("CT runs without its memory and cores limits", "vmid", vmid, "err", err)
		run.MemoryMiB, run.SwapMiB, run.Cores = 0, 0, 0
		ct, err = r.startOnce(ctx, vmid, root, mps, run, bootWait)
	}
	return ct, err
}

func (r *lxcRuntime) startOnce(ctx context.Context, vmid int, root string, mps []viewMount, run model.GuestRun, bootWait time.Duration) (*lxcCT, error) {
	ct := &lxcCT{r: r, name: r.prefix + strconv.Itoa(vmid), root: root, done: make(chan struct{})}
	ct.userns = run.Unprivileged && r.userns == nil
	if ct.userns && !ownedByCTRoot(root) {
		// Made where ids were not shifted (an older emulator, a host
		// without the namespace then): its root could not use it.
		r.log.Warn("unprivileged CT runs without a user namespace: its rootfs is not owned by host uid 100000 (made by an emulator that did not shift ids); recreate it, or back it up and restore it, to get one", "vmid", vmid)
		ct.userns = false
	}
	own := hasOwnSystem(root)
	if !own {
		ct.work = filepath.Join(root, ".corral-ovl", "boot-"+randomID())
	}
	if err := prepareRootfs(root, own, ct.rootID()); err != nil {
		return nil, fmt.Errorf("prepare the rootfs: %w", err)
	}
	init := ""
	if own {
		init = initOf(root)
		ct.systemd = strings.Contains(init, "systemd")
	}
	conf, err := ct.config(mps, run, init)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.path, ct.name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := writeConfig(dir, conf, run); err != nil {
		return nil, err
	}
	args := []string{"-P", r.path, "-n", ct.name, "-F", "-o", filepath.Join(dir, "log"), "-l", "WARN"}
	ct.cmd = exec.Command("lxc-start", args...)
	ct.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ct.userns {
		if ct.cmd, err = r.startInView(args, ct.lowers()); err != nil {
			return nil, fmt.Errorf("lxc-start: %w", err)
		}
	}
	ct.cmd.Stdout, ct.cmd.Stderr = &ct.log, &ct.log
	err = ct.cmd.Start()
	for _, f := range ct.cmd.ExtraFiles {
		f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("lxc-start: %w", err)
	}
	go func() {
		ct.cmd.Wait()
		close(ct.done)
	}()
	if err := ct.waitRunning(ctx); err != nil {
		ct.kill()
		return nil, err
	}
	out, err := exec.Command("lxc-info", "-P", r.path, "-n", ct.name, "-p", "-H").Output()
	if ct.pid, _ = strconv.Atoi(strings.TrimSpace(string(out))); err != nil || ct.pid <= 0 {
		ct.kill()
		return nil, fmt.Errorf("lxc-info: no init PID: %v", err)
	}
	// A placeholder init does not bring lo up; every CT needs it (a
	// service bound to the CT's loopback address answers there).
	exec.Command("nsenter", "-t", strconv.Itoa(ct.pid), "-n", "ip", "link", "set", "lo", "up").Run()
	if r.net != nil {
		if err := r.net.attach(ct.pid, run); err != nil {
			ct.kill()
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	if ct.systemd && bootWait > 0 {
		ct.waitBooted(ctx, bootWait)
	}
	return ct, nil
}

// waitBooted waits, at most bootWait, for systemd in the CT to finish
// booting: sshd answers once the boot is through, as on PVE; a boot that
// hangs still gets its sessions after bootWait. Early in the boot
// systemd's bus is not up yet and is-system-running fails at once
// without a state, or with "offline": it asks again.
func (ct *lxcCT) waitBooted(ctx context.Context, bootWait time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, bootWait)
	defer cancel()
	for wctx.Err() == nil {
		out, _ := exec.CommandContext(wctx, "lxc-attach", "-P", ct.r.path, "-n", ct.name, "--clear-env", "--",
			"/bin/systemctl", "is-system-running", "--wait").Output()
		if bootFinished(strings.TrimSpace(string(out))) {
			return
		}
		select {
		case <-wctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// bootFinished reports whether state, what systemctl is-system-running
// --wait printed, says the boot is through. "offline" is what it prints
// while it cannot reach systemd yet (early in the boot, before the bus
// is up), not a finished boot: a session started then raced the boot's
// own jobs (systemd-tmpfiles emptying /tmp under apt-get's gpgv made
// "Unknown error executing apt-key").
func bootFinished(state string) bool {
	switch state {
	case "running", "degraded", "maintenance", "stopping":
		return true
	}
	return false
}

// waitRunning polls lxc-info until the container runs, lxc-start exits
// or ctx ends.
func (ct *lxcCT) waitRunning(ctx context.Context) error {
	for i := 0; ; i++ {
		out, _ := exec.Command("lxc-info", "-P", ct.r.path, "-n", ct.name, "-s", "-H").Output()
		if strings.TrimSpace(string(out)) == "RUNNING" {
			return nil
		}
		select {
		case <-ct.done:
			return fmt.Errorf("lxc-start failed: %s%s", strings.TrimSpace(ct.log.String()), ct.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(min(i/20+1, 10)) * 10 * time.Millisecond):
		}
	}
}

// logTail is the end of LXC's log file for error messages.
func (ct *lxcCT) logTail() string {
	data, err := os.ReadFile(filepath.Join(ct.r.path, ct.name, "log"))
	if err != nil || len(data) == 0 {
		return ""
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return " (lxc log: " + strings.TrimSpace(string(data)) + ")"
}

// prepareRootfs makes the directories LXC mounts on, /tmp as 1777, and
// for a CT without a system of its own the host's top-level symlinks
// (bin -> usr/bin, …) its overlays rely on.
func prepareRootfs(root string, own bool, rootID int) error {
	mkdir := func(p string, mode os.FileMode) error {
		if _, err := os.Lstat(p); err == nil {
			return nil
		}
		if err := mkdirIfMissing(p, mode); err != nil {
			return err
		}
		return chownDir(p, rootID)
	}
	for _, d := range []string{"dev", "proc", "sys", "run", "root", "home"} {
		if err := mkdir(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	tmp := filepath.Join(root, "tmp")
	if err := mkdir(tmp, 0o777|os.ModeSticky); err != nil {
		return err
	}
	if own {
		return nil
	}
	for _, d := range overlayDirs {
		fi, err := os.Lstat("/" + d)
		if err != nil {
			continue
		}
		target := filepath.Join(root, d)
		if _, err := os.Lstat(target); err == nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			link, err := os.Readlink("/" + d)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			if err := os.Lchown(target, rootID, rootID); err != nil {
				return err
			}
		} else if fi.IsDir() {
			if err := mkdir(target, fi.Mode().Perm()); err != nil {
				return err
			}
		}
	}
	return nil
}

// config is the container's LXC configuration.
func (ct *lxcCT) config(mps []viewMount, run model.GuestRun, init string) (string, error) {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	if _, err := os.Stat("/usr/share/lxc/config/common.conf"); err == nil {
		line("lxc.include", "/usr/share/lxc/config/common.conf")
	}
	if ct.userns {
		// PVE's default map (LXC.pm): container root is host uid 100000.
		if _, err := os.Stat("/usr/share/lxc/config/userns.conf"); err == nil {
			line("lxc.include", "/usr/share/lxc/config/userns.conf")
		}
		for _, m := range model.CTIDMap {
			line("lxc.idmap", m)
		}
	}
	line("lxc.uts.name", run.Hostname)
	line("lxc.rootfs.path", "dir:"+ct.path(ct.root))
	line("lxc.console.path", "none")
	line("lxc.tty.max", "0")
	line("lxc.pty.max", "1024")
	line("lxc.apparmor.profile", "unconfined")
	line("lxc.mount.auto", "proc:mixed sys:mixed cgroup:mixed")
	line("lxc.net.0.type", "empty") // eth0 and the rest: bridgeNet.attach
	if run.MemoryMiB > 0 {
		line("lxc.cgroup.memory.limit_in_bytes", strconv.Itoa(run.MemoryMiB<<20))
		if fileExists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes") {
			line("lxc.cgroup.memory.memsw.limit_in_bytes", strconv.Itoa((run.MemoryMiB+run.SwapMiB)<<20))
		}
	}
	if run.Cores > 0 {
		line("lxc.cgroup.cpu.cfs_period_us", "100000")
		line("lxc.cgroup.cpu.cfs_quota_us", strconv.Itoa(run.Cores*100000))
	}
	switch {
	case init == "":
		// No init of its own: a placeholder PID 1, killed on shutdown.
		// LXC's own minimal init, where the CT sees the host's programs,
		// so that orphans (a daemon a session left running, then
		// killed) are reaped as by a real init instead of staying
		// zombies that kill -0 still finds.
		if ct.work != "" && fileExists(lxcInit) {
			line("lxc.init.cmd", lxcInit+" -n "+ct.name+" -q -- /bin/sleep infinity")
		} else {
			line("lxc.init.cmd", "/bin/sleep infinity")
		}
		line("lxc.signal.halt", "SIGKILL")
	case ct.systemd:
		line("lxc.signal.halt", "SIGRTMIN+3") // systemd's "halt"
	}
	if err := ct.overlayEntries(line); err != nil {
		return "", err
	}
	sorted := append([]viewMount(nil), mps...)
	sort.SliceStable(sorted, func(i, j int) bool {
		return strings.Count(sorted[i].Path, "/") < strings.Count(sorted[j].Path, "/")
	})
	for _, m := range sorted {
		opts := "rbind,create=dir"
		if m.ReadOnly {
			opts += ",ro"
		}
		rel := strings.TrimPrefix(filepath.Clean("/"+m.Path), "/")
		line("lxc.mount.entry", fmt.Sprintf("%s %s none %s 0 0", lxcEscape(ct.path(m.HostDir)), lxcEscape(rel), opts))
	}
	if ct.work != "" {
		line("lxc.mount.entry", "tmpfs .corral-ovl tmpfs ro,size=4k,mode=700,create=dir 0 0")
	}
	return b.String(), nil
}

// writeConfig writes the CT's LXC config into dir, with what an
// unprivileged CT without features keyctl=1 gets besides.
func writeConfig(dir, conf string, run model.GuestRun) error {
	if run.Unprivileged && !run.Keyctl {
		seccomp := filepath.Join(dir, "seccomp")
		if err := os.WriteFile(seccomp, []byte(keyctlDenied()), 0o600); err != nil {
			return err
		}
		conf += "lxc.seccomp.profile = " + seccomp + "\n"
		// No session keyring of its own either: LXC would make one per
		// CT, owned by the CT's root (host uid 100000, shared by every
		// unprivileged CT), and the kernel allows a uid 200 keys
		// (kernel.keys.maxkeys), so a few hundred CTs of a benchmark
		// made Docker in a keyctl=1 CT fail with "unable to create
		// session key: disk quota exceeded". A CT whose keyctl answers
		// ENOSYS cannot use one anyway.
		conf += "lxc.keyring.session = 0\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(conf), 0o600); err != nil {
		return err
	}
	return nil
}

// keyctlDenied is the seccomp policy of an unprivileged CT without
// features keyctl=1: LXC's common policy (which common.conf would load;
// a second lxc.seccomp.profile replaces it) plus keyctl(2) answering
// ENOSYS, as pve-container's make_seccomp_config writes it.
func keyctlDenied() string {
	common := "2\ndenylist\n[all]\n"
	if b, err := os.ReadFile(commonSeccomp); err == nil && strings.HasPrefix(string(b), "2\n") {
		common = strings.TrimRight(string(b), "\n") + "\n"
		if !strings.Contains(common, "[all]") {
			common += "[all]\n"
		}
	}
	return common + "keyctl errno 38\n"
}

// commonSeccomp is LXC's default seccomp policy (Debian's lxc package).
const commonSeccomp = "/usr/share/lxc/config/common.seccomp"

// lxcEscape escapes a path for an lxc.mount.entry (fstab's \040).
func lxcEscape(p string) string { return strings.ReplaceAll(p, " ", `\040`) }

// overlayEntries adds, for a CT that sees the host's programs (ct.work
// set), an overlay mount of each of the host's overlayDirs with its
// upper and work directories under ct.work, owned by the CT's root.
func (ct *lxcCT) overlayEntries(line func(k, v string)) error {
	if ct.work == "" {
		return nil
	}
	for _, d := range overlayDirs {
		fi, err := os.Lstat("/" + d)
		if err != nil || !fi.IsDir() || strings.HasPrefix(ct.root+"/", "/"+d+"/") {
			continue
		}
		w := filepath.Join(ct.work, d)
		if err := os.MkdirAll(w, 0o700); err != nil {
			return err
		}
		// The overlays are mounted inside the CT's user namespace:
		// its root must own their work directories.
		for _, p := range []string{filepath.Dir(ct.work), ct.work, w} {
			if err := chownDir(p, ct.rootID()); err != nil {
				return err
			}
		}
		lower := "/" + d
		if ct.userns {
			lower = ct.r.lowerDir(d) // idmapped (userns.go)
		}
		line("lxc.mount.entry", fmt.Sprintf("overlay %s overlay lowerdir=%s,upperdir=%s,workdir=%s 0 0", d, lxcEscape(lower), lxcEscape(ct.path(filepath.Join(ct.root, d))), lxcEscape(ct.path(w))))
	}
	return nil
}

// attach is the command that runs argv inside the container with env.
// The session's environment (its client's LANG and LC_*, SSH_CONNECTION,
// …) is lxc-attach's own, passed on by name with --keep-var after
// --clear-env: set with -v it would be on lxc-attach's command line,
// which every process on the host can read (ps, /proc/PID/cmdline).
func (ct *lxcCT) attach(env []string, argv ...string) *exec.Cmd {
	args := []string{"-P", ct.r.path, "-n", ct.name, "--clear-env"}
	seen := map[string]bool{}
	for _, e := range env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || name == "" || seen[name] {
			continue
		}
		seen[name] = true
		args = append(args, "--keep-var", name)
	}
	args = append(args, "--")
	cmd := exec.Command("lxc-attach", append(args, argv...)...)
	cmd.Env = append([]string{}, env...) // never nil (the emulator's own); exec keeps the last of a repeated name
	cmd.Dir = "/"
	if fileExists(filepath.Join(ct.root, "root")) {
		cmd.Dir = "/root" // lxc-attach keeps the caller's directory when the CT has it
	}
	return cmd
}

// shutdown asks init to power off and waits up to timeout; it reports
// whether the container stopped.
func (ct *lxcCT) shutdown(timeout time.Duration) bool {
	select {
	case <-ct.done:
		return true
	default:
	}
	secs := max(int(timeout.Seconds()), 1)
	exec.Command("lxc-stop", "-P", ct.r.path, "-n", ct.name, "-t", strconv.Itoa(secs)).Run()
	select {
	case <-ct.done:
		return true
	case <-time.After(time.Second):
		return false
	}
}

// kill stops the container at once (lxc-stop -k, then the monitor) and
// removes its overlay work directory.
func (ct *lxcCT) kill() {
	select {
	case <-ct.done:
	default:
		exec.Command("lxc-stop", "-P", ct.r.path, "-n", ct.name, "-k").Run()
		select {
		case <-ct.done:
		case <-time.After(300 * time.Millisecond):
			// Still starting (lxc-stop found no running container):
			// the monitor's death takes init with it.
			syscall.Kill(-ct.cmd.Process.Pid, syscall.SIGKILL)
			<-ct.done
			removeCgroupsOf(ct.name)
		}
	}
	if ct.work != "" {
		removeWork(ct.work)
	}
	os.RemoveAll(filepath.Join(ct.r.path, ct.name))
}

// lxcInit is Debian lxc's minimal init (lxc-execute's): it runs one
// command as PID 2 and reaps every other child.
const lxcInit = "/usr/sbin/init.lxc.static"

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// removeStaleCgroups removes the cgroups LXC left for containers of
// emulators that are gone (killed): their names carry the emulator's
// PID (lxc.payload.corral<pid>-…), and a live process's are left alone,
// even while empty for a moment during a start.
//
// A test process starts hundreds of emulators, and the scan of
// /sys/fs/cgroup three levels deep was about 5 % of internal/cli's CPU:
// one process scans at most every staleCgroupScanEvery; what an emulator
// killed in between left waits for the next scan.
func removeStaleCgroups() {
	staleCgroupScan.Lock()
	defer staleCgroupScan.Unlock()
	if !staleCgroupScan.last.IsZero() && time.Since(staleCgroupScan.last) < staleCgroupScanEvery {
		return
	}
	staleCgroupScan.last = time.Now()
	var dirs []string
	for _, pat := range []string{"/sys/fs/cgroup/lxc.*.corral*", "/sys/fs/cgroup/*/lxc.*.corral*", "/sys/fs/cgroup/*/*/*/lxc.*.corral*"} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		_, name, _ := strings.Cut(filepath.Base(d), ".corral")
		pid, _, _ := strings.Cut(name, "-")
		if n, err := strconv.Atoi(pid); err != nil || n <= 0 || fileExists("/proc/"+pid) {
			continue
		}
		rmdirTree(d, 0)
	}
}

// staleCgroupScanEvery is how often one process scans for stale
// cgroups at most.
const staleCgroupScanEvery = 10 * time.Second

// staleCgroupScan is when this process last scanned.
var staleCgroupScan struct {
	sync.Mutex
	last time.Time
}

// removeCgroupsOf removes what LXC left of container name's cgroups
// when its monitor was killed (best effort: a cgroup whose last process
// is still exiting stays for the next emulator's start to remove).
func removeCgroupsOf(name string) {
	for _, pat := range []string{"/sys/fs/cgroup/lxc.*." + name, "/sys/fs/cgroup/*/lxc.*." + name, "/sys/fs/cgroup/*/*/*/lxc.*." + name} {
		m, _ := filepath.Glob(pat)
		for _, d := range m {
			rmdirTree(d, 0)
		}
	}
}

func rmdirTree(dir string, depth int) {
	if depth > 16 {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			rmdirTree(filepath.Join(dir, e.Name()), depth+1)
		}
	}
	syscall.Rmdir(dir)
}

// startSession runs spec's command (or login shell) inside the container
// through lxc-attach, in its own process group, or as the leader of a
// new session on the pty tty.
func (ct *lxcCT) startSession(spec viewSpec, stdin, stdout, stderr *os.File, tty bool) (*exec.Cmd, error) {
	shell := shellIn(ct.root)
	argv := []string{shell, "-c", spec.Command}
	if spec.Shell {
		argv = []string{shell, "-l"}
	}
	var cmd *exec.Cmd
	if tty {
		// lxc-attach would put a pty of its own between the client
		// and the shell (losing typeahead); the pty from openPty is
		// already the CT's, so nsenter joins the CT's namespaces and
		// hands it on.
		args := []string{"-t", strconv.Itoa(ct.pid), "-m", "-u", "-i", "-n", "-p", "-C", "-r"}
		if ct.userns {
			args = append(args, "-U") // and so container root
		}
		if fileExists(filepath.Join(ct.root, "root")) {
			// --wdns: after entering (--wd would open the host's
			// /root, which container root cannot even reach)
			args = append(args, "--wdns=/root")
		} else {
			args = append(args, "-w")
		}
		cmd = exec.Command("nsenter", append(append(args, "--"), argv...)...)
		cmd.Env = spec.Env
	} else {
		cmd = ct.attach(spec.Env, argv...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: !tty, Setsid: tty, Setctty: tty, Ctty: 0}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// shellIn is root's shell in the CT's /etc/passwd, else /bin/sh.
func shellIn(root string) string {
	// As host root, from a rootfs its users control: never through a link.
	data, err := model.ReadCTFile(root, "etc/passwd")
	if err == nil {
		for _, line := range strings.Split(data, "\n") {
			f := strings.Split(line, ":")
			if len(f) == 7 && f[0] == "root" && strings.HasPrefix(f[6], "/") {
				return f[6]
			}
		}
	}
	return "/bin/sh"
}

// openPty opens a pseudo-terminal of the CT's own devpts (through its
// init's root), so that the shell's tty is a /dev/pts/N of the CT.
func (ct *lxcCT) openPty() (master, tty *os.File, err error) {
	base := "/proc/" + strconv.Itoa(ct.pid) + "/root/dev/pts/"
	master, err = os.OpenFile(base+"ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err == nil {
		tty, err = os.OpenFile(base+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	}
	if err == nil && ct.userns {
		tty.Chown(ct.rootID(), -1) // the session's terminal is container root's, as login makes it
	}
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("the CT's pty: %w", err)
	}
	return master, tty, nil
}

// rootID is the host uid of the CT's root: 0, or 100000 in PVE's user
// namespace.
func (ct *lxcCT) rootID() int {
	if ct.userns {
		return model.CTRootID
	}
	return 0
}

// chownDir gives a directory the emulator made for the CT to its root
// (a no-op for a privileged CT).
func chownDir(p string, rootID int) error {
	if rootID == 0 {
		return nil
	}
	return os.Lchown(p, rootID, rootID)
}

// probeUserns reports whether LXC may give a container PVE's id map
// here: LXC maps ids the way lxc-usernsexec does (through uidmap's
// newuidmap when it is installed, which wants root's range in
// /etc/subuid and /etc/subgid, as a PVE node has), so one run of it
// answers. The error says what is missing.
func probeUserns() error {
	if _, err := exec.LookPath("lxc-usernsexec"); err != nil {
		return errors.New("lxc-usernsexec not found (Debian's lxc package)")
	}
	args := []string{}
	for _, m := range model.CTIDMap {
		f := strings.Fields(m)
		args = append(args, "-m", strings.Join(f, ":"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "lxc-usernsexec", append(args, "--", "true")...).CombinedOutput()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(string(out))
	for _, l := range strings.Split(msg, "\n") {
		if strings.Contains(l, "not allowed") || strings.Contains(l, "newuidmap") {
			msg = l // the cause; what follows it are its consequences
			break
		}
	}
	return fmt.Errorf("the host refuses the user namespace u:0:100000:65536 (%v: %s); as on a PVE node, add root:100000:65536 to /etc/subuid and /etc/subgid", err, msg)
}

// An unprivileged CT's container root (host uid 100000) must be able to
// reach its rootfs and volumes from /, and LXC checks it: the state
// directory's parents may be closed to others (a 0700 home or test
// directory). So its lxc-start runs in a mount namespace of its own in
// which the data directory (whose own directories are 0755) is bound at
// /run/corral-sim/<emulator>/data, and the CT's paths are given below
// that. The binding lives and dies with that lxc-start; the host's
// mounts never change. LXC checks the lxcpath the same way, so it is
// /run/corral-sim/<emulator>/lxc then. Both go when the emulator stops
// or, after a kill, at the next start.
const viewRoot = "/run/corral-sim"

// path is host path p as the CT's lxc-start sees it.
func (ct *lxcCT) path(p string) string {
	if !ct.userns || ct.r.view == "" {
		return p
	}
	if rel, ok := strings.CutPrefix(p, ct.r.data+"/"); ok {
		return ct.r.view + "/" + rel
	}
	return p
}

// removeStaleViews removes the view directories of emulators that are
// gone (their PID is in the name, as in the cgroups').
func removeStaleViews() {
	entries, _ := os.ReadDir(viewRoot)
	for _, e := range entries {
		pid, _, _ := strings.Cut(strings.TrimPrefix(e.Name(), "corral"), "-")
		if n, err := strconv.Atoi(pid); err != nil || n <= 0 || fileExists("/proc/"+pid) {
			continue
		}
		// In the host's mount namespace data/ is an empty directory:
		// the binding was only in the dead lxc-starts' namespaces.
		os.RemoveAll(filepath.Join(viewRoot, e.Name()))
	}
}

// ownedByCTRoot reports whether dir belongs to an unprivileged CT's root
// (host uid 100000), as create and restore leave a rootfs.
func ownedByCTRoot(dir string) bool {
	var st unix.Stat_t
	return unix.Stat(dir, &st) == nil && st.Uid == model.CTRootID
}

// lowers maps the host directories a tiny-template CT sees through its
// overlays to where its launcher mounts them (userns.go).
func (ct *lxcCT) lowers() map[string]string {
	if ct.work == "" {
		return nil
	}
	out := map[string]string{}
	for _, d := range overlayDirs {
		fi, err := os.Lstat("/" + d)
		if err != nil || !fi.IsDir() || strings.HasPrefix(ct.root+"/", "/"+d+"/") {
			continue
		}
		out["/"+d] = ct.r.lowerDir(d)
	}
	return out
}
