// Package pvetest is the one test kit for packages above pve: Start runs
// an in-process Proxmox VE emulator (internal/sim) for a test and gives a
// client for it in the same call, Client makes more clients (other
// tokens, wrapped transports). Tests built on it go end to end: client →
// HTTPS → emulator → files on disk; they wait on a condition with
// testenv.WaitFor, never by sleeping.
package pvetest

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

// Emulator is a running emulator and a client for its operator token.
type Emulator struct {
	*sim.Server
	// Client speaks to Server with the operator token (corral's own).
	Client *pve.Client
	// Dir holds the emulator's state, volumes and guests.
	Dir string
}

// Option changes the emulator's options before it starts. Start's
// defaults: a fresh t.TempDir(), HTTPS on a free loopback port, one
// node, instant tasks (time scale 0).
type Option func(*sim.Options)

// Nodes starts an n-node cluster.
func Nodes(n int) Option { return func(o *sim.Options) { o.Nodes = n } }

// SharedStorage adds shared storages of the kinds given (model.SharedNFS,
// model.SharedRBD) that every node sees, as a cluster with NFS or Ceph.
func SharedStorage(kinds ...string) Option {
	return func(o *sim.Options) { o.SharedStorage = kinds }
}

// Version emulates PVE release v ("9.1", the default, or "8.4").
func Version(v string) Option { return func(o *sim.Options) { o.Version = v } }

// InDir keeps the emulator's state in dir (to restart on it, or to
// start from a copy of a saved state).
func InDir(dir string) Option { return func(o *sim.Options) { o.Dir = dir } }

// TimeScale runs the emulator's tasks at scale (1: real durations).
func TimeScale(scale float64) Option { return func(o *sim.Options) { o.TimeScale = &scale } }

// ViewRuntime runs the emulator's CTs in the unisolated filesystem view
// even where LXC could run them (sim.Options.ViewRuntime): for a test of
// state that starts many CTs, which in CI would be as many real
// containers. The process still needs CORRAL_SIM_UNISOLATED=1.
func ViewRuntime() Option { return func(o *sim.Options) { o.ViewRuntime = true } }

// InProcess serves the emulator to its clients in process, with no
// listener (faster; for tests that need no corral command line).
func InProcess() Option { return func(o *sim.Options) { o.Listener = sim.ListenNone } }

// Start runs an emulator until the test ends and returns it with a
// client for the operator token.
func Start(t testing.TB, opts ...Option) *Emulator {
	t.Helper()
	scale := 0.0
	// Nodes of 32 GiB (the emulator's figure for a new state) on every
	// machine, rather than the host's memory that real containers get by
	// default: a test's placement and memory admission do not depend on
	// the machine it runs on.
	// P-256 alone for TLS, which the client of a test binary offers
	// alone too (pve.clientCurves): Go's P-256 is assembly, not
	// instrumented by -race; with X25519 a handshake was an eighth of
	// internal/cli's CPU (sim.Options.TLSCurves).
	o := sim.Options{Listener: sim.ListenTLS, Listen: "127.0.0.1:0", TimeScale: &scale, NodeMemory: 32 << 30, TLSCurves: []tls.CurveID{tls.CurveP256}}
	for _, f := range opts {
		f(&o)
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ReserveGuestBlock(t, o.Dir)
	srv, err := sim.New(o)
	if err != nil {
		t.Fatalf("start the emulator: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	if o.Listener == sim.ListenTLS {
		scales.Store(srv.URL(), srv.TimeScale())
		t.Cleanup(func() { scales.Delete(srv.URL()) })
	}
	return &Emulator{Server: srv, Client: Client(t, srv, srv.Credentials().OperatorToken), Dir: o.Dir}
}

// scales are the time scales of the running emulators, by endpoint.
var scales sync.Map

// TimeScaleAt is the time scale of the emulator Start serves at
// endpoint, nil when none does: a corral command of a test pointed at it
// then polls its tasks at that scale (pve.Config.TaskTimeScale), as one
// that sourced a served emulator's env file does.
func TimeScaleAt(endpoint string) *float64 {
	s, _ := scales.Load(strings.TrimSuffix(endpoint, "/"))
	scale, _ := s.(*float64)
	return scale
}

// Client is a client of srv for token (a "user@realm!name=secret"
// token), trusting srv's certificate; mods change its configuration
// (a wrapped transport, a logger, …) before it is made.
func Client(t testing.TB, srv *sim.Server, token string, mods ...func(*pve.Config)) *pve.Client {
	t.Helper()
	cfg := pve.Config{Endpoint: srv.URL(), Token: token, HTTPClient: srv.HTTPClient(), TaskTimeScale: srv.TimeScale()}
	for _, m := range mods {
		m(&cfg)
	}
	c, err := pve.New(cfg)
	if err != nil {
		t.Fatalf("client for the emulator: %v", err)
	}
	if tr, ok := cfg.HTTPClient.Transport.(*http.Transport); ok {
		// Each client has its own transport, whose idle connections (and
		// their goroutines on both ends) would outlive the test.
		t.Cleanup(tr.CloseIdleConnections)
	}
	return c
}

// Transport makes a client send its requests through rt.
func Transport(rt http.RoundTripper) func(*pve.Config) {
	return func(c *pve.Config) { c.HTTPClient = &http.Client{Transport: rt} }
}

// blockClaimPort is the port on 127.<block>.0.0 at which a test's
// emulator holds its guest block for the whole machine (see
// ReserveGuestBlock).
const blockClaimPort = 2199

// guestBlockFile is where an emulator's state directory remembers its
// guest block, tried first at its start (internal/sim/guest's
// blockFile; TestStart_ownGuestBlock fails if that changes).
const guestBlockFile = "guest-block"

// ReserveGuestBlock gives a fresh state directory a guest address block
// (127.<block>.x.y, model.SetGuestBlock) that no other test emulator on
// this machine holds, in this process or another, and never block 1,
// which emulators without a reservation share (corral sim serve with
// --guest-ssh-port 0): where CTs run in the unisolated view their
// services (an agent on :9120, the quickstart's web server on :8080)
// listen on the host's loopback, and two emulators on one block would
// take each other's ports, depending on which test runs beside which.
// The emulator's own claim is per SSH port (0, a free one, in tests), so
// the reservation is held here, on one port for all test emulators,
// until the test ends. A directory that already has a block keeps it.
func ReserveGuestBlock(t testing.TB, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("reserve a guest block: %v", err)
	}
	p := filepath.Join(dir, guestBlockFile)
	if _, err := os.Stat(p); err == nil {
		return
	}
	for _, i := range rand.Perm(model.MaxGuestBlock - 1) {
		b := i + 2
		ln, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.%d.0.0", b), strconv.Itoa(blockClaimPort)))
		if err != nil {
			continue
		}
		if err := os.WriteFile(p, []byte(strconv.Itoa(b)+"\n"), 0o644); err != nil {
			ln.Close()
			t.Fatalf("reserve a guest block: %v", err)
		}
		t.Cleanup(func() { ln.Close() })
		return
	}
}
