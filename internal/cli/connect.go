package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/ui"
)

// connFlags are the connection settings, named as the bpg Terraform
// provider names them so existing setups work. Flags beat the
// environment; the environment beats the defaults.
type connFlags struct {
	endpoint    string
	token       string
	fingerprint string
	caFile      string
	insecure    bool
	// plainHTTP lets an http:// endpoint off the loopback through; the
	// name says what it costs.
	plainHTTP bool
	// taskTimeScale is CORRAL_SIM_TIME_SCALE: the served emulator's time
	// scale, which its env file exports (nil: Proxmox's own durations).
	taskTimeScale *float64
	// guestSSHPort, when not 0, is the guests' SSH port at this endpoint:
	// not a flag, set where corral knows the emulator behind it (agent
	// install on the local emulator).
	guestSSHPort int
}

// guestSSHPortOf, when set, gives the guests' SSH port of the emulator
// at an endpoint (0: not known), ahead of CORRAL_SIM_GUEST_SSH_PORT: the
// tests run many emulators at once in one process, each with its guests
// on a port of its own, which one process-wide variable cannot say.
var guestSSHPortOf func(endpoint string) int

// knownGuestSSHPort is c.guestSSHPort, else what guestSSHPortOf knows of
// c's endpoint (0: neither knows).
func (c connFlags) knownGuestSSHPort() int {
	if c.guestSSHPort == 0 && guestSSHPortOf != nil {
		return guestSSHPortOf(c.endpoint)
	}
	return c.guestSSHPort
}

// taskTimeScaleOf, when set, gives the time scale of the emulator at an
// endpoint (nil: not known), ahead of CORRAL_SIM_TIME_SCALE, for the
// tests' many emulators in one process (as guestSSHPortOf).
var taskTimeScaleOf func(endpoint string) *float64

// dialContext, when set, dials every connection to a configured endpoint
// (tests record dials with it to prove a refusal happened before any).
var dialContext func(ctx context.Context, network, addr string) (net.Conn, error)

func (c *connFlags) add(f *pflag.FlagSet) {
	f.StringVar(&c.endpoint, "endpoint", "", "PVE API endpoint, e.g. https://pve:8006 (env PROXMOX_VE_ENDPOINT; none = the local emulator, started in the background)")
	f.StringVar(&c.token, "api-token", "", "API token user@realm!tokenid=secret (env PROXMOX_VE_API_TOKEN)")
	f.StringVar(&c.fingerprint, "fingerprint", "", "SHA-256 fingerprint of the server certificate to pin (env PROXMOX_VE_FINGERPRINT)")
	f.StringVar(&c.caFile, "ca-file", "", "PEM file of CA certificates to trust (env PROXMOX_VE_CA_FILE)")
	f.BoolVar(&c.insecure, "insecure", false, "skip TLS verification (env PROXMOX_VE_INSECURE)")
	f.BoolVar(&c.plainHTTP, "insecure-plain-http", false, "allow an http:// endpoint off this machine, which sends the API token in clear text (env CORRAL_INSECURE_PLAIN_HTTP)")
}

// resolved fills unset flags from the environment.
func (c connFlags) resolved(getenv func(string) string) connFlags {
	if c.endpoint == "" {
		c.endpoint = getenv("PROXMOX_VE_ENDPOINT")
	}
	if c.token == "" {
		c.token = getenv("PROXMOX_VE_API_TOKEN")
	}
	if c.fingerprint == "" {
		c.fingerprint = getenv("PROXMOX_VE_FINGERPRINT")
	}
	if c.caFile == "" {
		c.caFile = getenv("PROXMOX_VE_CA_FILE")
	}
	if !c.insecure {
		if b, err := strconv.ParseBool(getenv("PROXMOX_VE_INSECURE")); err == nil {
			c.insecure = b
		}
	}
	if !c.plainHTTP {
		if b, err := strconv.ParseBool(getenv("CORRAL_INSECURE_PLAIN_HTTP")); err == nil {
			c.plainHTTP = b
		}
	}
	if f, err := strconv.ParseFloat(getenv("CORRAL_SIM_TIME_SCALE"), 64); err == nil && f >= 0 && c.taskTimeScale == nil {
		c.taskTimeScale = &f
	}
	return c
}

// session is a connected client, and the emulator when corral runs one:
// in-process (CORRAL_SIM_INPROCESS=1) or the local one in the background.
type session struct {
	client   *pve.Client
	embedded *sim.Server
	local    *daemonRecord
	// guestSSHPort is connFlags.guestSSHPort (0: not known).
	guestSSHPort int
	endpoint     string
}

func (s *session) Close() {
	if s.embedded != nil {
		s.embedded.Close()
	}
}

// connect returns a client for the configured endpoint, or for the local
// emulator (started in the background when none runs) when none is
// configured, and says on stderr which one it uses.
func connect(ctx context.Context, st *streams, cf connFlags) (*session, error) {
	return connectTo(ctx, st, cf, true)
}

// connectTo is connect; with start false a command without an endpoint
// uses the local emulator only if it runs (completions start nothing).
func connectTo(ctx context.Context, st *streams, cf connFlags, start bool) (*session, error) {
	cf = cf.resolved(os.Getenv)
	log := st.logger()
	if cf.endpoint == "" {
		if os.Getenv(inProcessEnv) == "1" {
			return connectInProcess(st, log)
		}
		return connectLocal(ctx, st, start, log)
	}
	if cf.token == "" {
		return nil, fmt.Errorf("no API token: set PROXMOX_VE_API_TOKEN (or --api-token) to user@realm!tokenid=secret")
	}
	if cf.insecure {
		ui.WriteInsecureTLSWarning(st.err)
	}
	if cf.plainHTTP && strings.HasPrefix(strings.ToLower(strings.TrimSpace(cf.endpoint)), "http:") {
		ui.WritePlainHTTPWarning(st.err)
	}
	c, err := pve.New(cf.pveConfig(strings.TrimSuffix(cf.endpoint, "/"), dialContext, log))
	if err != nil {
		return nil, err
	}
	return &session{client: c, endpoint: cf.endpoint, guestSSHPort: cf.knownGuestSSHPort()}, nil
}

// connectInProcess starts the emulator inside this command on the default
// state directory; it stops when the command ends (CORRAL_SIM_INPROCESS=1,
// for tests).
func connectInProcess(st *streams, log *slog.Logger) (*session, error) {
	dir := defaultSimDir()
	want, err := simSettingsFromEnv()
	if err != nil {
		return nil, err
	}
	scale := want.TimeScale
	s, err := sim.New(sim.Options{Dir: dir, Listener: sim.ListenNone, TimeScale: &scale, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("start embedded emulator: %w", err)
	}
	ui.WriteEmbeddedEmulatorNote(st.err, inProcessEnv, dir)
	c, err := pve.New(pve.Config{Endpoint: s.URL(), Token: s.Credentials().OperatorToken, HTTPClient: s.HTTPClient(), Logger: log, TaskTimeScale: &scale})
	if err != nil {
		s.Close()
		return nil, err
	}
	return &session{client: c, embedded: s, endpoint: "embedded emulator"}, nil
}

// connectLocal connects to the local emulator, starting it when none runs
// (and start is set), and says so in one line (more only when its
// settings differ from this command's, or it runs guests unisolated).
func connectLocal(ctx context.Context, st *streams, start bool, log *slog.Logger) (*session, error) {
	want, err := simSettingsFromEnv()
	if err != nil {
		return nil, err
	}
	d := newLocalDaemon()
	ls, err := d.ensure(ctx, want, start, st.err, log)
	if err != nil {
		return nil, err
	}
	r := ls.rec
	ui.WriteLocalEmulatorNote(st.err, ui.LocalEmulator{
		Started: ls.started, PID: r.PID, Dir: d.dir, Log: d.path(daemonLogFile),
		Unisolated: !r.Isolated && r.GuestsRefused == "", Notes: ls.notes,
	})
	return &session{client: ls.client, local: r, endpoint: "local emulator " + r.URL}, nil
}

// pveConfig is the client configuration for endpoint with the token and
// trust settings of the flags: every client corral makes from them
// (the session's, the agent's endpoint check from inside a guest) trusts
// the API the same way.
func (cf connFlags) pveConfig(endpoint string, dial func(ctx context.Context, network, addr string) (net.Conn, error), log *slog.Logger) pve.Config {
	scale := cf.taskTimeScale
	if taskTimeScaleOf != nil {
		if s := taskTimeScaleOf(endpoint); s != nil {
			scale = s
		}
	}
	return pve.Config{Endpoint: endpoint, Token: cf.token, Fingerprint: cf.fingerprint, CAFile: cf.caFile,
		Insecure: cf.insecure, AllowPlainHTTP: cf.plainHTTP, DialContext: dial, Logger: log, TaskTimeScale: scale}
}

// guestsRefused is the embedded or local emulator's refusal to start
// containers (it cannot isolate them here and nobody opted in), checked
// before a manifest's first change so that apply stops with the fix
// instead of failing at its first container start; nil for a real PVE or
// a served emulator (whose start tasks fail with the same message).
func (s *session) guestsRefused() error {
	switch {
	case s.embedded != nil:
		if err := s.embedded.Guests().Refused(); err != nil {
			return fmt.Errorf("%w\nnothing was changed", err)
		}
	case s.local != nil && s.local.GuestsRefused != "":
		return fmt.Errorf("%s\nnothing was changed", s.local.GuestsRefused)
	}
	return nil
}
