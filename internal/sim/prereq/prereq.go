// Package prereq checks what this machine needs for corral's local
// emulator to run real containers and real templates: root, Debian's
// lxc, user namespaces with root's subordinate id range, mmdebstrap and
// zstd, cgroup v2 and memory. Each Check says what it found and the
// command that fixes it. Where the guest runtime decides (package
// sim/guest: CheckLXC, CheckUserNamespace) the checks ask it, so that
// `corral sim doctor` and the emulator agree.
package prereq

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/sim/model"
)

// Check is one prerequisite.
type Check struct {
	Name string `json:"name"`
	// OK is whether the machine has it.
	OK bool `json:"ok"`
	// Required: without it CTs do not start (the emulator refuses them).
	// The others degrade what the emulator gives (a stand-in template,
	// no user namespace) and say so.
	Required bool `json:"required"`
	// Found is what the check saw; For is what needs it.
	Found string `json:"found"`
	For   string `json:"for"`
	// Fix is the command that fixes a missing prerequisite.
	Fix string `json:"fix,omitempty"`
}

// Report is every check, in order.
type Report struct {
	Checks []Check `json:"checks"`
	// OK is false when a required check failed.
	OK bool `json:"ok"`
	// Containers is what CTs run as: "lxc"; "refused (why)", where the
	// emulator refuses to start them; or "unisolated view, …" with its
	// opt-in (guest.CheckLXC, guest.UnisolatedEnv).
	Containers string `json:"containers"`
	// RealTemplates is whether `corral sim serve` uses the real Debian 12
	// template by default here (RealTemplates).
	RealTemplates bool `json:"real_templates"`
}

// sudo prefixes cmd with "sudo " unless this process is root.
func sudo(cmd string) string {
	if os.Geteuid() == 0 {
		return cmd
	}
	return "sudo " + cmd
}

// Files the checks read; tests point them elsewhere.
var (
	subuidFile = "/etc/subuid"
	subgidFile = "/etc/subgid"
	procSys    = "/proc/sys"
	cgroupRoot = "/sys/fs/cgroup"
)

// Run checks this machine.
func Run() Report {
	var r Report
	add := func(c Check) { r.Checks = append(r.Checks, c) }

	root := os.Geteuid() == 0
	add(Check{Name: "root", OK: root, Required: true, Found: fmt.Sprintf("uid %d", os.Geteuid()),
		For: "LXC containers (their namespaces and cgroups)", Fix: "run the emulator as root: sudo corral sim serve"})

	add(lxcTools())

	if v := os.Getenv("CORRAL_SIM_RUNTIME"); v != "" && v != "lxc" {
		add(Check{Name: "runtime", OK: false, Required: true, Found: "CORRAL_SIM_RUNTIME=" + v,
			For: "LXC containers (CORRAL_SIM_RUNTIME=view forces the unisolated filesystem view)", Fix: "unset CORRAL_SIM_RUNTIME"})
	}

	add(userNamespaces())
	add(subordinateIDs("subuid", subuidFile))
	add(subordinateIDs("subgid", subgidFile))
	if guest.CheckLXC() == nil {
		err := guest.CheckUserNamespace()
		c := Check{Name: "userns-map", OK: err == nil, Found: "lxc-usernsexec -m u:0:100000:65536 -m g:0:100000:65536 -- true works",
			For: "unprivileged CTs in PVE's user namespace (container root = host uid 100000)",
			Fix: "echo root:100000:65536 | " + sudo("tee -a /etc/subuid /etc/subgid")}
		if err != nil {
			c.Found = err.Error()
		}
		add(c)
	}

	r.Checks = append(r.Checks, templateChecks()...)

	add(cgroup2())
	add(memory())

	r.OK = true
	for i, c := range r.Checks {
		if c.OK {
			r.Checks[i].Fix = ""
		} else if c.Required {
			r.OK = false
		}
	}
	r.Containers = "lxc"
	if err := guest.CheckLXC(); err != nil {
		r.Containers = "refused (" + err.Error() + ")"
		if os.Getenv(guest.UnisolatedEnv) == "1" {
			r.Containers = "unisolated view, " + guest.UnisolatedEnv + "=1 (" + err.Error() + ")"
		}
	}
	r.RealTemplates, _ = RealTemplates()
	return r
}

// lxcTools checks that LXC's commands are installed.
func lxcTools() Check {
	var missing []string
	tools := guest.LXCTools
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	found := strings.Join(tools, ", ")
	if len(missing) > 0 {
		found = "missing " + strings.Join(missing, ", ")
	}
	return Check{Name: "lxc", OK: len(missing) == 0, Required: true, Found: found,
		For: "CTs as real LXC containers (without it the emulator refuses to start CTs)", Fix: sudo(guest.InstallLXC)}
}

// templateChecks check what the real Debian 12 template needs: the tools
// that build it, and whether it is built.
func templateChecks() []Check {
	var out []Check
	for _, tool := range []string{"mmdebstrap", "zstd"} {
		_, err := exec.LookPath(tool)
		c := Check{Name: tool, OK: err == nil, Found: tool + " found", For: "the real Debian 12 template (else a stand-in that boots no init)",
			Fix: sudo("apt-get install --no-install-recommends mmdebstrap zstd")}
		if err != nil {
			c.Found = tool + " not found"
		}
		out = append(out, c)
	}
	if p, err := model.RealTemplatePath(); err == nil {
		_, serr := os.Stat(p)
		c := Check{Name: "template", OK: serr == nil, Found: "built: " + p, For: "CTs of a real Debian 12 (built once, about 2.5 minutes, then cached)",
			Fix: "the first corral sim serve as root builds it (with lxc, mmdebstrap and zstd installed)"}
		if serr != nil {
			c.Found = "not built yet (" + p + ")"
		}
		out = append(out, c)
	}
	return out
}

// RealTemplates reports whether the served emulator should use the real
// Debian 12 template by default: it is built already, or this machine
// can build it and run it (root, mmdebstrap, zstd, LXC). Else why not and
// the command to get it.
func RealTemplates() (bool, string) {
	if p, err := model.RealTemplatePath(); err == nil {
		if _, err := os.Stat(p); err == nil && guest.CheckLXC() == nil {
			return true, ""
		}
	}
	var need []string
	if err := guest.CheckLXC(); err != nil {
		need = append(need, "containers: "+err.Error())
	}
	for _, tool := range []string{"mmdebstrap", "zstd"} {
		if _, err := exec.LookPath(tool); err != nil {
			need = append(need, tool+" not found ("+sudo("apt-get install --no-install-recommends mmdebstrap zstd")+")")
		}
	}
	if len(need) == 0 {
		return true, ""
	}
	return false, strings.Join(need, "; ")
}

// userNamespaces reads the kernel's switches for user namespaces.
func userNamespaces() Check {
	c := Check{Name: "userns", OK: true, For: "unprivileged CTs in a user namespace"}
	var found []string
	if b, err := os.ReadFile(procSys + "/user/max_user_namespaces"); err == nil {
		v := strings.TrimSpace(string(b))
		found = append(found, "user.max_user_namespaces="+v)
		if n, _ := strconv.Atoi(v); n == 0 {
			c.OK, c.Fix = false, sudo("sysctl -w user.max_user_namespaces=15000")
		}
	} else {
		c.OK, c.Fix = false, "use a kernel built with user namespaces (CONFIG_USER_NS)"
		found = append(found, "no /proc/sys/user/max_user_namespaces")
	}
	if b, err := os.ReadFile(procSys + "/kernel/unprivileged_userns_clone"); err == nil {
		v := strings.TrimSpace(string(b))
		found = append(found, "kernel.unprivileged_userns_clone="+v)
		if v == "0" && os.Geteuid() != 0 {
			c.OK, c.Fix = false, sudo("sysctl -w kernel.unprivileged_userns_clone=1")
		}
	}
	c.Found = strings.Join(found, ", ")
	return c
}

// subordinateIDs checks that root may map 100000..165535 (PVE's
// unprivileged CT map, model.CTIDMap) by file (/etc/subuid or
// /etc/subgid).
func subordinateIDs(name, file string) Check {
	c := Check{Name: name, For: "unprivileged CTs in PVE's user namespace (container root = host uid 100000)",
		Fix: "echo root:100000:65536 | " + sudo("tee -a "+file)}
	line, err := coveringRange(file, 100000, 65536)
	switch {
	case err != nil:
		c.Found = err.Error()
	case line == "":
		c.Found = "no range for root covering 100000-165535 in " + file
	default:
		c.OK, c.Found, c.Fix = true, file+": "+line, ""
	}
	return c
}

// coveringRange is the first line of file giving root (by name or uid 0)
// a range that covers start..start+count-1.
func coveringRange(file string, start, count int64) (string, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s does not exist", file)
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(parts) != 3 || (parts[0] != "root" && parts[0] != "0") {
			continue
		}
		s, err1 := strconv.ParseInt(parts[1], 10, 64)
		n, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 == nil && err2 == nil && s <= start && s+n >= start+count {
			return sc.Text(), nil
		}
	}
	return "", sc.Err()
}

// cgroup2 checks for the unified cgroup hierarchy, which PVE 8 and 9
// run (LXC's lxc.cgroup2.* limits); a hybrid host still runs CTs.
func cgroup2() Check {
	c := Check{Name: "cgroup2", For: "CT memory and CPU limits as PVE sets them (lxc.cgroup2.*)",
		Fix: "boot with systemd.unified_cgroup_hierarchy=1 (add it to GRUB_CMDLINE_LINUX in /etc/default/grub, then " + sudo("update-grub") + " and reboot)"}
	switch {
	case fileExists(cgroupRoot + "/cgroup.controllers"):
		c.OK, c.Found, c.Fix = true, "unified hierarchy at "+cgroupRoot, ""
	case fileExists(cgroupRoot + "/unified/cgroup.controllers"):
		c.Found = "hybrid: cgroup v1 controllers, v2 only at " + cgroupRoot + "/unified"
	default:
		c.Found = "no cgroup v2 at " + cgroupRoot
	}
	return c
}

// memory reports the host's memory and what the emulator makes of it.
func memory() Check {
	c := Check{Name: "memory", For: "running CTs: a start that does not fit the node's memory fails (sim serve --node-memory sets it)"}
	total, err := HostMemTotal()
	if err != nil {
		c.Found = err.Error()
		c.Fix = "give the nodes' memory with corral sim serve --node-memory SIZE"
		return c
	}
	avail := total - HostMemoryReserve(total)
	c.Found = fmt.Sprintf("MemTotal %d MiB; the nodes get %d MiB (about %d CTs of 512 MiB)", total>>20, avail>>20, avail/(512<<20))
	c.OK = avail >= 1<<30
	if !c.OK {
		c.Fix = "free memory or use a larger machine: fewer than two default CTs fit"
	}
	return c
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// HostMemoryReserve is what the host keeps for itself when the emulated
// nodes' memory comes from it: 2 GiB, or a quarter of MemTotal on small
// hosts.
func HostMemoryReserve(memTotal int64) int64 {
	return min(2<<30, memTotal/4)
}

// HostMemTotal is /proc/meminfo's MemTotal in bytes.
func HostMemTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo: MemTotal %q: %w", rest, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo: no MemTotal")
}
