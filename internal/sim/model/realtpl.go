package model

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Real templates: with Options.RealTemplate set (the sim server sets it
// for `CORRAL_SIM_REAL_TEMPLATES=1` or `corral sim --real-templates`),
// local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst is a real Debian
// 12 root file system, built once from Debian's packages by mmdebstrap
// and cached in the user's cache directory; every CT created from it
// boots systemd in an LXC container (package sim/guest). Without it the
// template is the tiny built-in tree (templateFiles), which keeps unit
// tests fast.

// RealTemplateEnv turns real templates on for the sim server ("1").
const RealTemplateEnv = "CORRAL_SIM_REAL_TEMPLATES"

// RealTemplateName is the catalogue entry a real template replaces.
const RealTemplateName = "debian-12-standard_12.12-1_amd64.tar.zst"

// realTemplatePackages are what PVE's debian-12-standard has that users
// rely on, beyond Debian's essential set and apt.
var realTemplatePackages = []string{
	"systemd", "systemd-sysv", "dbus", "openssh-server", "ca-certificates", "curl", "python3",
	"locales", "iproute2", "ifupdown", "procps", "iputils-ping", "less", "sudo", "psmisc",
}

// realTemplateHooks run in the built tree ($1): no host keys (create
// makes them), no machine id, the host's hostname replaced, a generated
// en_US.UTF-8 locale, no package lists (apt-get update fetches them).
var realTemplateHooks = []string{
	`rm -f "$1"/etc/ssh/ssh_host_*`,
	`echo localhost > "$1/etc/hostname"`,
	`printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$1/etc/hosts"`,
	`: > "$1/etc/machine-id"; rm -f "$1/var/lib/dbus/machine-id"`,
	`echo 'en_US.UTF-8 UTF-8' >> "$1/etc/locale.gen"; chroot "$1" locale-gen >/dev/null; echo 'LANG=en_US.UTF-8' > "$1/etc/default/locale"`,
	`rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin`,
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// realTemplateProgressEvery is how often a build says it still runs.
var realTemplateProgressEvery = 15 * time.Second

// RealTemplatePath is where the real template is cached:
// $XDG_CACHE_HOME/corral/templates (~/.cache/corral/templates).
func RealTemplatePath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("real template: no cache directory: %w (set XDG_CACHE_HOME)", err)
	}
	return filepath.Join(dir, "corral", "templates", RealTemplateName), nil
}

// EnsureRealTemplate returns the cached real template, building it first
// when missing (about 2.5 minutes and 90 MB of packages from the
// host's Debian mirror), with mmdebstrap's progress lines written to
// progress. Concurrent callers (parallel test processes) wait for one
// build through a lock file.
func EnsureRealTemplate(ctx context.Context, progress io.Writer) (string, error) {
	p, err := RealTemplatePath()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("real template: %w", err)
	}
	lock, err := os.OpenFile(p+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("real template: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("real template: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(p); err == nil {
		return p, nil // another process built it meanwhile
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", errors.New("real template: mmdebstrap not found: install Debian's mmdebstrap and zstd packages (apt-get install mmdebstrap zstd), as root")
	}
	tmp := p + ".tmp-" + strconv.Itoa(os.Getpid()) + ".tar.zst"
	defer os.Remove(tmp)
	progress = &syncWriter{w: progress} // mmdebstrap's lines and the ticks
	fmt.Fprintf(progress, "building the real Debian 12 template (about 2.5 minutes, once: cached in %s)...\n", filepath.Dir(p))
	began := time.Now()
	if err := runMmdebstrap(ctx, tmp, progress, began); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("real template: %w", err)
	}
	fmt.Fprintf(progress, "real Debian 12 template ready in %s\n", time.Since(began).Round(time.Second))
	return p, nil
}

// runMmdebstrap builds the template archive at tmp, writing mmdebstrap's
// lines to progress and, while it is silent, a line every
// realTemplateProgressEvery; a failure quotes its last 20 lines.
func runMmdebstrap(ctx context.Context, tmp string, progress io.Writer, began time.Time) error {
	args := []string{"--variant=apt", "--include=" + strings.Join(realTemplatePackages, ",")}
	for _, h := range realTemplateHooks {
		args = append(args, "--customize-hook="+h)
	}
	args = append(args, "bookworm", tmp)
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(progress, "  mmdebstrap: %s\n", line)
			tail = append(tail, line)
			if len(tail) > 20 {
				tail = tail[1:]
			}
		}
	}()
	// mmdebstrap is silent for a minute at a time (downloading,
	// unpacking): say that it still runs.
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(realTemplateProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Fprintf(progress, "  still building the real Debian 12 template [%s elapsed; about 2.5 minutes the first time]\n", time.Since(began).Round(time.Second))
			}
		}
	}()
	err := cmd.Run()
	close(stop)
	<-ticked
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("real template: mmdebstrap: %w: %s (it needs root and the host's Debian mirror)", err, strings.Join(tail, "\n"))
	}
	return nil
}

// applianceSource serves the catalogue's appliances: the real template
// (Options.RealTemplate) for debian-12-standard when the cluster has one,
// else the tiny built-in trees; it keeps their SHA-512s once computed.
type applianceSource struct {
	realTemplate string

	sumsMu sync.Mutex
	sums   map[string]string // ApplianceSHA512's, by template
}

// writeAppliance writes appliance a's archive to dst: the real template
// when the cluster has one for a, else the tiny built-in tree.
func (as *applianceSource) writeAppliance(dst string, a Appliance, mtime time.Time) (int64, error) {
	if as.realTemplate == "" || a.Template != RealTemplateName {
		return writeTemplate(dst, a, mtime)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	os.Remove(dst)
	if err := os.Link(as.realTemplate, dst); err != nil {
		if err := copyFile(as.realTemplate, dst); err != nil {
			return 0, fmt.Errorf("copy the real template: %w", err)
		}
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// useRealTemplates puts the real template in place of the tiny one on
// every node of a datacenter made before real templates were asked for.
func (c *Cluster) useRealTemplatesLocked() error {
	if c.opts.RealTemplate == "" {
		return nil
	}
	want, err := os.Stat(c.opts.RealTemplate)
	if err != nil {
		return fmt.Errorf("real template: %w", err)
	}
	a, _ := applianceFor(RealTemplateName)
	for _, v := range c.st.Volumes {
		if v.Storage != "local" || v.Name != "vztmpl/"+RealTemplateName {
			continue
		}
		p := c.storage.volumePath(v.Node, v.Storage, v.Name)
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, want) {
			continue
		}
		size, err := c.appliances.writeAppliance(p, a, applianceMTime)
		if err != nil {
			return err
		}
		v.Size = size
	}
	return nil
}

// systemdVersion finds the systemd major version of an extracted root
// file system: the tiny templates' marker file, or the version in the
// name of a real one's libsystemd-shared. The files are the CT's: links
// are resolved inside root, never out to the host's (readCTFileInRoot).
func systemdVersion(root string) int {
	var n int
	if data, err := readCTFileInRoot(root, "usr/lib/systemd/systemd.version"); err == nil && data != "" {
		fmt.Sscanf(data, "%d", &n)
		return n
	}
	var dirs []string // usr/lib/*/systemd, then usr/lib/systemd
	for _, e := range readCTDirInRoot(root, "usr/lib") {
		dirs = append(dirs, "usr/lib/"+e.Name()+"/systemd")
	}
	slices.Sort(dirs)
	for _, dir := range append(dirs, "usr/lib/systemd") {
		for _, e := range readCTDirInRoot(root, dir) {
			v, ok := strings.CutPrefix(e.Name(), "libsystemd-shared-")
			if v, ok2 := strings.CutSuffix(v, ".so"); ok && ok2 {
				if i, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0]); err == nil {
					return i
				}
			}
		}
	}
	return 0
}

// isRealArchive reports whether a template archive is more than a tiny
// built-in tree (which never reaches a megabyte).
func isRealArchive(archive string) bool {
	fi, err := os.Stat(archive)
	return err == nil && fi.Size() > 1<<20
}

// applianceSize is the size of appliance a's archive as served.
func (as *applianceSource) applianceSize(a Appliance) (int64, error) {
	if as.realTemplate != "" && a.Template == RealTemplateName {
		fi, err := os.Stat(as.realTemplate)
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	data, err := templateArchive(a, applianceMTime)
	return int64(len(data)), err
}

// ApplianceSHA512 is the sha512sum aplinfo lists for a: of the archive
// the emulator serves (the real template's once computed and kept).
func (c *Cluster) ApplianceSHA512(a Appliance) string { return c.appliances.sha512(a) }

// sha512 is ApplianceSHA512, computed once per template.
func (as *applianceSource) sha512(a Appliance) string {
	as.sumsMu.Lock()
	defer as.sumsMu.Unlock()
	if sum, ok := as.sums[a.Template]; ok {
		return sum
	}
	var sum string
	if as.realTemplate != "" && a.Template == RealTemplateName {
		sum, _ = fileChecksum(as.realTemplate, "sha512")
	} else {
		sum, _ = applianceChecksum(a, "sha512")
	}
	if as.sums == nil {
		as.sums = map[string]string{}
	}
	as.sums[a.Template] = sum
	return sum
}
