package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Installation is a checked corral agent install: what the command line
// was told and read before it connects. Install acts on it.
type Installation struct {
	// Manifest is the user's manifest; ManifestData its bytes, which go
	// into the container (unless the agent takes it from Git).
	Manifest     *manifest.File
	ManifestData []byte
	// Own is the agent's own manifest (ManifestText).
	Own string
	// Setup is the agent's token: its role, user and ACLs.
	Setup     doctor.SetupPlan
	TokenName string
	// GivenToken is CORRAL_AGENT_API_TOKEN (user@realm!tokenid=secret),
	// a token made by hand: install then makes none.
	GivenToken string
	Command    Command
	// Binary is the corral binary to copy in, BinaryArch its PVE arch.
	Binary, BinaryArch string
	// Listen is --listen ("": the container's address, port 9120).
	Listen string
	// Endpoint is --agent-endpoint ("": found from inside the
	// container); APIEndpoint and Fingerprint are install's own.
	Endpoint, APIEndpoint, Fingerprint string
	// Env are the --pass-env values.
	Env             map[string]string
	SimGuestSSHPort string
}

// InstallOps are what Install needs of the command line: corral apply's
// code for the agent's container, a login into it, and the files of
// corral's own it copies in. Each takes the path of the agent's own
// manifest that Install wrote.
type InstallOps struct {
	Client *pve.Client
	// Apply applies the agent's own manifest as corral apply does.
	Apply func(ctx context.Context, path string) error
	// Container finds the container of the agent's own manifest.
	Container func(ctx context.Context, path string) (*plan.CT, error)
	// Guest logs into that container and calls fn.
	Guest func(ctx context.Context, path string, fn func(*guest.Client) error) error
	// Endpoint is the API endpoint the agent reaches from inside its
	// container (when --agent-endpoint is not given).
	Endpoint func(ctx context.Context, cl *guest.Client) (string, error)
	// Secrets reads the --ca-file (nil without) and corral's SSH key.
	Secrets func() (ca, key []byte, err error)
	// Event reports Install's progress.
	Event func(InstallEvent)
}

// InstallEvent is a step of Install worth telling a person.
type InstallEvent struct {
	Kind InstallEventKind
	// Project and App name the agent's container (EventContainer).
	Project, App string
	// TokenID, Role and Privileges describe the token made (EventToken).
	TokenID, Role string
	Privileges    int
	// Endpoint is the agent's API endpoint, Given install's own
	// (EventEndpoint).
	Endpoint, Given string
}

// InstallEventKind says which step an InstallEvent reports.
type InstallEventKind int

const (
	// EventContainer: the agent's container is applied next.
	EventContainer InstallEventKind = iota
	// EventToken: the agent's API token was made.
	EventToken
	// EventEndpoint: the agent reaches the API at another endpoint than
	// install does.
	EventEndpoint
)

// InstallResult is corral agent install's -o json.
type InstallResult struct {
	Project   string `json:"project"`
	Node      string `json:"node"`
	VMID      int    `json:"vmid"`
	URL       string `json:"url"`
	Started   string `json:"started"` // systemd or detached
	TokenID   string `json:"token_id"`
	TokenMade bool   `json:"token_created"`
	Git       string `json:"git,omitempty"`
}

// Install deploys the agent: it checks that this token may make the
// agent's (before anything is created, so that a refusal changes
// nothing), applies the agent's own manifest, finds the container's
// address, makes the agent's token, finds the API endpoint the agent
// reaches, and copies in the binary and files and starts the agent,
// waiting until it answers.
func Install(ctx context.Context, in *Installation, ops InstallOps) (*InstallResult, error) {
	if _, err := in.token(ctx, ops.Client, true); err != nil {
		return nil, err
	}
	path, cleanup, err := WriteOwnManifest(in.Own)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	ct, err := in.container(ctx, ops, path)
	if err != nil {
		return nil, err
	}
	listen, url, err := in.address(ctx, ops.Client, ct)
	if err != nil {
		return nil, err
	}
	tok, err := in.token(ctx, ops.Client, false)
	if err != nil {
		return nil, err
	}
	if tok.created {
		ops.Event(InstallEvent{Kind: EventToken, TokenID: tok.id, Role: in.Setup.Role, Privileges: len(in.Setup.Privileges)})
	}
	endpoint, err := in.endpoint(ctx, ops, path)
	if err != nil {
		return nil, err
	}
	ca, key, err := ops.Secrets()
	if err != nil {
		return nil, err
	}
	files, err := in.Command.Files(FilesIn{Project: in.Manifest.Project, Endpoint: endpoint, APIToken: tok.secret, Fingerprint: in.Fingerprint,
		Listen: listen, URL: url, CA: ca, Key: key, Manifest: in.ManifestData, Env: in.Env, SimGuestSSHPort: in.SimGuestSSHPort})
	if err != nil {
		return nil, err
	}
	started, err := in.start(ctx, ops, path, files, url, ct.VMID)
	if err != nil {
		return nil, err
	}
	res := &InstallResult{Project: in.Manifest.Project, Node: ct.Node, VMID: ct.VMID, URL: url, Started: started, TokenID: tok.id, TokenMade: tok.created}
	if in.Command.GitURL != "" {
		res.Git = (&Git{URL: in.Command.GitURL}).SafeURL()
	}
	return res, nil
}

// WriteOwnManifest writes the agent's own manifest (ManifestText) into a
// temporary directory, for corral's commands to read as any manifest
// (install applies it; uninstall and status find the container by it);
// cleanup removes it.
func WriteOwnManifest(text string) (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "corral-agent")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// container applies the agent's own manifest at path, through corral
// apply's code, and checks that the binary runs on the container's
// architecture.
func (in *Installation) container(ctx context.Context, ops InstallOps, path string) (*plan.CT, error) {
	ops.Event(InstallEvent{Kind: EventContainer, Project: ProjectOf(in.Manifest.Project), App: InstalledApp})
	if err := ops.Apply(ctx, path); err != nil {
		return nil, fmt.Errorf("the agent's container: %w", err)
	}
	ct, err := ops.Container(ctx, path)
	if err != nil {
		return nil, err
	}
	conf, err := ops.Client.ContainerConfig(ctx, ct.Node, ct.VMID, false)
	if err != nil {
		return nil, err
	}
	ctArch := conf.Values["arch"]
	if ctArch == "" {
		ctArch = "amd64" // PVE's default
	}
	if ctArch != in.BinaryArch {
		return nil, fmt.Errorf("%s is a %s binary and the agent's container (%d on %s) is %s: build corral for linux/%s and pass --binary", in.Binary, in.BinaryArch, ct.VMID, ct.Node, ctArch, ctArch)
	}
	return ct, nil
}

// address is the agent's --listen and the URL install reaches it at: the
// container's address, port 9120, unless --listen says otherwise (a
// wildcard host is reached at the container's address).
func (in *Installation) address(ctx context.Context, c *pve.Client, ct *plan.CT) (listen, url string, err error) {
	ip, err := apply.Address(ctx, c, ct)
	if err != nil {
		return "", "", fmt.Errorf("the agent's container has no address yet: %w", err)
	}
	listen = in.Listen
	if listen == "" {
		listen = net.JoinHostPort(ip, strconv.Itoa(agentPort))
	}
	lhost, lport, err := net.SplitHostPort(listen)
	if err != nil {
		return "", "", fmt.Errorf("--listen %q: want HOST:PORT", listen)
	}
	if lhost == "" || lhost == "0.0.0.0" || lhost == "::" {
		lhost = ip
	}
	return listen, "http://" + net.JoinHostPort(lhost, lport), nil
}

// endpoint is the API endpoint the agent uses: --agent-endpoint, else
// the one it reaches from inside its container, which is install's own
// unless that is a loopback address.
func (in *Installation) endpoint(ctx context.Context, ops InstallOps, path string) (string, error) {
	if in.Endpoint != "" {
		return in.Endpoint, nil
	}
	var endpoint string
	err := ops.Guest(ctx, path, func(cl *guest.Client) error {
		var err error
		endpoint, err = ops.Endpoint(ctx, cl)
		return err
	})
	if err != nil {
		return "", err
	}
	if endpoint != in.APIEndpoint {
		ops.Event(InstallEvent{Kind: EventEndpoint, Endpoint: endpoint, Given: in.APIEndpoint})
	}
	return endpoint, nil
}

// start copies the binary and the files into the container, (re)starts
// the agent and waits until it answers at url. It returns how the agent
// was started: "systemd" or "detached".
func (in *Installation) start(ctx context.Context, ops InstallOps, path string, files []File, url string, vmid int) (string, error) {
	started := ""
	err := ops.Guest(ctx, path, func(cl *guest.Client) error {
		bf, err := os.Open(in.Binary)
		if err != nil {
			return err
		}
		defer bf.Close()
		script := "set -e; mkdir -p " + filepath.Dir(InstalledBin) + "; cat > " + InstalledBin + ".new; chmod 755 " + InstalledBin + ".new; mv -f " + InstalledBin + ".new " + InstalledBin
		if err := pipe(ctx, cl, script, bf, nil); err != nil {
			return fmt.Errorf("copy %s into the container: %w", in.Binary, err)
		}
		script = "set -e; umask 077; mkdir -p " + InstalledDir + " " + InstalledState + "; tar -x -p --no-same-owner -f - -C /"
		if err := pipe(ctx, cl, script, bytes.NewReader(tarOf(files)), nil); err != nil {
			return fmt.Errorf("write the agent's files: %w", err)
		}
		var out bytes.Buffer
		if err := pipe(ctx, cl, startScript, nil, &out); err != nil {
			return fmt.Errorf("start the agent: %w", err)
		}
		started = strings.TrimSpace(out.String())
		if err := waitHealthy(ctx, cl, url, started); err != nil {
			return fmt.Errorf("the agent was started (%s) but does not answer at %s: %w\nthe end of its log (%s in container %d):\n%s",
				started, url, err, logWhere(started), vmid, logTail(ctx, cl, started))
		}
		return nil
	})
	return started, err
}

// pipe runs script in the container with stdin and stdout; its error
// ends with what the script wrote to stderr.
func pipe(ctx context.Context, cl *guest.Client, script string, stdin io.Reader, stdout io.Writer) error {
	var errb bytes.Buffer
	if err := cl.Pipe(ctx, guest.Pipe{Script: script, Stdin: stdin, Stdout: stdout, Stderr: &errb}); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(errb.String()))
	}
	return nil
}

// logTail is the end of the agent's log (the agent redacts its
// secrets), or why it cannot be read.
func logTail(ctx context.Context, cl *guest.Client, started string) string {
	script := "tail -n 20 " + InstalledLog + " 2>&1"
	if started == "systemd" {
		script = "journalctl -u corral-agent.service -n 20 --no-pager 2>&1"
	}
	var out bytes.Buffer
	if err := cl.Pipe(ctx, guest.Pipe{Script: script, Stdout: &out}); err != nil && out.Len() == 0 {
		return "(cannot read it: " + err.Error() + ")"
	}
	return strings.TrimRight(out.String(), "\n")
}

func logWhere(started string) string {
	if started == "systemd" {
		return "journalctl -u corral-agent"
	}
	return InstalledLog
}

// startScript (re)starts the agent in its container and prints how:
// systemd when systemd is the init (the unit, enabled at boot, restarted
// so that a re-install takes the new binary and files), else detached:
// the running one stopped (SIGTERM: it finishes its step and releases
// corral's lock), a new one started in a session of its own.
const startScript = `set -e
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
setsid ` + agentRunFile + ` >>` + InstalledLog + ` 2>&1 </dev/null &
echo $! > "$pidfile"
echo detached
`

// GuestHTTP is an HTTP client whose connections start inside the guest
// cl is logged into: the agent's port needs no opening to the network,
// and what install checks is what the agent itself will see.
func GuestHTTP(cl *guest.Client) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: cl.DialContext, DisableKeepAlives: true},
		Timeout:   30 * time.Second,
	}
}

// waitHealthy waits for the agent's /healthz, asked from inside its
// container over cl (a stuck start, not a slow one, fails it). A
// detached agent that exited (an invalid manifest, an unset ${env:…})
// fails it at once.
func waitHealthy(ctx context.Context, cl *guest.Client, url, started string) error {
	deadline := time.Now().Add(2 * time.Minute)
	hc := GuestHTTP(cl) // from inside the container: its port needs no opening
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
