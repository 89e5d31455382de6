package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/hostcheck"
	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/localfile"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/ui"
)

// corral agent install deploys the agent as an app of a small manifest
// of its own; agent.Install does the work (see internal/agent's
// install.go), and this file parses its flags and renders it.

type agentInstallArgs struct {
	ff        fileFlags
	cf        connFlags
	node      string
	template  string
	storage   string
	bridge    string
	memory    int
	endpoint  string // the API endpoint the agent uses inside its container
	listen    string
	interval  time.Duration
	mode      string
	binary    string
	passEnv   []string
	role      string
	user      string
	tokenName string
	git       gitFlags
	trust     bool
	// allowedHosts are the agent's --allowed-host names.
	allowedHosts []string
}

func newAgentInstallCmd(st *streams) *cobra.Command {
	a := &agentInstallArgs{}
	cmd := &cobra.Command{
		Use:         "install",
		Annotations: jsonForm(),
		Short:       "Run the agent in a container of its own on the cluster, under systemd",
		Long: `install deploys corral agent as an app of a small manifest of its own
(project corral-agent-<project>, app "agent"), applied as corral apply
does: it creates (or keeps) the container, copies this corral binary and
the manifest in, gives the agent an API token of its own with exactly the
privileges the manifest needs (the role, user and token of
corral doctor --print-setup, created through the API when this token may;
otherwise install prints the pveum commands and stops), writes a systemd
unit (Restart=always) with the token in a 0600 environment file, and
starts it. Where the container has no systemd as its init, the agent is
started as a detached process, and install says so.

Running install again updates the binary, manifest, token and unit and
restarts the agent, in the same container.

The agent listens on the container's address, port 9120, with a bearer
token of its own; corral agent status -f corral.yaml finds both.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgentInstall(cmd, st, a) },
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&a.node, "node", "", "node of the agent's container (default: placed as any app)")
	fl.StringVar(&a.template, "template", "", "template of the agent's container (default: the manifest's first app's)")
	fl.StringVar(&a.storage, "storage", "", "root storage of the agent's container (default: the manifest's first app's)")
	fl.StringVar(&a.bridge, "bridge", "", "bridge of the agent's container (default: the manifest's first app's)")
	fl.IntVar(&a.memory, "memory", 512, "memory of the agent's container in MiB")
	fl.StringVar(&a.endpoint, "agent-endpoint", "", "API endpoint the agent uses from inside its container (default: the one install uses)")
	fl.StringVar(&a.listen, "listen", "", "the agent's --listen inside its container (default: the container's address, port 9120)")
	fl.DurationVar(&a.interval, "interval", time.Minute, "the agent's --interval")
	fl.StringVar(&a.mode, "mode", "reconcile", "the agent's --mode: observe or reconcile")
	fl.StringVar(&a.binary, "binary", "", "the corral binary to install (default: this one; a Linux binary of the container's architecture)")
	fl.StringSliceVar(&a.passEnv, "pass-env", nil, "environment variables the manifest reads with ${env:…} to pass into the agent's 0600 environment file")
	fl.StringVar(&a.role, "role", "", "role of the agent's token (default CorralAgent-<project>)")
	fl.StringVar(&a.user, "user", "", "user of the agent's token (default corral-agent-<project>@pve)")
	fl.StringVar(&a.tokenName, "token-name", "agent", "name of the agent's token")
	fl.BoolVar(&a.trust, "trust-host-key", false, "accept the agent container's SSH host key when corral has none pinned")
	fl.StringSliceVar(&a.allowedHosts, "allowed-host", nil, "the agent's --allowed-host: another name its server answers to in the Host header (repeatable)")
	a.git.add(fl)
	return cmd
}

func newAgentUninstallCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var user, tokenName string
	cmd := &cobra.Command{
		Use:         "uninstall",
		Annotations: jsonForm(),
		Short:       "Remove the agent's container and its API token",
		Long: `uninstall destroys the agent's container (as corral destroy does, for the
agent's own manifest) and deletes the agent's API token. The role and the
user stay (pveum user delete / role delete remove them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgentUninstall(cmd, st, ff, cf, user, tokenName)
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().StringVar(&user, "user", "", "user of the agent's token (default corral-agent-<project>@pve)")
	cmd.Flags().StringVar(&tokenName, "token-name", "agent", "name of the agent's token")
	return cmd
}

// runAgentInstall is corral agent install: parse and check the flags,
// connect, agent.Install, render.
func runAgentInstall(cmd *cobra.Command, st *streams, a *agentInstallArgs) error {
	asJSON, err := a.ff.json()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	s, err := a.useLocalEmulator(ctx, st)
	if err != nil {
		return err
	}
	in, cf, err := a.installation()
	if s == nil && err == nil {
		s, err = connect(ctx, st, cf)
	}
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		return err
	}
	res, err := agent.Install(ctx, in, a.installOps(cmd, st, s.client, cf))
	if need, ok := errors.AsType[*agent.SetupNeededError](err); ok {
		io.WriteString(st.out, in.Manifest.Redact(need.Script))
	}
	if err != nil {
		return redactErr(in.Manifest, err)
	}
	if asJSON {
		return writeJSON(st, res)
	}
	ui.WriteAgentInstalled(st.err, st.out, *res, a.mode, a.ff.path)
	return nil
}

// useLocalEmulator points install at corral's local emulator (started
// when none runs) when no endpoint is configured, as every other command
// does, with root@pam's token from its env file (the user owns the
// local emulator as root owns a node: install makes the agent's user,
// role and token with it, and the agent gets only its own token). The in-process emulator of the
// tests (CORRAL_SIM_INPROCESS=1) stops with the command: check refuses it.
func (a *agentInstallArgs) useLocalEmulator(ctx context.Context, st *streams) (*session, error) {
	if a.cf.resolved(os.Getenv).endpoint != "" || os.Getenv(inProcessEnv) == "1" {
		return nil, nil
	}
	ls, err := connectLocal(ctx, st, true, st.logger())
	if err != nil {
		return nil, err
	}
	ls.Close()
	tok, err := newLocalDaemon().rootToken()
	if err != nil {
		return nil, err
	}
	a.cf.endpoint, a.cf.token, a.cf.fingerprint = ls.local.URL, tok, ls.local.Fingerprint
	a.cf.guestSSHPort = ls.local.GuestSSHPort
	return connectTo(ctx, st, a.cf, false)
}

// simSSHPort is the guests' SSH port the agent is told about (its
// CORRAL_SIM_GUEST_SSH_PORT): the local emulator's, or this command's.
func simSSHPort(cf connFlags) string {
	if p := cf.knownGuestSSHPort(); p != 0 {
		return strconv.Itoa(p)
	}
	return os.Getenv("CORRAL_SIM_GUEST_SSH_PORT")
}

// installation checks install's flags and reads what the agent gets
// from here (the manifest, the binary, the --pass-env values), before
// anything is asked of the cluster. It returns the connection flags
// resolved from the environment too.
func (a *agentInstallArgs) installation() (*agent.Installation, connFlags, error) {
	cf, err := a.check()
	if err != nil {
		return nil, cf, err
	}
	if err := a.ff.single("corral agent install"); err != nil {
		return nil, cf, err
	}
	f, err := loadManifest(a.ff.path, true)
	if err != nil {
		return nil, cf, err
	}
	if !f.ProjectSet {
		return nil, cf, agentNeedsProject(a.ff.path, f.Project)
	}
	manifestData, err := localfile.Read(a.ff.path, localfile.MaxManifest)
	if err != nil {
		return nil, cf, err
	}
	bin, err := a.binaryPath()
	if err != nil {
		return nil, cf, err
	}
	binArch, err := agent.BinaryArch(bin)
	if err != nil {
		return nil, cf, err
	}
	env, err := a.passEnvValues()
	if err != nil {
		return nil, cf, err
	}
	own, err := agent.ManifestText(f, agent.Container{Node: a.node, Template: a.template, Storage: a.storage, Bridge: a.bridge, Memory: a.memory, Git: a.git.url != ""})
	if err != nil {
		return nil, cf, err
	}
	return &agent.Installation{
		Manifest: f, ManifestData: manifestData, Own: own,
		Setup: agent.SetupFor(f, a.role, a.user, a.tokenName), TokenName: a.tokenName, GivenToken: os.Getenv("CORRAL_AGENT_API_TOKEN"),
		Command: a.command(), Binary: bin, BinaryArch: binArch, Listen: a.listen,
		Endpoint: a.endpoint, APIEndpoint: cf.endpoint, Fingerprint: cf.fingerprint,
		Env: env, SimGuestSSHPort: simSSHPort(cf),
	}, cf, nil
}

// agentNeedsProject refuses to install an agent for a manifest whose
// project is its directory's name: the agent applies a copy at another
// path (or a Git checkout), which corral counts as another manifest, and
// under a defaulted project one manifest changes, removes or prunes none
// of the apps another declared (docs/manifest.md, "Who declared an
// app"). The agent would refuse every change from its first run.
func agentNeedsProject(path, project string) error {
	return fmt.Errorf("agent install: %s sets no project: (its project %q is its directory's name), and the agent would apply a copy of it, "+
		"which corral counts as another manifest and lets change none of the apps this one declared; "+
		"add `project: %s` at the top of %s (the name it has now, so nothing else changes), then run corral agent install again", path, project, project, path)
}

// check checks the flags of the agent's command line and the connection
// install hands to the agent, which must be one it can use from its
// container and trust without --insecure.
func (a *agentInstallArgs) check() (connFlags, error) {
	if a.mode != "observe" && a.mode != "reconcile" {
		return connFlags{}, fmt.Errorf("--mode %q: want observe or reconcile", a.mode)
	}
	if a.interval < time.Second {
		return connFlags{}, fmt.Errorf("--interval %s: want 1s or more", a.interval)
	}
	if err := hostcheck.CheckNames("--allowed-host", a.allowedHosts); err != nil {
		return connFlags{}, err
	}
	if a.git.url == "" {
		a.git.url = os.Getenv(gitURLEnv) // a password stays off this command line too
	}
	if err := a.git.check(); err != nil {
		return connFlags{}, err
	}
	cf := a.cf.resolved(os.Getenv)
	if cf.endpoint == "" {
		return cf, fmt.Errorf("corral agent install needs an endpoint it can hand to the agent, and the emulator inside this command (%s=1) stops with it: set PROXMOX_VE_ENDPOINT, or unset %s to install it on corral's local emulator", inProcessEnv, inProcessEnv)
	}
	if cf.insecure || cf.plainHTTP {
		return cf, errors.New("corral agent install copies the API settings into the container: pin the certificate (--fingerprint or --ca-file) instead of --insecure or plain http")
	}
	return cf, nil
}

// binaryPath is the corral binary to install: --binary, else this one
// when it is built for Linux.
func (a *agentInstallArgs) binaryPath() (string, error) {
	if a.binary != "" {
		return a.binary, nil
	}
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("this corral is built for %s: build one for linux and the container's architecture and pass --binary", runtime.GOOS)
	}
	bin, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this corral binary: %w; pass --binary", err)
	}
	return bin, nil
}

// envNameRe is a variable name --pass-env accepts.
var envNameRe = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// passEnvValues are the values of --pass-env's variables here, which go
// into the agent's environment file; corral's own and install's are
// refused (install sets them itself).
func (a *agentInstallArgs) passEnvValues() (map[string]string, error) {
	env := map[string]string{}
	for _, name := range a.passEnv {
		if !envNameRe.MatchString(name) {
			return nil, fmt.Errorf("--pass-env %q: want a variable name (letters, digits and _)", name)
		}
		if strings.HasPrefix(name, "PROXMOX_VE_") || strings.HasPrefix(name, "CORRAL_") || name == "HOME" || name == "XDG_STATE_HOME" {
			return nil, fmt.Errorf("--pass-env %s: install sets that variable itself", name)
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			return nil, fmt.Errorf("--pass-env %s: not set here", name)
		}
		env[name] = v
	}
	return env, nil
}

// command is the installed agent's command line, from install's flags.
func (a *agentInstallArgs) command() agent.Command {
	return agent.Command{Mode: agent.Mode(a.mode), Interval: a.interval, AllowedHosts: a.allowedHosts,
		GitURL: a.git.url, GitArgs: a.git.args(), PassEnv: a.passEnv}
}

// installOps are agent.Install's ways into the cluster through corral's
// own commands: apply for the agent's container (its plan and progress
// on stderr: stdout is install's own answer), the SSH login of corral
// exec, and the files of corral's own the agent gets.
func (a *agentInstallArgs) installOps(cmd *cobra.Command, st *streams, c *pve.Client, cf connFlags) agent.InstallOps {
	return agent.InstallOps{
		Client: c,
		Apply: func(_ context.Context, path string) error {
			ast := &streams{in: strings.NewReader(""), out: st.err, err: st.err}
			aa := &applyArgs{ff: fileFlags{path: path}, cf: a.cf, lf: lockFlags{timeout: 5 * time.Minute}, parallelism: 1, autoApprove: true, lockWait: 2 * time.Minute, trustHostKey: a.trust}
			return runApply(cmd, ast, aa)
		},
		Container: func(ctx context.Context, path string) (*plan.CT, error) {
			j, err := openJob(ctx, st, fileFlags{path: path, lazy: true}, a.cf)
			if err != nil {
				return nil, err
			}
			defer j.Close()
			return appCT(ctx, j, agent.InstalledApp)
		},
		Guest: func(ctx context.Context, path string, fn func(*guest.Client) error) error {
			return withGuest(ctx, st, fileFlags{path: path}, a.cf, a.trust, agent.InstalledApp, fn)
		},
		Endpoint: func(ctx context.Context, cl *guest.Client) (string, error) { return agentEndpoint(ctx, cl, cf) },
		Secrets: func() (ca, key []byte, err error) {
			if cf.caFile != "" {
				if ca, err = localfile.Read(cf.caFile, localfile.MaxPEM); err != nil {
					return nil, nil, fmt.Errorf("--ca-file: %w", err)
				}
			}
			id, err := loadIdentity()
			if err != nil {
				return nil, nil, err
			}
			if key, err = localfile.Read(id.path, localfile.MaxKey); err != nil {
				return nil, nil, fmt.Errorf("read corral's SSH key: %w", err)
			}
			return ca, key, nil
		},
		Event: func(e agent.InstallEvent) { ui.WriteAgentInstallEvent(st.err, e) },
	}
}

// loadAgentManifest loads the user's manifest at path and writes the
// agent's own for it (uninstall and status find the agent's container by
// it; the template and sizes do not matter to them); cleanup removes it.
func loadAgentManifest(path string) (f *manifest.File, am string, cleanup func(), err error) {
	f, err = loadManifest(path, true)
	if err != nil {
		return nil, "", nil, err
	}
	text, err := agent.ManifestText(f, agent.Container{Memory: 512})
	if err != nil {
		return nil, "", nil, err
	}
	am, cleanup, err = agent.WriteOwnManifest(text)
	return f, am, cleanup, err
}

func runAgentUninstall(cmd *cobra.Command, st *streams, ff fileFlags, cf connFlags, user, tokenName string) error {
	asJSON, err := ff.json()
	if err != nil {
		return err
	}
	if err := ff.single("corral agent uninstall"); err != nil {
		return err
	}
	f, am, cleanup, err := loadAgentManifest(ff.path)
	if err != nil {
		return err
	}
	defer cleanup()
	ctx := cmd.Context()
	// Destroy the agent's manifest's apps: its container.
	dst := &streams{in: strings.NewReader(""), out: st.err, err: st.err}
	if err := runDestroy(cmd, dst, &destroyArgs{ff: fileFlags{path: am}, cf: cf, lf: lockFlags{timeout: 5 * time.Minute}, parallelism: 1, autoApprove: true}, nil); err != nil {
		return fmt.Errorf("the agent's container: %w", err)
	}
	s, err := connect(ctx, st, cf)
	if err != nil {
		return err
	}
	defer s.Close()
	setup := agent.SetupFor(f, "", user, tokenName)
	deleted, err := deleteAgentToken(ctx, s.client, setup.User, tokenName)
	if err != nil {
		return err
	}
	if deleted {
		ui.WriteAgentTokenDeleted(st.err, setup.Token)
	}
	if asJSON {
		return writeJSON(st, map[string]any{"project": f.Project, "token_id": setup.Token, "token_deleted": deleted})
	}
	ui.WriteAgentUninstalled(st.err, f.Project)
	return nil
}

// deleteAgentToken deletes the agent's API token when user has one of
// that name (a token this one may not list counts as none); the role and
// the user stay, since other tokens may use them.
func deleteAgentToken(ctx context.Context, c *pve.Client, user, tokenName string) (bool, error) {
	tokens, err := c.Tokens(ctx, user)
	if err != nil || !slices.ContainsFunc(tokens, func(t pve.TokenEntry) bool { return t.TokenID == tokenName }) {
		return false, nil
	}
	if err := c.DeleteToken(ctx, user, tokenName); err != nil {
		return false, fmt.Errorf("%w; delete it as root: pveum user token remove %s %s", err, user, tokenName)
	}
	return true, nil
}

// installedAgent finds the agent corral agent install put on the cluster
// for ff's project, reads its address and bearer token from its
// container, and calls fn with an HTTP client that reaches it from inside
// that container (over the same SSH login).
func installedAgent(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, fn func(url, token string, hc *http.Client) error) error {
	if err := ff.single("corral agent"); err != nil {
		return err
	}
	f, am, cleanup, err := loadAgentManifest(ff.path)
	if err != nil {
		return err
	}
	defer cleanup()
	// The env file is written for sh's `.` (and systemd's reading of it):
	// sourcing it in a subshell reads the token back exactly as written.
	script := "cat " + agent.InstalledURLFile + " && (. " + agent.InstalledEnvFile + " && printf '%s\\n' \"$CORRAL_AGENT_TOKEN\")"
	found := false
	var errb bytes.Buffer
	err = withGuest(ctx, st, fileFlags{path: am, lazy: true}, cf, trust, agent.InstalledApp, func(cl *guest.Client) error {
		var out bytes.Buffer
		if err := cl.Pipe(ctx, guest.Pipe{Script: script, Stdout: &out, Stderr: &errb}); err != nil {
			return err
		}
		found = true
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 2 {
			return fmt.Errorf("the agent's container of project %s holds no address or token: run corral agent install -f %s again", f.Project, ff.path)
		}
		return fn(strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1]), agent.GuestHTTP(cl))
	})
	if err != nil && !found {
		return fmt.Errorf("find the installed agent of project %s: %w %s (is it installed? corral agent install -f %s)", f.Project, err, strings.TrimSpace(errb.String()), ff.path)
	}
	return err
}
