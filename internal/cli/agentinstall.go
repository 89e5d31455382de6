package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/hostcheck"
	"github.com/corralhq/corral/internal/localfile"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/pve"
)

// corral agent install deploys the agent as a corral app of its own
// small manifest (project corral-agent-<project>, one app "agent"),
// written by install and applied through corral apply's own code: the
// agent's container is created, locked, tagged and replaced exactly as
// any app's, and it is not an app of the user's project (whose plan
// would otherwise want to delete it).
//
// Inside the container everything lives at fixed paths, so that a
// re-install finds and replaces it, and `corral agent status -f` finds
// the agent's address and bearer token again.
const (
	agentApp     = "agent"
	agentBin     = "/usr/local/bin/corral"
	agentDir     = "/etc/corral/agent"
	agentEnvFile = agentDir + "/agent.env"
	agentKeyFile = agentDir + "/id_ed25519"
	agentCAFile  = agentDir + "/ca.pem"
	agentURLFile = agentDir + "/url"
	agentRunFile = agentDir + "/run"
	agentUnit    = "/etc/systemd/system/corral-agent.service"
	agentLog     = "/var/log/corral-agent.log"
	agentPIDFile = "/var/lib/corral/agent.pid"
	agentState   = "/var/lib/corral"
	agentPort    = 9120
)

// agentManifestPath is where the user's manifest goes in the agent's
// container: in a directory named as its project, so that a manifest
// without project: keeps its project there (the default project is the
// manifest's directory's name).
func agentManifestPath(project string) string { return agentDir + "/" + project + "/corral.yaml" }

// agentProject is the project of the agent's own manifest.
func agentProject(project string) string { return "corral-agent-" + project }

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

// agentManifestText is the agent's own manifest: one small container,
// started at boot, on the first app's template, storage and bridge unless
// told otherwise. With --git it provisions git when the template lacks it.
func agentManifestText(f *manifest.File, a *agentInstallArgs) (string, error) {
	if len(f.Apps) == 0 {
		return "", fmt.Errorf("%s has no apps: nothing for an agent to keep", f.Path)
	}
	first := f.Apps[0]
	tmpl, storage, bridge := first.Template, first.RootFS.Storage, first.Network.Bridge
	if a.template != "" {
		tmpl = a.template
	}
	if a.storage != "" {
		storage = a.storage
	}
	if a.bridge != "" {
		bridge = a.bridge
	}
	if a.memory < 64 {
		return "", fmt.Errorf("--memory %d: want 64 (MiB) or more", a.memory)
	}
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "# written by corral agent install for project %s\nproject: %s\napps:\n", f.Project, q(agentProject(f.Project)))
	fmt.Fprintf(&b, "  - name: %s\n    template: %s\n    cores: 1\n    memory: %d\n    onboot: true\n    features: {nesting: true}\n", agentApp, q(tmpl), a.memory)
	fmt.Fprintf(&b, "    description: %s\n", q("corral agent for project "+f.Project+" (corral agent install)"))
	if a.node != "" {
		fmt.Fprintf(&b, "    node: %s\n", q(a.node))
	}
	b.WriteString("    rootfs:\n      size: 4G\n")
	if storage != "" {
		fmt.Fprintf(&b, "      storage: %s\n", q(storage))
	}
	if bridge != "" {
		fmt.Fprintf(&b, "    network:\n      bridge: %s\n", q(bridge))
	}
	if a.git.url != "" {
		b.WriteString("    provision:\n      - name: git for corral agent --git\n        run: command -v git >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git)\n")
	}
	return b.String(), nil
}

// binaryArch is the PVE architecture (the container's arch:) a Linux ELF
// binary runs on.
func binaryArch(path string) (string, error) {
	ef, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s is not a Linux binary (%w): build corral for linux (GOOS=linux GOARCH=<the container's arch>) and pass --binary", path, err)
	}
	defer ef.Close()
	switch ef.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_386:
		return "i386", nil
	case elf.EM_ARM:
		return "armhf", nil
	case elf.EM_RISCV:
		if ef.Class == elf.ELFCLASS64 {
			return "riscv64", nil
		}
		return "riscv32", nil
	}
	return "", fmt.Errorf("%s is a binary for %s, which Proxmox VE containers do not run", path, ef.Machine)
}

// agentToken is the agent's API credential and how it came about.
type agentToken struct {
	id, secret string
	created    bool
}

// setupAgentToken gives the agent its own least-privilege token: the
// role, user and ACLs of doctor --print-setup for this manifest, and a
// fresh privilege-separated token (a re-install replaces it: PVE shows a
// secret only once). A caller that may not manage users gets the pveum
// script and an error. The secret is never logged or printed.
func setupAgentToken(ctx context.Context, st *streams, c *pve.Client, f *manifest.File, plan doctor.SetupPlan, tokenName string, dryCheck bool) (*agentToken, error) {
	if v := os.Getenv("CORRAL_AGENT_API_TOKEN"); v != "" {
		id, _, ok := strings.Cut(v, "=")
		if !ok || !strings.Contains(id, "!") {
			return nil, errors.New("CORRAL_AGENT_API_TOKEN: want user@realm!tokenid=secret")
		}
		return &agentToken{id: id, secret: v}, nil
	}
	perms, err := c.Permissions(ctx, "", "")
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, need := range [][2]string{{"/access", "Sys.Modify"}, {"/access", "User.Modify"}, {"/", "Permissions.Modify"}} {
		if !hasPriv(perms, need[0], need[1]) {
			missing = append(missing, need[1]+" on "+need[0])
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(st.out, "%s", f.Redact(plan.Script()))
		return nil, fmt.Errorf("this token (%s) may not create the agent's user, role and token (it lacks %s): run the commands printed above as root on a node, "+
			"then run corral agent install again with CORRAL_AGENT_API_TOKEN=%s=<secret> in its environment", c.TokenID(), strings.Join(missing, ", "), plan.Token)
	}
	if dryCheck {
		return nil, nil
	}
	roles, err := c.Roles(ctx)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(roles, func(r pve.Role) bool { return r.RoleID == plan.Role }) {
		err = c.SetRolePrivs(ctx, plan.Role, plan.Privileges)
	} else {
		err = c.AddRole(ctx, plan.Role, plan.Privileges)
	}
	if err != nil {
		return nil, err
	}
	users, err := c.Users(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(users, func(u pve.UserEntry) bool { return u.UserID == plan.User }) {
		if err := c.AddUser(ctx, plan.User, "corral agent for project "+f.Project); err != nil {
			return nil, err
		}
	}
	tokens, err := c.Tokens(ctx, plan.User)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(tokens, func(t pve.TokenEntry) bool { return t.TokenID == tokenName }) {
		if err := c.DeleteToken(ctx, plan.User, tokenName); err != nil {
			return nil, err
		}
	}
	id, secret, err := c.AddToken(ctx, plan.User, tokenName, "corral agent for project "+f.Project)
	if err != nil {
		return nil, err
	}
	for _, acl := range plan.ACLs {
		if err := c.SetACL(ctx, pve.ACLGrant{Path: acl.Path, Roles: []string{plan.Role}, Users: []string{plan.User}, Tokens: []string{id}, Propagate: acl.Propagate}); err != nil {
			return nil, err
		}
	}
	return &agentToken{id: id, secret: id + "=" + secret, created: true}, nil
}

// hasPriv: priv on path, or inherited from a parent path in PVE's answer
// (GET /access/permissions lists each ACL path with what holds there).
func hasPriv(p pve.Permissions, path, priv string) bool {
	for q := path; ; {
		if p.Has(q, priv) {
			return true
		}
		if q == "/" {
			return false
		}
		q = filepath.Dir(q)
	}
}

// agentSetup is the setup plan for the agent: doctor's, named for it.
func agentSetup(f *manifest.File, role, user, tokenName string) doctor.SetupPlan {
	if role == "" {
		role = "CorralAgent-" + f.Project
	}
	if user == "" {
		user = "corral-agent-" + f.Project + "@pve"
	}
	return doctor.Setup(doctor.Requirements(f, doctor.Targets{}), doctor.SetupOptions{Role: role, User: user, Token: tokenName})
}

// agentEnvQuote quotes a value of the agent's env file, which systemd
// (EnvironmentFile=) reads under systemd and sh (set -a; . FILE) when the
// agent runs detached: manifest.EnvFileValue's quoting, which both read
// back as written.
func agentEnvQuote(name, v string) (string, error) {
	q, err := manifest.EnvFileValue(v)
	if err != nil {
		return "", fmt.Errorf("%s: the value %w, so it cannot go into the agent's environment file", name, err)
	}
	return q, nil
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tarFiles packs files (path → mode and content) for `tar -x -C /`.
type tarFile struct {
	path string
	mode int64
	data []byte
}

func tarOf(files []tarFile) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dirs := map[string]bool{}
	for _, f := range files {
		name := strings.TrimPrefix(f.path, "/")
		for d := filepath.Dir(name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	for _, d := range ds {
		mode := int64(0o755)
		if d == strings.TrimPrefix(agentDir, "/") {
			mode = 0o700 // the token, the key
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: now})
	}
	for _, f := range files {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, Size: int64(len(f.data)), ModTime: now})
		tw.Write(f.data)
	}
	tw.Close()
	return buf.Bytes()
}

// agentInstallResult is corral agent install's -o json.
type agentInstallResult struct {
	Project   string `json:"project"`
	Node      string `json:"node"`
	VMID      int    `json:"vmid"`
	URL       string `json:"url"`
	Started   string `json:"started"` // systemd or detached
	TokenID   string `json:"token_id"`
	TokenMade bool   `json:"token_created"`
	Git       string `json:"git,omitempty"`
}

func runAgentInstall(cmd *cobra.Command, st *streams, a *agentInstallArgs) error {
	asJSON, err := a.ff.json()
	if err != nil {
		return err
	}
	if a.mode != "observe" && a.mode != "reconcile" {
		return fmt.Errorf("--mode %q: want observe or reconcile", a.mode)
	}
	if a.interval < time.Second {
		return fmt.Errorf("--interval %s: want 1s or more", a.interval)
	}
	if err := hostcheck.CheckNames("--allowed-host", a.allowedHosts); err != nil {
		return err
	}
	if a.git.url == "" {
		a.git.url = os.Getenv(gitURLEnv) // a password stays off this command line too
	}
	if err := a.git.check(); err != nil {
		return err
	}
	ctx := cmd.Context()
	cf := a.cf.resolved(os.Getenv)
	if cf.endpoint == "" {
		return errors.New("corral agent install needs an endpoint it can hand to the agent: set PROXMOX_VE_ENDPOINT " +
			"(for corral's local emulator, eval \"$(corral sim env)\" exports its endpoint, token and fingerprint; or corral sim serve, then source its env file)")
	}
	if cf.insecure || cf.plainHTTP {
		return errors.New("corral agent install copies the API settings into the container: pin the certificate (--fingerprint or --ca-file) instead of --insecure or plain http")
	}
	f, err := loadManifest(a.ff.path, true)
	if err != nil {
		return err
	}
	manifestData, err := localfile.Read(a.ff.path, localfile.MaxManifest)
	if err != nil {
		return err
	}
	bin := a.binary
	if bin == "" {
		if runtime.GOOS != "linux" {
			return fmt.Errorf("this corral is built for %s: build one for linux and the container's architecture and pass --binary", runtime.GOOS)
		}
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("find this corral binary: %w; pass --binary", err)
		}
	}
	binArch, err := binaryArch(bin)
	if err != nil {
		return err
	}
	env := map[string]string{}
	for _, name := range a.passEnv {
		if !envNameRe.MatchString(name) {
			return fmt.Errorf("--pass-env %q: want a variable name (letters, digits and _)", name)
		}
		if strings.HasPrefix(name, "PROXMOX_VE_") || strings.HasPrefix(name, "CORRAL_") || name == "HOME" || name == "XDG_STATE_HOME" {
			return fmt.Errorf("--pass-env %s: install sets that variable itself", name)
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			return fmt.Errorf("--pass-env %s: not set here", name)
		}
		env[name] = v
	}
	text, err := agentManifestText(f, a)
	if err != nil {
		return err
	}
	setup := agentSetup(f, a.role, a.user, a.tokenName)

	s, err := connect(ctx, st, cf)
	if err != nil {
		return err
	}
	defer s.Close()
	// May this token make the agent's token? Asked before anything is
	// created, so that a refusal changes nothing.
	if _, err := setupAgentToken(ctx, st, s.client, f, setup, a.tokenName, true); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "corral-agent-install")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	am := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(am, []byte(text), 0o600); err != nil {
		return err
	}
	// The container, through corral apply's code (plan and progress on
	// stderr: stdout is install's own answer).
	fmt.Fprintf(st.err, "corral: the agent's container (project %s, app %s)\n", agentProject(f.Project), agentApp)
	ast := &streams{in: strings.NewReader(""), out: st.err, err: st.err}
	aa := &applyArgs{ff: fileFlags{path: am}, cf: a.cf, lf: lockFlags{timeout: 5 * time.Minute}, parallelism: 1, autoApprove: true, lockWait: 2 * time.Minute, trustHostKey: a.trust}
	if err := runApply(cmd, ast, aa); err != nil {
		return fmt.Errorf("the agent's container: %w", err)
	}
	j, err := openJob(ctx, st, fileFlags{path: am, lazy: true}, a.cf)
	if err != nil {
		return err
	}
	defer j.Close()
	ct, err := appCT(ctx, j, agentApp)
	if err != nil {
		return err
	}
	conf, err := s.client.ContainerConfig(ctx, ct.Node, ct.VMID, false)
	if err != nil {
		return err
	}
	ctArch := conf.Values["arch"]
	if ctArch == "" {
		ctArch = "amd64" // PVE's default
	}
	if ctArch != binArch {
		return fmt.Errorf("%s is a %s binary and the agent's container (%d on %s) is %s: build corral for linux/%s and pass --binary", bin, binArch, ct.VMID, ct.Node, ctArch, ctArch)
	}
	ip, err := apply.Address(ctx, s.client, ct)
	if err != nil {
		return fmt.Errorf("the agent's container has no address yet: %w", err)
	}
	listen := a.listen
	if listen == "" {
		listen = net.JoinHostPort(ip, strconv.Itoa(agentPort))
	}
	lhost, lport, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT", listen)
	}
	if lhost == "" || lhost == "0.0.0.0" || lhost == "::" {
		lhost = ip
	}
	url := "http://" + net.JoinHostPort(lhost, lport)

	tok, err := setupAgentToken(ctx, st, s.client, f, setup, a.tokenName, false)
	if err != nil {
		return redactErr(f, err)
	}
	if tok.created {
		fmt.Fprintf(st.err, "corral: made the agent's API token %s (role %s: %d privileges)\n", tok.id, setup.Role, len(setup.Privileges))
	}

	endpoint := a.endpoint
	if endpoint == "" {
		err := withGuest(ctx, st, fileFlags{path: am}, a.cf, a.trust, agentApp, func(cl *guest.Client) error {
			endpoint, err = agentEndpoint(ctx, cl, cf)
			return err
		})
		if err != nil {
			return redactErr(f, err)
		}
		if endpoint != cf.endpoint {
			fmt.Fprintf(st.err, "corral: the agent reaches the API at %s from inside its container (%s is the container's own loopback there)\n", endpoint, cf.endpoint)
		}
	}
	in := agentFilesIn{project: f.Project, endpoint: endpoint, apiToken: tok.secret, fingerprint: cf.fingerprint, listen: listen, url: url, manifest: manifestData, env: env}
	if cf.caFile != "" {
		if in.ca, err = localfile.Read(cf.caFile, localfile.MaxPEM); err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
	}
	id, err := loadIdentity()
	if err != nil {
		return err
	}
	if in.key, err = localfile.Read(id.path, localfile.MaxKey); err != nil {
		return fmt.Errorf("read corral's SSH key: %w", err)
	}
	files, err := a.agentFiles(in)
	if err != nil {
		return err
	}

	started := ""
	err = withGuest(ctx, st, fileFlags{path: am}, a.cf, a.trust, agentApp, func(cl *guest.Client) error {
		bf, err := os.Open(bin)
		if err != nil {
			return err
		}
		defer bf.Close()
		var errb bytes.Buffer
		script := "set -e; mkdir -p " + filepath.Dir(agentBin) + "; cat > " + agentBin + ".new; chmod 755 " + agentBin + ".new; mv -f " + agentBin + ".new " + agentBin
		if err := cl.Pipe(ctx, guest.Pipe{Script: script, Stdin: bf, Stderr: &errb}); err != nil {
			return fmt.Errorf("copy %s into the container: %w: %s", bin, err, strings.TrimSpace(errb.String()))
		}
		errb.Reset()
		script = "set -e; umask 077; mkdir -p " + agentDir + " " + agentState + "; tar -x -p --no-same-owner -f - -C /"
		if err := cl.Pipe(ctx, guest.Pipe{Script: script, Stdin: bytes.NewReader(tarOf(files)), Stderr: &errb}); err != nil {
			return fmt.Errorf("write the agent's files: %w: %s", err, strings.TrimSpace(errb.String()))
		}
		errb.Reset()
		var out bytes.Buffer
		if err := cl.Pipe(ctx, guest.Pipe{Script: agentStartScript, Stdout: &out, Stderr: &errb}); err != nil {
			return fmt.Errorf("start the agent: %w: %s", err, strings.TrimSpace(errb.String()))
		}
		started = strings.TrimSpace(out.String())
		if err := waitAgentHealthy(ctx, cl, url, started); err != nil {
			return fmt.Errorf("the agent was started (%s) but does not answer at %s: %w\nthe end of its log (%s in container %d):\n%s",
				started, url, err, agentLogWhere(started), ct.VMID, agentLogTail(ctx, cl, started))
		}
		return nil
	})
	if err != nil {
		return redactErr(f, err)
	}
	res := agentInstallResult{Project: f.Project, Node: ct.Node, VMID: ct.VMID, URL: url, Started: started, TokenID: tok.id, TokenMade: tok.created}
	if a.git.url != "" {
		res.Git = (&agent.Git{URL: a.git.url}).SafeURL()
	}
	if asJSON {
		return writeJSON(st, res)
	}
	fmt.Fprintf(st.err, "corral: the agent runs in container %d on %s, at %s (%s mode)\n", ct.VMID, ct.Node, url, a.mode)
	if started == "systemd" {
		fmt.Fprintf(st.err, "corral: started by systemd (corral-agent.service, Restart=always, enabled at boot)\n")
	} else {
		fmt.Fprintf(st.err, "corral: the container has no systemd as its init: the agent was started as a detached process (log %s).\n"+
			"        It stops with the container and does not come back after a reboot; run corral agent install again then.\n"+
			"        The systemd unit is written (%s) and is used once the container runs systemd.\n", agentLog, agentUnit)
	}
	fmt.Fprintf(st.out, "agent for project %s: container %d on %s, %s (started by %s)\ncorral agent status -f %s\n", f.Project, ct.VMID, ct.Node, url, started, a.ff.path)
	return nil
}

// agentFilesIn is what the agent's files are made of.
type agentFilesIn struct {
	project, endpoint, apiToken, fingerprint string
	listen, url                              string // the agent's --listen, and where install reaches it
	ca, key, manifest                        []byte // ca: nil without --ca-file
	env                                      map[string]string
}

// agentFiles are the files install writes into the agent's container.
// Every secret (the API token, the bearer token, the SSH key, a password
// in --git's URL, the manifest's ${env:…} values) goes into a 0600 file:
// the command line, the run script and the systemd unit, which any user
// of the container may read, hold none.
func (a *agentInstallArgs) agentFiles(in agentFilesIn) ([]tarFile, error) {
	vars := [][2]string{
		{"HOME", "/root"},
		{"XDG_STATE_HOME", agentState},
		{"PROXMOX_VE_ENDPOINT", in.endpoint},
		{"PROXMOX_VE_API_TOKEN", in.apiToken},
		{"CORRAL_SSH_KEY", agentKeyFile},
		{"CORRAL_AGENT_TOKEN", randomToken()},
	}
	if in.fingerprint != "" {
		vars = append(vars, [2]string{"PROXMOX_VE_FINGERPRINT", in.fingerprint})
	}
	files := []tarFile{}
	if in.ca != nil {
		files = append(files, tarFile{agentCAFile, 0o644, in.ca})
		vars = append(vars, [2]string{"PROXMOX_VE_CA_FILE", agentCAFile})
	}
	if port := os.Getenv("CORRAL_SIM_GUEST_SSH_PORT"); port != "" {
		vars = append(vars, [2]string{"CORRAL_SIM_GUEST_SSH_PORT", port})
	}
	if a.git.url != "" {
		vars = append(vars, [2]string{gitURLEnv, a.git.url})
	}
	for _, name := range slices.Sorted(mapKeys(in.env)) {
		vars = append(vars, [2]string{name, in.env[name]})
	}
	var envText strings.Builder
	envText.WriteString("# corral agent's environment (corral agent install); secrets: keep 0600\n")
	for _, kv := range vars {
		v, err := agentEnvQuote(kv[0], kv[1])
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&envText, "%s=%s\n", kv[0], v)
	}
	manifestPath := agentManifestPath(in.project)
	argv := a.agentArgv(manifestPath, in.listen, in.project)
	var quoted []string
	for _, s := range argv {
		quoted = append(quoted, guest.ShellQuote(s))
	}
	unit, err := agentUnitText(in.project, argv)
	if err != nil {
		return nil, err
	}
	run := fmt.Sprintf("#!/bin/sh\n# Starts the agent where the container has no systemd (corral agent install).\nset -a\n. %s\nset +a\nexec %s\n", agentEnvFile, strings.Join(quoted, " "))
	files = append(files,
		tarFile{agentEnvFile, 0o600, []byte(envText.String())},
		tarFile{agentKeyFile, 0o600, in.key},
		tarFile{agentURLFile, 0o644, []byte(in.url + "\n")},
		tarFile{agentRunFile, 0o755, []byte(run)},
		tarFile{agentUnit, 0o644, []byte(unit)},
	)
	if a.git.url == "" {
		files = append(files, tarFile{manifestPath, 0o600, in.manifest})
	}
	return files, nil
}

// agentArgv is the installed agent's command line.
func (a *agentInstallArgs) agentArgv(manifestPath, listen, project string) []string {
	argv := []string{agentBin, "agent", "-f", manifestPath, "--mode", a.mode, "--listen", listen, "--interval", a.interval.String(), "--log-format", "json"}
	for _, h := range a.allowedHosts {
		argv = append(argv, "--allowed-host", h)
	}
	if a.git.url != "" {
		// The checkout is named as the project too (see agentManifestPath).
		argv = append(argv, a.git.args()...)
		argv = append(argv, "--git-dir", agentState+"/git/"+project)
		// What the manifest from Git may read: the variables install
		// put into the agent's environment file, and no other.
		for _, name := range a.passEnv {
			argv = append(argv, "--pass-env", name)
		}
	}
	return argv
}

// agentLogTail is the end of the agent's log (the agent redacts its
// secrets), or why it cannot be read.
func agentLogTail(ctx context.Context, cl *guest.Client, started string) string {
	script := "tail -n 20 " + agentLog + " 2>&1"
	if started == "systemd" {
		script = "journalctl -u corral-agent.service -n 20 --no-pager 2>&1"
	}
	var out bytes.Buffer
	if err := cl.Pipe(ctx, guest.Pipe{Script: script, Stdout: &out}); err != nil && out.Len() == 0 {
		return "(cannot read it: " + err.Error() + ")"
	}
	return strings.TrimRight(out.String(), "\n")
}

func agentLogWhere(started string) string {
	if started == "systemd" {
		return "journalctl -u corral-agent"
	}
	return agentLog
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// agentUnitText is the agent's systemd unit; argv is its command line.
func agentUnitText(project string, argv []string) (string, error) {
	var words []string
	for _, a := range argv {
		q, err := systemdQuote(a)
		if err != nil {
			return "", err
		}
		words = append(words, q)
	}
	return fmt.Sprintf(`[Unit]
Description=corral agent for project %s (corral agent install)
Wants=network-online.target
After=network-online.target

[Service]
EnvironmentFile=%s
ExecStart=%s
Restart=always
RestartSec=5
KillSignal=SIGTERM
TimeoutStopSec=5min

[Install]
WantedBy=multi-user.target
`, strings.ReplaceAll(project, "%", "%%"), agentEnvFile, strings.Join(words, " ")), nil
}

// systemdQuote quotes one word of an ExecStart= line: double quotes with
// \ and " escaped, and % and $ doubled, which systemd would otherwise
// take for a specifier or a variable (systemd.service(5), "Command
// lines").
func systemdQuote(s string) (string, error) {
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%q: a control character cannot go into the agent's systemd unit", s)
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$")
	return `"` + r.Replace(s) + `"`, nil
}

// agentStartScript (re)starts the agent in its container and prints how:
// systemd when systemd is the init (the unit, enabled at boot, restarted
// so that a re-install takes the new binary and files), else detached:
// the running one stopped (SIGTERM: it finishes its step and releases
// corral's lock), a new one started in a session of its own.
const agentStartScript = `set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload
	systemctl enable corral-agent.service >/dev/null 2>&1
	systemctl restart corral-agent.service
	echo systemd
	exit 0
fi
pidfile=` + agentPIDFile + `
if [ -s "$pidfile" ]; then
	pid=$(cat "$pidfile")
	if kill -0 "$pid" 2>/dev/null && grep -q corral "/proc/$pid/cmdline" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.5; i=$((i+1)); done
		kill -KILL "$pid" 2>/dev/null || true
	fi
fi
mkdir -p "$(dirname "$pidfile")" /var/log
setsid ` + agentRunFile + ` >>` + agentLog + ` 2>&1 </dev/null &
echo $! > "$pidfile"
echo detached
`

// waitAgentHealthy waits for the agent's /healthz, asked from inside its
// container over cl (a stuck start, not a slow one, fails it). A
// detached agent that exited (an invalid manifest, an unset ${env:…})
// fails it at once.
func waitAgentHealthy(ctx context.Context, cl *guest.Client, url, started string) error {
	deadline := time.Now().Add(2 * time.Minute)
	hc := tunnelHTTP(cl) // from inside the container: its port needs no opening
	var last error
	for i := 0; time.Now().Before(deadline); i++ {
		if started == "detached" && i%5 == 4 {
			alive := `pid=$(cat ` + agentPIDFile + `) && kill -0 "$pid" 2>/dev/null`
			var ee *guest.ExitError
			if err := cl.Pipe(ctx, guest.Pipe{Script: alive}); errors.As(err, &ee) {
				return errors.New("the agent exited")
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/healthz: %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}

// agentManifestFor writes the agent's own manifest for f into a temporary
// directory (uninstall and status read it; the template and sizes do not
// matter to them).
func agentManifestFor(f *manifest.File) (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "corral-agent")
	if err != nil {
		return "", nil, err
	}
	text, err := agentManifestText(f, &agentInstallArgs{memory: 512})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	p := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return p, func() { os.RemoveAll(dir) }, nil
}

func runAgentUninstall(cmd *cobra.Command, st *streams, ff fileFlags, cf connFlags, user, tokenName string) error {
	asJSON, err := ff.json()
	if err != nil {
		return err
	}
	f, err := loadManifest(ff.path, true)
	if err != nil {
		return err
	}
	am, cleanup, err := agentManifestFor(f)
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
	setup := agentSetup(f, "", user, tokenName)
	deleted := false
	tokens, err := s.client.Tokens(ctx, setup.User)
	if err == nil && slices.ContainsFunc(tokens, func(t pve.TokenEntry) bool { return t.TokenID == tokenName }) {
		if err := s.client.DeleteToken(ctx, setup.User, tokenName); err != nil {
			return fmt.Errorf("%w; delete it as root: pveum user token remove %s %s", err, setup.User, tokenName)
		}
		deleted = true
		fmt.Fprintf(st.err, "corral: deleted the agent's API token %s\n", setup.Token)
	}
	if asJSON {
		return writeJSON(st, map[string]any{"project": f.Project, "token_id": setup.Token, "token_deleted": deleted})
	}
	fmt.Fprintf(st.err, "corral: the agent of project %s is uninstalled\n", f.Project)
	return nil
}

// installedAgent finds the agent corral agent install put on the cluster
// for ff's project, reads its address and bearer token from its
// container, and calls fn with an HTTP client that reaches it from inside
// that container (over the same SSH login).
func installedAgent(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, fn func(url, token string, hc *http.Client) error) error {
	f, err := loadManifest(ff.path, true)
	if err != nil {
		return err
	}
	am, cleanup, err := agentManifestFor(f)
	if err != nil {
		return err
	}
	defer cleanup()
	// The env file is written for sh's `.` (and systemd's reading of it):
	// sourcing it in a subshell reads the token back exactly as written.
	script := "cat " + agentURLFile + " && (. " + agentEnvFile + " && printf '%s\\n' \"$CORRAL_AGENT_TOKEN\")"
	found := false
	var errb bytes.Buffer
	err = withGuest(ctx, st, fileFlags{path: am, lazy: true}, cf, trust, agentApp, func(cl *guest.Client) error {
		var out bytes.Buffer
		if err := cl.Pipe(ctx, guest.Pipe{Script: script, Stdout: &out, Stderr: &errb}); err != nil {
			return err
		}
		found = true
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 2 {
			return fmt.Errorf("the agent's container of project %s holds no address or token: run corral agent install -f %s again", f.Project, ff.path)
		}
		return fn(strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1]), tunnelHTTP(cl))
	})
	if err != nil && !found {
		return fmt.Errorf("find the installed agent of project %s: %w %s (is it installed? corral agent install -f %s)", f.Project, err, strings.TrimSpace(errb.String()), ff.path)
	}
	return err
}
