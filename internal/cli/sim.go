package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/hostcheck"
	"github.com/corralhq/corral/internal/localfile"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/ui"
)

type simServeArgs struct {
	listen    string
	state     string
	nodes     int
	shared    []string
	timeScale float64
	version   string
	faults    string
	plainHTTP bool
	sshPort   int
	real      bool
	allowed   []string
	daemon    bool
	nodeMem   string
}

func newSimCmd(st *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "The local Proxmox VE emulator",
		Long: `With no endpoint configured (PROXMOX_VE_ENDPOINT), the first corral
command starts a Proxmox VE emulator in the background for this user, on
the default state directory (` + defaultSimDir() + `), and every later
command uses it: containers keep running between commands. corral sim
status, stop and logs manage it; corral sim serve runs one in the
foreground instead.`,
	}
	a := &simServeArgs{}
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the emulated Proxmox VE API until interrupted",
		Long: `Serve https://ADDR/api2/json/... with a self-signed certificate, like a
Proxmox VE node. State persists in --state: stop and start again and
everything is still there. DIR/env holds shell exports for the endpoint,
a least-privilege API token, the certificate fingerprint and root's
credentials: source it (". DIR/env") before running corral.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimServe(cmd, st, a)
		},
	}
	f := serve.Flags()
	f.StringVar(&a.listen, "listen", "127.0.0.1:8006", "address to listen on (loopback only is recommended)")
	f.StringVar(&a.state, "state", defaultSimDir(), "state directory")
	f.IntVar(&a.nodes, "nodes", 1, "number of nodes (1: pve; N: pve1..pveN)")
	f.StringSliceVar(&a.shared, "shared-storage", nil, "add shared storages seen by every node: nfs (storage 'nfs'), rbd (storage 'rbd'), or both (nfs,rbd)")
	f.Float64Var(&a.timeScale, "time-scale", 1, "multiply real PVE task durations by this (0 = instant)")
	f.StringVar(&a.version, "pve-version", "9.1", "emulated Proxmox VE version: 9.1 or 8.4")
	f.StringVar(&a.faults, "faults", "", "fault injection, e.g. 'seed=1,latency=20ms,read5xx=0.05,write5xx=0.02,drop=0.01,taskfail=0.05'")
	f.BoolVar(&a.plainHTTP, "plain-http", false, "serve plain HTTP instead of HTTPS")
	f.IntVar(&a.sshPort, "guest-ssh-port", sim.PVEPort, "port of each running container's SSH server (22 as on PVE, 2222 when 22 cannot be bound; 0 picks a free port); DIR/env exports it")
	f.BoolVar(&a.real, "real-templates", false, "make the Debian 12 template a real Debian root file system (built once with mmdebstrap, about 2.5 minutes, and cached; needs root, lxc, mmdebstrap, zstd); default: on where this machine has them (corral sim doctor); CORRAL_SIM_REAL_TEMPLATES=1 or 0 sets the default")
	f.BoolVar(&a.daemon, "daemon", false, "run as corral's local emulator: write DIR/daemon.json once serving (corral starts it so)")
	f.MarkHidden("daemon")
	f.StringSliceVar(&a.allowed, "allowed-host", nil, "another name the API answers to in the Host header (repeatable; besides its certificate's names, localhost, the --listen name, any IP address, and the hostname off the loopback)")
	f.StringVar(&a.nodeMem, "node-memory", "", "memory of each node, e.g. 16G; a CT start that does not fit beside the node's running CTs fails (default: with real containers, the host's memory less a reserve, shared by the nodes; otherwise no limit)")
	cmd.AddCommand(serve, newSimEnvCmd(st), newSimStatusCmd(st), newSimStopCmd(st), newSimLogsCmd(st), newSimDoctorCmd(st))
	return cmd
}

// newSimEnvCmd is `corral sim env`: the state directory's env file on
// stdout, for eval "$(corral sim env)". It holds a served emulator's
// endpoint and credentials (corral sim serve's, or the local emulator's,
// which is one), or (written by an in-process emulator, which serves no
// port) the unsets that bring corral back to the local one.
func newSimEnvCmd(st *streams) *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print the emulator's env file (eval \"$(corral sim env)\")",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := filepath.Join(state, "env")
			data, err := localfile.Read(path, localfile.MaxState)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no emulator state in %s: run corral sim serve --state %s, or any corral command without PROXMOX_VE_ENDPOINT (it starts the local emulator)", state, state)
			}
			if err != nil {
				return err
			}
			_, err = st.out.Write(data)
			return err
		},
	}
	cmd.Flags().StringVar(&state, "state", defaultSimDir(), "state directory")
	return cmd
}

// options are the emulator's options as the flags give them, refused
// when they cannot work; with them serveRealTemplates decides (and may
// build) the CT template, after the flags passed.
func (a *simServeArgs) options(cmd *cobra.Command, st *streams) (sim.Options, error) {
	if a.version != "9.1" && a.version != "8.4" {
		return sim.Options{}, fmt.Errorf("--pve-version %q: want 9.1 or 8.4", a.version)
	}
	if a.timeScale < 0 {
		return sim.Options{}, fmt.Errorf("--time-scale %v: must be 0 or more", a.timeScale)
	}
	if err := hostcheck.CheckNames("--allowed-host", a.allowed); err != nil {
		return sim.Options{}, err
	}
	if a.nodes < 1 || a.nodes > 64 {
		return sim.Options{}, fmt.Errorf("--nodes %d: want 1..64", a.nodes)
	}
	nodeMem, err := parseNodeMemory(a.nodeMem)
	if err != nil {
		return sim.Options{}, err
	}
	mode := sim.ListenTLS
	if a.plainHTTP {
		mode = sim.ListenHTTP
	}
	ts := a.timeScale
	return sim.Options{
		Dir: a.state, Listen: a.listen, Listener: mode, Nodes: a.nodes, Version: a.version, SharedStorage: a.shared,
		TimeScale: &ts, Faults: a.faults, Logger: st.logger(), GuestSSHPort: a.sshPort,
		RealTemplates: serveRealTemplates(cmd.Context(), cmd.Flags().Changed("real-templates"), a.real, st.err), AllowedHosts: a.allowed, NodeMemory: nodeMem,
	}, nil
}

func runSimServe(cmd *cobra.Command, st *streams, a *simServeArgs) error {
	o, err := a.options(cmd, st)
	if err != nil {
		return err
	}
	s, err := sim.New(o)
	if err != nil {
		return err
	}
	defer s.Close()
	ui.WriteSimBanner(st.out, simBanner(s, a))
	if a.daemon {
		if err := writeDaemonRecord(s, a); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(a.state, daemonRecordFile), err)
		}
	}
	// The first Ctrl-C or SIGTERM stops the emulator: it has no step to
	// finish (a running task is interrupted as PVE's daemon stop does).
	select {
	case <-cmd.Context().Done():
	case <-stopOf(cmd.Context()):
	}
	ui.WriteSimShuttingDown(st.err)
	return nil
}

// simBanner is what sim serve's banner says of s, served as a asks.
func simBanner(s *sim.Server, a *simServeArgs) ui.SimBanner {
	isolated, why := s.Guests().Isolated()
	return ui.SimBanner{
		Version: a.version, URL: s.URL(), Fingerprint: s.Fingerprint(), State: a.state,
		SSHPort: s.Guests().Port(), Block: s.Guests().Block(),
		Isolated: isolated, APIPort: sim.PVEAPIPort, Refused: s.Guests().Refused(), Unisolated: why,
	}
}

// defaultSimDir is $XDG_STATE_HOME/corral/sim (~/.local/state/corral/sim).
func defaultSimDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "corral", "sim")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "corral-sim")
	}
	return filepath.Join(home, ".local", "state", "corral", "sim")
}
