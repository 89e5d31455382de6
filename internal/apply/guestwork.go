package apply

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/wait"
)

// GuestWork, Step, Account and Check are the plan's types: the value
// apply runs in the guest is the value the plan's digest and step
// checksums were hashed from (plan.GuestWorkOf builds it from the
// manifest).
type (
	GuestWork = plan.GuestWork
	Step      = plan.GuestStep
	Account   = plan.Account
	Check     = plan.Check
)

// SSH is how corral logs into containers.
type SSH struct {
	Signer ssh.Signer
	// AuthorizedKey is Signer's public key, added to every container
	// corral creates.
	AuthorizedKey string
	// Port is the guests' SSH port (22 on PVE).
	Port int
	// TrustNewHostKey accepts a container's host key when none is pinned
	// although corral did not just create it (e.g. a container made by an
	// older corral). A pinned key that differs is never accepted.
	TrustNewHostKey bool
	// ConnectTimeout bounds waiting for the guest's sshd after a start.
	ConnectTimeout time.Duration
}

// stepsDir is where each step's checksum is kept inside the guest, so a
// re-apply runs only what changed.
const stepsDir = "/var/lib/corral/steps"

// restartPending lists, one a line, the systemd units that steps which
// ran asked to restart and that have not been restarted yet: it outlives
// a failed apply, so the next one still restarts them.
const restartPending = "/var/lib/corral/restart-pending"

// guests does the work inside the apps' containers: it logs in over
// SSH, runs the steps the plan says changed, restarts units, checks
// health and records what was done in the container's config.
type guests struct {
	*runner
	ssh  SSH
	work map[string]GuestWork // by app (Executor.Guest)
	// vm: the guests are VMs (vmguest.go): their config, address, user
	// and host key trust are a VM's.
	vm bool
	// rekeyed: this run changed the VM's cloud-init data and restarted
	// it, so cloud-init made new host keys, trusted on first use again.
	rekeyed bool
}

// guests is the guest side of e, over its runner.
func (e *Executor) guests() *guests {
	return &guests{runner: e.ops(), ssh: e.SSH, work: e.Guest}
}

// legacyChecksum is the checksum older corrals recorded for a step,
// under its index (legacyKey): a record that matches it means unchanged.
func legacyChecksum(s Step) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%o\x00%s\x00%s\x00", s.Kind, s.Name, s.Script, s.Path, s.Mode, s.Owner, s.Project)
	h.Write(s.Body())
	if a := s.Account; a != nil {
		fmt.Fprintf(h, "\x00%s\x00%d\x00%s\x00%s\x00%s", a.Name, a.UID, a.Home, a.Shell, strings.Join(a.Groups, ","))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// runGuest provisions the container and checks its health, then records
// the digest so that the next plan knows the guest is up to date.
// justCreated allows trusting the host key on first use.
func (g *guests) runGuest(ctx context.Context, c plan.Change, vmid int, justCreated bool) error {
	work, ok := g.work[c.App]
	if !ok || (len(work.Steps) == 0 && len(work.Checks) == 0) {
		return nil
	}
	if g.ssh.Signer == nil {
		return fmt.Errorf("%s: provisioning needs corral's SSH key, and none was given", c.App)
	}
	c, work, err := g.withFacts(ctx, c, work)
	if err != nil {
		return err
	}
	var cl *guest.Client
	var conf map[string]string
	err = g.step(c.App, "ssh", "connect to "+g.noun()+" "+strconv.Itoa(vmid), func() error {
		var err error
		cl, conf, err = g.dialGuest(ctx, c.Node, vmid, justCreated)
		return err
	})
	if err != nil {
		return err
	}
	defer func() { cl.Close() }()
	if c.Desired != nil && c.Desired.NeedsKeyctl {
		// Checked after the first login, so that the host key is pinned
		// while corral may still trust it on first use.
		restarted, err := g.ensureKeyctl(ctx, c, vmid, conf)
		if err != nil {
			return err
		}
		if restarted {
			cl.Close()
			if err := g.step(c.App, "ssh", "reconnect to "+g.noun()+" "+strconv.Itoa(vmid), func() error {
				var err error
				cl, _, err = g.dialGuest(ctx, c.Node, vmid, false)
				return err
			}); err != nil {
				return err
			}
		}
	}

	done, pending, unavailable, err := g.doneSteps(ctx, cl)
	if err != nil {
		return fmt.Errorf("%s: read provisioning state: %w", c.App, err)
	}
	if unavailable != "" {
		g.warnUnavailable(c.App, work, unavailable)
		return nil
	}
	runs, restarts := decideSteps(work.Steps, done, work.Rerun, justCreated)
	if err := g.provision(ctx, c, vmid, cl, work.Steps, runs); err != nil {
		return err
	}
	if err := g.restartUnits(ctx, c.App, cl, pending, restarts); err != nil {
		return err
	}
	if err := g.runChecks(ctx, c.App, cl, work.Checks); err != nil {
		if c.Desired != nil {
			if merr := g.markStopped(ctx, c, vmid, len(c.Desired.Steps), err); merr != nil {
				g.obs().Warn(c.App, "could not record where provisioning stopped: "+merr.Error())
			}
		}
		return err
	}
	return g.markProvisioned(ctx, c, vmid)
}

// warnUnavailable tells plainly what of work did not run in app's
// container, which cannot run commands (only the emulator says this, on
// a machine without namespaces); the work stays pending.
func (g *guests) warnUnavailable(app string, work GuestWork, unavailable string) {
	var names []string
	for _, s := range work.Steps {
		names = append(names, "step "+s.Name)
	}
	for _, chk := range work.Checks {
		names = append(names, "health check "+chk.Name)
	}
	g.obs().Warn(app, fmt.Sprintf("the container cannot run commands here (%s); NOT run: %s. The plan keeps showing this work until it runs.",
		unavailable, strings.Join(names, "; ")))
}

// provision runs the steps that runs (decideSteps) says to run, each as
// one step event, and the others reported as skipped; a failed step
// records where provisioning stopped, so that the next run starts there.
func (g *guests) provision(ctx context.Context, c plan.Change, vmid int, cl *guest.Client, steps []Step, runs []plan.StepRun) error {
	for i, s := range steps {
		r := runs[i]
		if !r.Run {
			g.obs().Step(c.App, "provision", s.Name+" (unchanged, skipped)")(nil)
			continue
		}
		label := s.Name
		if strings.Contains(r.Why, "notified by ") || strings.HasPrefix(r.Why, plan.RerunWhy) {
			label += " (" + r.Why + ")"
		}
		if err := g.step(c.App, "provision", label, func() error {
			return g.runStep(ctx, c.App, cl, s, r.Recreate, dependents(steps, s.Name))
		}); err != nil {
			if merr := g.markStopped(ctx, c, vmid, i, err); merr != nil {
				g.obs().Warn(c.App, "could not record where provisioning stopped: "+merr.Error())
			}
			return err
		}
	}
	return nil
}

// Dial logs into the running guest of app for `corral exec` and `corral
// logs`: its container as root or, for a kind: vm app, its VM as the
// cloud-init user (vm.user), whose every command then runs through
// sudo, at the address provisioning uses (the static network.ip, else
// what the guest agent reports). The host key must be the one corral
// pinned (or, with SSH.TrustNewHostKey, is pinned now if there is none).
func (e *Executor) Dial(ctx context.Context, obs *plan.Observed, app string) (*guest.Client, error) {
	g := e.guests()
	if !IsVMApp(obs, app) {
		ct, err := AppCT(obs, app)
		if err != nil {
			return nil, err
		}
		return g.dial(ctx, ct)
	}
	vm, err := AppVM(obs, app)
	if err != nil {
		return nil, err
	}
	g.vm = true
	return g.dial(ctx, &plan.CT{VMID: vm.VMID, Node: vm.Node, Status: vm.Status, Config: vm.Config})
}

// dial is Dial.
func (g *guests) dial(ctx context.Context, ct *plan.CT) (*guest.Client, error) {
	if g.ssh.Signer == nil {
		return nil, errors.New("no SSH key for corral")
	}
	if ct.Status != "running" {
		return nil, fmt.Errorf("%s %d is %s; start it with `corral apply`", g.noun(), ct.VMID, ct.Status)
	}
	cl, _, err := g.dialGuest(ctx, ct.Node, ct.VMID, false)
	return cl, err
}

// dialGuest finds the guest's address and logs in, pinning the host key
// on first use. It returns the config it read, from before the pin.
func (g *guests) dialGuest(ctx context.Context, node string, vmid int, justCreated bool) (*guest.Client, map[string]string, error) {
	conf, err := g.guestConfig(ctx, node, vmid)
	if err != nil {
		return nil, nil, err
	}
	addr, err := g.address(ctx, node, vmid, conf)
	if err != nil {
		return nil, nil, err
	}
	m := plan.ParseMarker(conf["description"])
	policy, err := g.hostKeyPolicy(m, vmid, justCreated)
	if err != nil {
		return nil, nil, err
	}
	port := g.ssh.Port
	if port == 0 {
		port = 22
	}
	user := g.user(conf)
	cl, err := guest.Dial(ctx, net.JoinHostPort(addr, strconv.Itoa(port)), guest.Config{
		User: user, Sudo: user != "root", Signer: g.ssh.Signer, HostKey: policy, ConnectTimeout: g.connectTimeout(),
	})
	if err != nil {
		return nil, nil, g.dialError(err, vmid, user)
	}
	if policy.TrustOnFirstUse || len(policy.Fingerprints) > 0 {
		key := guest.AuthorizedKey(cl.HostKey())
		desc := plan.WithGuestMarkers(conf["description"], key, m.Provisioned)
		if err := g.putDescription(ctx, node, vmid, desc); err != nil {
			cl.Close()
			return nil, nil, fmt.Errorf("pin the host key of %s %d: %w", g.noun(), vmid, err)
		}
	}
	return cl, conf, nil
}

// address is the guest's IPv4 address, waited for (DHCP) up to the
// connect timeout.
func (g *guests) address(ctx context.Context, node string, vmid int, conf map[string]string) (string, error) {
	if g.vm {
		return g.vmAddress(ctx, node, vmid, conf)
	}
	ct := &plan.CT{VMID: vmid, Node: node, Status: "running", Config: conf}
	deadline := time.Now().Add(g.connectTimeout())
	for {
		addr, err := Address(ctx, g.client, ct)
		if err != nil || addr != "" {
			return addr, err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("ct %d has no IPv4 address on eth0 after %s (DHCP?); set a static network.ip", vmid, g.connectTimeout())
		}
		if err := wait.Sleep(ctx, time.Second); err != nil {
			return "", err
		}
	}
}

// hostKeyPolicy is which host key the guest must present, given its
// description's marker m: the pinned one; right after corral created
// the container, the keys its create task logged; else, on first
// contact, any (trust on first use), unless corral provisioned it
// already (a missing pin is then suspicious). A VM's keys are never
// logged: a VM corral just created, or whose cloud-init data it just
// changed (rekeyed), is trusted on first use.
func (g *guests) hostKeyPolicy(m plan.Marker, vmid int, justCreated bool) (guest.HostKeyPolicy, error) {
	policy := guest.HostKeyPolicy{VMID: vmid, VM: g.vm, Pinned: m.HostKey}
	if g.vm && (g.rekeyed || justCreated) {
		return guest.HostKeyPolicy{VMID: vmid, VM: true, TrustOnFirstUse: true}, nil
	}
	var logged []string
	if v, ok := g.createdKeys.Load(vmid); ok && justCreated && !g.vm {
		logged = v.([]string)
	}
	switch {
	case m.HostKey == "" && len(logged) > 0:
		// Right after corral created it: the create task logged the
		// container's new host keys, so only those are trusted.
		policy = guest.HostKeyPolicy{VMID: vmid, Fingerprints: logged}
	case m.HostKey == "":
		// First contact without logged keys (the template has no
		// /etc/ssh, or the create was not this run's): right after corral
		// created the container, or later if corral never logged in (stopped between create and
		// first login, or the app gained provisioning later) — the same
		// trust on first use either way. Once corral has provisioned a
		// guest, a missing pin is suspicious.
		if !justCreated && m.Provisioned != "" && !g.ssh.TrustNewHostKey {
			return policy, fmt.Errorf("%s %d has no SSH host key pinned by corral, and corral did not just create it, so it cannot tell the %s from an impostor; "+
				"run apply with --trust-host-key once if you know the %s is genuine", g.noun(), vmid, g.what(), g.what())
		}
		policy = guest.HostKeyPolicy{VMID: vmid, VM: g.vm, TrustOnFirstUse: true}
	}
	return policy, nil
}

// dialError says what to do about a failed login as user.
func (g *guests) dialError(err error, vmid int, user string) error {
	var hk *guest.HostKeyError
	switch {
	case errors.As(err, &hk) && hk.Logged:
		return err
	case errors.As(err, &hk) && g.vm:
		return fmt.Errorf("%w: the VM's SSH host key changed since corral pinned it; if the VM was rebuilt outside corral, remove the corral-hostkey line from its Notes (Datacenter > VM > Notes) and run apply with --trust-host-key", err)
	case errors.As(err, &hk):
		return fmt.Errorf("%w: the container's SSH host key changed since corral pinned it; if the container was rebuilt outside corral, remove the corral-hostkey line from its description (Datacenter > CT > Notes) and run apply with --trust-host-key", err)
	case strings.Contains(err.Error(), "unable to authenticate") && g.vm:
		return fmt.Errorf("%w: corral's SSH key is not authorized for user %s in vm %d (corral adds it to the cloud-init keys, sshkeys, of a VM it creates; a VM created elsewhere needs corral's key there, and a restart)", err, user, vmid)
	case strings.Contains(err.Error(), "unable to authenticate"):
		return fmt.Errorf("%w: corral's SSH key is not authorized in ct %d (corral adds it when it creates a container; a container created elsewhere needs the key from `corral` in /root/.ssh/authorized_keys)", err, vmid)
	}
	return err
}

// ensureKeyctl makes sure keyctl=1 is active for a Docker app (conf is
// the container's active config): a value root set while the container
// ran is pending until a restart, which corral does; a missing one stops
// apply with root's command.
func (g *guests) ensureKeyctl(ctx context.Context, c plan.Change, vmid int, conf map[string]string) (restarted bool, err error) {
	switch {
	case plan.HasFeature(conf["features"], "keyctl"):
		return false, nil
	case g.keyctlPending(ctx, c.Node, vmid):
		// Set by root while the container ran: PVE applies it at the
		// next start.
		return true, g.step(c.App, "restart", "to apply keyctl=1 set by root", func() error {
			if err := g.ensureStopped(ctx, c.App, c.Node, vmid); err != nil {
				return err
			}
			return g.start(ctx, c.App, c.Node, vmid)
		})
	}
	return false, fmt.Errorf("%s: Docker in an unprivileged container needs keyctl=1, which only root@pam can set; "+
		"run once as root on node %s:\n    %s\nthen run `corral apply` again (the container is up; nothing was provisioned yet)",
		c.App, c.Node, plan.KeyctlCommand(vmid))
}

// keyctlPending reports whether keyctl=1 waits in the CT's pending changes.
func (g *guests) keyctlPending(ctx context.Context, node string, vmid int) bool {
	pending, err := g.client.Pending(ctx, node, vmid)
	if err != nil {
		return false
	}
	for _, p := range pending {
		if p.Pending != nil && p.Key == "features" && plan.HasFeature(string(*p.Pending), "keyctl") {
			return true
		}
	}
	return false
}

func (g *guests) connectTimeout() time.Duration {
	if g.ssh.ConnectTimeout > 0 {
		return g.ssh.ConnectTimeout
	}
	return 3 * time.Minute
}

// stepKey is where a step's checksum is recorded in the guest: under
// plan.StepID of its name. legacyKey is the key older corral versions
// used (the step's index), read when the new one is missing so that an
// upgrade reruns nothing.
func stepKey(s Step) string { return plan.StepID(s.Name) }

func legacyKey(i int) string { return fmt.Sprintf("%03d", i) }

// decideSteps says which steps run (plan.DecideSteps against the
// checksums recorded in the guest) and which units restart after them.
func decideSteps(steps []Step, done map[string]string, rerun []string, fresh bool) ([]plan.StepRun, []plan.UnitRestart) {
	ps := make([]plan.Step, len(steps))
	index := map[string]int{}
	for i, s := range steps {
		ps[i] = s.Summary()
		index[s.Name] = i
	}
	return plan.DecideSteps(ps, fresh, func(p plan.Step) string {
		if slices.Contains(rerun, p.Name) {
			return plan.RerunWhy
		}
		rec, ok := done[plan.StepID(p.Name)]
		legacy := false
		if !ok {
			rec, ok = done[legacyKey(index[p.Name])]
			legacy = ok
		}
		switch {
		case !ok:
			return "new step"
		case rec == p.Sum:
			return ""
		case legacy && rec == legacyChecksum(steps[index[p.Name]]):
			// Recorded by an older corral, with its checksum: unchanged.
			return ""
		}
		return "changed"
	})
}

// dependents are the record files of the steps that name step in their
// onChange (under both keys): removed when step runs, before its own
// checksum is recorded, so that a dependent not reached because a step
// in between failed still runs at the next apply.
func dependents(steps []Step, name string) []string {
	var out []string
	for i, s := range steps {
		for _, n := range s.OnChange {
			if n == name {
				out = append(out, stepsDir+"/"+stepKey(s)+".sha256", stepsDir+"/"+legacyKey(i)+".sha256")
				break
			}
		}
	}
	return out
}

// restartUnits restarts, once each, the units that steps which ran asked
// for, with those a failed apply left pending, and then forgets them.
func (g *guests) restartUnits(ctx context.Context, app string, cl *guest.Client, pending []string, restarts []plan.UnitRestart) error {
	because := map[string]string{}
	var units []string
	for _, u := range pending {
		if _, ok := because[u]; !ok {
			units = append(units, u)
			because[u] = "pending from an apply that stopped before it"
		}
	}
	for _, r := range restarts {
		if _, ok := because[r.Unit]; !ok {
			units = append(units, r.Unit)
		}
		because[r.Unit] = "because " + strings.Join(r.Because, " and ") + " ran"
	}
	for _, u := range units {
		script := "if ! command -v systemctl >/dev/null 2>&1; then echo 'systemctl is not in the container: restart: needs systemd' >&2; exit 127; fi; systemctl restart -- " + guest.ShellQuote(u)
		if err := g.step(app, "restart", u+" ("+because[u]+")", func() error {
			return g.exec(ctx, app, cl, script, nil, false, 0, "restart "+u)
		}); err != nil {
			return err
		}
	}
	if len(units) == 0 {
		return nil
	}
	return cl.Exec(ctx, guest.Command{Script: "rm -f " + restartPending})
}

// doneSteps reads the checksums of the steps done before (key →
// checksum) and the restarts left pending. unavailable is the emulator's
// reason when the guest cannot run commands at all.
func (g *guests) doneSteps(ctx context.Context, cl *guest.Client) (done map[string]string, pending []string, unavailable string, err error) {
	var out, errOut bytes.Buffer
	script := "for f in " + stepsDir + "/*.sha256; do [ -f \"$f\" ] && printf '%s %s\\n' \"$(basename \"$f\" .sha256)\" \"$(cat \"$f\")\"; done; " +
		"[ -f " + restartPending + " ] && sed 's/^/!restart /' " + restartPending + "; true"
	err = cl.Exec(ctx, guest.Command{Script: script, OnLine: func(s guest.Stream, line string) {
		if s == guest.Stdout {
			out.WriteString(line + "\n")
		} else {
			errOut.WriteString(line + "\n")
		}
	}})
	var ee *guest.ExitError
	if errors.As(err, &ee) && ee.Code == 126 && strings.Contains(errOut.String(), "guest exec unavailable") {
		return nil, nil, strings.TrimSpace(errOut.String()), nil
	}
	if err != nil {
		return nil, nil, "", err
	}
	done = map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if u, ok := strings.CutPrefix(line, "!restart "); ok {
			if u = strings.TrimSpace(u); u != "" {
				pending = append(pending, u)
			}
			continue
		}
		if id, sum, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			done[id] = sum
		}
	}
	return done, pending, "", nil
}

// runStep runs one step and records its checksum, after it removed the
// records of the steps that react to it (deps) and noted the units it
// restarts. Output lines stream to the observer, except a secret step's,
// which shows only that it ran.
func (g *guests) runStep(ctx context.Context, app string, cl *guest.Client, s Step, recreate bool, deps []string) error {
	script, stdin := stepScript(s, recreate)
	if err := g.exec(ctx, app, cl, script, stdin, s.Secret(), s.Timeout, s.Name); err != nil {
		return err
	}
	q := guest.ShellQuote
	var record strings.Builder
	record.WriteString("set -e; mkdir -p " + stepsDir)
	if len(deps) > 0 {
		record.WriteString("; rm -f")
		for _, d := range deps {
			record.WriteString(" " + q(d))
		}
	}
	for _, u := range s.Restart {
		record.WriteString("; printf '%s\\n' " + q(u) + " >> " + restartPending)
	}
	record.WriteString("; printf '%s' " + s.Sum() + " > " + stepsDir + "/" + stepKey(s) + ".sha256")
	return cl.Exec(ctx, guest.Command{Script: record.String()})
}

// exec runs a script of a step (named name) with a timeout, streaming its
// output unless secret; a failure carries the last lines of output.
func (g *guests) exec(ctx context.Context, app string, cl *guest.Client, script string, stdin io.Reader, secret bool, timeout time.Duration, name string) error {
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var tail []string
	onLine := func(stream guest.Stream, line string) {
		if secret {
			return
		}
		g.obs().TaskLog(app, "", line)
		tail = append(tail, line)
		if len(tail) > 20 {
			tail = tail[1:]
		}
	}
	err := cl.Exec(sctx, guest.Command{Script: script, Stdin: stdin, OnLine: onLine})
	if err != nil {
		if sctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return fmt.Errorf("step %q did not finish within %s (set timeout: on the step)", name, timeout)
		}
		var ee *guest.ExitError
		if errors.As(err, &ee) && len(tail) > 0 {
			return fmt.Errorf("step %q failed: %w; last output:\n  %s", name, err, strings.Join(tail, "\n  "))
		}
		return fmt.Errorf("step %q failed: %w", name, err)
	}
	return nil
}

// runShell runs a run step's script, read from stdin.
const runShell = "if command -v bash >/dev/null 2>&1; then exec bash -euo pipefail -s; fi; " +
	"if (set -o pipefail) 2>/dev/null; then exec sh -e -o pipefail -s; fi; exec sh -e -s"

// stepScript is the shell script (and its stdin) that performs s;
// recreate makes a compose step recreate its services (a step it reacts
// to ran: an env file the services read may have changed).
func stepScript(s Step, recreate bool) (string, io.Reader) {
	switch s.Kind {
	case "run":
		// bash -euo pipefail where there is bash: `curl … | bash` with no
		// network must fail, not "succeed" and be skipped from then on.
		// POSIX sh -e (plus pipefail where that sh knows it) otherwise.
		return runShell, bytes.NewReader([]byte(s.Script))
	case "file", "envFile", "compose":
		return fileScript(s, recreate)
	case "user":
		return userScript(s.Account)
	}
	return "echo 'unknown step kind " + s.Kind + "' >&2; exit 2", strings.NewReader("")
}

// fileScript writes a file, envFile or compose step's body (its stdin)
// to a temporary file beside the path, then moves it into place with its
// mode and owner, making the missing parents first; a compose step then
// brings the project up.
func fileScript(s Step, recreate bool) (string, io.Reader) {
	q := guest.ShellQuote
	tmp := s.Path + ".corral-new"
	var b strings.Builder
	// Missing parents are made 0755 and given to the file's owner: a
	// file app may read must not sit in a root-only directory (on a
	// retained volume such a directory would outlive every recreate).
	dir := q(dirOf(s.Path))
	fmt.Fprintf(&b, "set -e; new=$(p=%s; while [ ! -e \"$p\" ]; do printf '%%s\\n' \"$p\"; p=$(dirname \"$p\"); done)", dir)
	// undo removes what this step made before it failed: a file
	// step whose owner does not exist must not leave root-owned
	// directories behind (issue 32 item 1).
	fmt.Fprintf(&b, "; undo() { rm -f %s; printf '%%s\\n' \"$new\" | while IFS= read -r d; do [ -z \"$d\" ] || rmdir \"$d\" 2>/dev/null || true; done; }", q(tmp))
	if s.Owner != "" {
		// The directories get the owner's group too: USER:GROUP as
		// written, USER with USER's login group, a numeric USER
		// that names no account alone (chown rejects "1000:").
		fmt.Fprintf(&b, "; o=%s; case \"$o\" in *:*) ;; *) if g=$(id -g \"$o\" 2>/dev/null); then o=\"$o:$g\"; fi ;; esac", q(s.Owner))
		fmt.Fprintf(&b, "; bad() { undo; echo %s >&2; exit 1; }", q(fmt.Sprintf("owner %s: no such user or group in the container; create it with a user step before this step, or write USER, USER:GROUP or numeric ids", s.Owner)))
	}
	fmt.Fprintf(&b, "; (umask 022; mkdir -p %s)", dir)
	if s.Owner != "" {
		b.WriteString("; printf '%s\\n' \"$new\" | while IFS= read -r d; do [ -z \"$d\" ] || chown \"$o\" \"$d\" || exit 1; done || bad")
	}
	fmt.Fprintf(&b, "; umask 077; cat > %s || { undo; exit 1; }; chmod %o %s", q(tmp), s.Mode, q(tmp))
	if s.Owner != "" {
		fmt.Fprintf(&b, "; chown %s %s || bad", q(s.Owner), q(tmp))
	}
	fmt.Fprintf(&b, "; mv -f %s %s", q(tmp), q(s.Path))
	if s.Kind == "compose" {
		fmt.Fprintf(&b, "; if ! command -v docker >/dev/null 2>&1; then echo 'docker is not installed in the container: add a run step that installs it (for example apt-get install -y docker.io docker-compose) before this compose step' >&2; exit 127; fi")
		fmt.Fprintf(&b, "; if ! docker compose version >/dev/null 2>&1; then echo 'docker compose is not available in the container: install the compose plugin (Debian: docker-compose, or docker-compose-plugin from Docker) in a run step before this compose step' >&2; exit 127; fi")
		if s.PullAlways {
			fmt.Fprintf(&b, "; docker compose -p %s -f %s pull", q(s.Project), q(s.Path))
		}
		fmt.Fprintf(&b, "; docker compose -p %s -f %s up -d --remove-orphans", q(s.Project), q(s.Path))
		if recreate {
			b.WriteString(" --force-recreate")
		}
	}
	return b.String(), bytes.NewReader(s.Body())
}

// userScript makes account a, unless it exists, with its groups and home.
func userScript(a *Account) (string, io.Reader) {
	q := guest.ShellQuote
	var b strings.Builder
	home := a.Home
	if home == "" {
		home = "/home/" + a.Name
	}
	// A home that exists already (a volume mounted there) is not
	// made again: useradd -m would warn that it exists and copies
	// no skeleton into it, a warning that reads like a fault.
	fmt.Fprintf(&b, "set -e; if ! id -u %s >/dev/null 2>&1; then m=-m; if [ -d %s ]; then m=-M; fi; useradd $m", q(a.Name), q(home))
	if a.UID > 0 {
		fmt.Fprintf(&b, " -u %d", a.UID)
	}
	if a.Home != "" {
		fmt.Fprintf(&b, " -d %s", q(a.Home))
	}
	if a.Shell != "" {
		fmt.Fprintf(&b, " -s %s", q(a.Shell))
	}
	fmt.Fprintf(&b, " %s; fi", q(a.Name))
	if len(a.Groups) > 0 {
		fmt.Fprintf(&b, "; usermod -aG %s %s", q(strings.Join(a.Groups, ",")), q(a.Name))
	}
	if a.Home != "" {
		// A volume mounted at the home (seed 001: /home/hermes) is
		// created by root; the user must own it.
		fmt.Fprintf(&b, "; mkdir -p %s; chown %s: %s", q(a.Home), q(a.Name), q(a.Home))
	}
	return b.String(), strings.NewReader("")
}

func dirOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// checkHealth runs a check until it passes or its retries are spent; the
// error carries the last attempt's output.
func (g *guests) checkHealth(ctx context.Context, cl *guest.Client, chk Check) error {
	timeout, interval, attempts := chk.Timeout, chk.Interval, chk.Retries+1
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if interval <= 0 {
		interval = 3 * time.Second
	}
	if attempts <= 0 {
		attempts = 1
	}
	secs := strconv.Itoa(int((timeout + time.Second - 1) / time.Second))
	q := guest.ShellQuote
	var script string
	switch chk.Kind {
	case "http":
		expect := chk.Expect
		if expect == 0 {
			expect = 200
		}
		script = fmt.Sprintf(`code=$(curl -sS -o /dev/null -w '%%{http_code}' --max-time %s %s 2>&1) || code=$(wget -q -S -O /dev/null -T %s %s 2>&1 | awk '/HTTP\//{c=$2} END{print c}') || true; `+
			`[ "$code" = "%d" ] && exit 0; echo "HTTP status ${code:-none}, want %d"; exit 1`, secs, q(chk.URL), secs, q(chk.URL), expect, expect)
	case "tcp":
		host, port, _ := net.SplitHostPort(chk.Address)
		// host and port reach bash as arguments, never as script text.
		script = fmt.Sprintf(`if command -v bash >/dev/null; then timeout %s bash -c 'exec 3<>"/dev/tcp/$1/$2"' bash %s %s && exit 0; else nc -z -w %s %s %s && exit 0; fi; echo %s; exit 1`,
			secs, q(host), q(port), secs, q(host), q(port), q("nothing listens on "+chk.Address))
	case "command":
		script = fmt.Sprintf("timeout %s sh -c %s", secs, q(chk.Command))
	default:
		return fmt.Errorf("unknown health check kind %q", chk.Kind)
	}
	var last []string
	var err error
	for attempt := 1; attempt <= attempts; attempt++ {
		last = nil
		err = cl.Exec(ctx, guest.Command{Script: script, OnLine: func(_ guest.Stream, line string) {
			if len(last) < 20 {
				last = append(last, line)
			}
		}})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt < attempts {
			if err := wait.Sleep(ctx, interval); err != nil {
				return err
			}
		}
	}
	return &HealthError{Check: chk.Name, Attempts: attempts, Err: err, Output: last}
}

// markStopped records in the description that provisioning stopped at
// step i (see plan.Marker.Stopped), so that plan and status say so
// without logging in: the steps before it are recorded as done, the
// steps after it keep what the last finished apply recorded.
func (g *guests) markStopped(ctx context.Context, c plan.Change, vmid, i int, cause error) error {
	if c.Desired == nil || i > len(c.Desired.Steps) {
		return nil
	}
	name := plan.HealthStop // i == len: every step finished, a health check failed
	if i < len(c.Desired.Steps) {
		name = c.Desired.Steps[i].Name
	}
	conf, err := g.guestConfig(ctx, c.Node, vmid)
	if err != nil {
		return err
	}
	m := plan.ParseMarker(conf["description"])
	steps := plan.PartialStepsRecord(c.Desired.Steps, i, m.Steps)
	desc := plan.WithGuestRecord(conf["description"], m.HostKey, m.Provisioned, steps)
	desc += plan.StoppedMarker(i, len(c.Desired.Steps), name, cause.Error())
	return g.putDescription(ctx, c.Node, vmid, desc)
}

// markProvisioned records the guest digest in the description.
func (g *guests) markProvisioned(ctx context.Context, c plan.Change, vmid int) error {
	conf, err := g.guestConfig(ctx, c.Node, vmid)
	if err != nil {
		return err
	}
	m := plan.ParseMarker(conf["description"])
	desc := plan.WithGuestRecord(conf["description"], m.HostKey, c.Desired.GuestDigest, plan.StepsRecord(c.Desired.Steps))
	return g.putDescription(ctx, c.Node, vmid, desc)
}
