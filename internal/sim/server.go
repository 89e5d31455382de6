package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/hostcheck"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/schema"
)

// Listener modes (Options.Listener).
const (
	ListenTLS  = "tls"  // HTTPS with the emulator's self-signed certificate (default)
	ListenHTTP = "http" // plain HTTP
	ListenNone = "none" // no socket: HTTPClient() calls the handler in-process
)

// Options configure a Server. Dir is required; everything else has PVE's
// defaults (one node "pve", version 9.1, real task durations, port 8006 on
// loopback when Listen is empty and a listener is asked for).
type Options struct {
	Dir      string
	Listen   string // host:port; "" means 127.0.0.1:0 (a free port)
	Listener string // tls (default) | http | none
	Nodes    int
	Version  string
	// SharedStorage adds shared storages seen by every node:
	// model.SharedNFS ("nfs") and/or model.SharedRBD ("rbd").
	SharedStorage []string
	TimeScale     *float64 // nil = 1.0 (real durations); 0 = instant
	Faults        string   // --faults spec, see faults.go
	Logger        *slog.Logger

	// GuestSSHPort is the port of every running CT's sshd. 0 picks a free
	// port, so that emulators in parallel (tests, the embedded one) do not
	// fight over the CT addresses they share; PVEPort asks for 22 as on
	// PVE when it can be bound, else guest.FallbackPort (corral sim serve).
	GuestSSHPort int

	// RealTemplates makes local:vztmpl/debian-12-standard_… a real
	// Debian 12 (model.EnsureRealTemplate: built once with mmdebstrap,
	// cached); the environment variable CORRAL_SIM_REAL_TEMPLATES=1 does
	// the same. Off, templates are tiny trees that boot no init.
	RealTemplates bool

	// RealVMs makes the VMs real QEMU guests (vmruntime.go) when QEMU
	// and the cached VM image are there; RealVMsEnv=1 does the same.
	// Off, VMs are state only.
	RealVMs bool

	// AptSources are the package sources CTs' apt reaches through the
	// emulator's proxy on their bridge; nil means the host's own
	// (/etc/apt/sources.list and sources.list.d). Tests set a fake mirror.
	AptSources []string

	// ViewRuntime runs the CTs in the unisolated filesystem view where
	// LXC could run them (guest.Options.View): for tests about state,
	// not containers. It still needs CORRAL_SIM_UNISOLATED=1.
	ViewRuntime bool

	// NodeMemory is every node's memory in bytes. Set, a CT start that
	// would take the memory of the CTs running on its node past it fails
	// (memory.go); 0 means the host's memory with real containers (the
	// LXC runtime) and no admission otherwise.
	NodeMemory int64

	// AllowedHosts are more names the API answers to in the Host header
	// (corral sim serve --allowed-host), besides its certificate's names,
	// localhost, the --listen name, any IP address and, off the
	// loopback, the machine's hostname (package hostcheck).
	AllowedHosts []string

	// TLSCurves are the key exchanges the HTTPS listener accepts, most
	// preferred first; empty means Go's defaults, which put the hybrid
	// X25519MLKEM768 first as PVE 9's OpenSSL does. Tests' emulators
	// (internal/pvetest) ask for P-256 alone: under -race Go's X25519 is
	// instrumented Go code, four scalar multiplications a handshake, and
	// P-256 is assembly.
	TLSCurves []tls.CurveID
}

// Server is a running emulator. Create it with New; Close it when done.
type Server struct {
	opts    Options
	log     *slog.Logger
	cluster *model.Cluster
	api     *schema.API
	routes  map[string]handler // "METHOD /schema/path" -> handler
	faults  *faults
	reqlog  *requestLog
	reads   readCache // encoded answers of the cached GET routes
	guests  *guest.Manager
	vms     *vmRuntime // nil: state-only VMs

	ln       net.Listener
	srv      *http.Server
	fresh    freshConns
	clientTr *http.Transport // HTTPClient's one transport (closeMu), made on first use
	url      string
	certPEM  []byte
	certFP   string
	tlsCert  tls.Certificate
	dirLock  *os.File
	closeMu  sync.Mutex
	closed   bool
	serveErr chan error
}

// New opens (or creates) the emulated cluster in opts.Dir and starts
// serving according to opts.Listener.
func New(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("sim: Options.Dir is required")
	}
	if opts.Listener == "" {
		opts.Listener = ListenTLS
	}
	if opts.Version == "" {
		opts.Version = "9.1"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mopts, err := modelOptions(opts, log)
	if err != nil {
		return nil, err
	}
	api, err := schema.Load(opts.Version)
	if err != nil {
		return nil, fmt.Errorf("sim: load schema: %w", err)
	}
	fl, err := parseFaults(opts.Faults)
	if err != nil {
		return nil, fmt.Errorf("sim: --faults: %w", err)
	}
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	c, err := model.Open(mopts)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s := &Server{opts: opts, log: log.WithGroup("sim"), cluster: c, api: api, faults: fl, reqlog: newRequestLog(), dirLock: lock}
	c.SetTaskHook(s.faults.taskHook)
	if err := s.start(log); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// modelOptions are the cluster's options for opts; with real templates
// asked for, it builds (or finds cached) the real template first.
func modelOptions(opts Options, log *slog.Logger) (model.Options, error) {
	mopts := model.Options{Dir: opts.Dir, Nodes: opts.Nodes, Version: opts.Version, SharedStorage: opts.SharedStorage, Logger: log}
	if opts.TimeScale != nil {
		mopts.TimeScale, mopts.HasTimeScale = *opts.TimeScale, true
	}
	if opts.RealTemplates || os.Getenv(model.RealTemplateEnv) == "1" {
		p, err := model.EnsureRealTemplate(context.Background(), os.Stderr)
		if err != nil {
			return model.Options{}, fmt.Errorf("sim: %w", err)
		}
		mopts.RealTemplate = p
	}
	return mopts, nil
}

// start brings up what serves the opened cluster: the guest layer, memory
// admission, the certificate, the routes, the listener and the env file.
// On an error the caller closes s, which undoes what started.
func (s *Server) start(log *slog.Logger) error {
	opts, c := s.opts, s.cluster
	var err error
	port := opts.GuestSSHPort
	switch port {
	case 0:
		if port, err = freePort(); err != nil {
			return err
		}
	case PVEPort:
		port = 0 // guest.Start: 22 when it can, else the fallback
	}
	if s.guests, err = guest.Start(c, guest.Options{Port: port, Logger: log, AptSources: opts.AptSources, View: opts.ViewRuntime}); err != nil {
		return err
	}
	s.vms = wireVMRuntime(context.Background(), c, filepath.Join(opts.Dir, "run"), opts.RealVMs, s.guests.Port(), log)
	if rt := s.guests.ViewVMs(); s.vms == nil && rt != nil {
		// CTs run in the unisolated view: VMs get its guests, which SSH
		// reaches without QEMU (guest.ViewVMs).
		c.SetVMRuntime(rt)
	}
	isolated, _ := s.guests.Isolated()
	mem, err := nodeMemory(opts, isolated, len(c.Nodes()))
	if err != nil {
		return err
	}
	c.SetMemoryAdmission(mem)
	if err := s.loadOrMakeCert(); err != nil {
		return err
	}
	s.registerRoutes() // after the certificate: GET /nodes gives its fingerprint
	if opts.Listener == ListenNone {
		s.url = "https://pve.sim.invalid:8006"
	} else if err := s.listen(); err != nil {
		return err
	}
	return s.writeEnv()
}

func (s *Server) listen() error {
	addr := s.opts.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: listen %s: %w", addr, err)
	}
	s.srv = &http.Server{
		Handler:           s.allowedHosts(addr).Handler(s.Handler(), false),
		ReadHeaderTimeout: 10 * time.Second,
		// pveproxy speaks HTTP/1.1 only; an empty TLSNextProto disables h2
		// and lets the envelope writer set PVE's reason phrases.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState:    s.fresh.track,
	}
	scheme := "http"
	if s.opts.Listener == ListenTLS {
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{s.tlsCert}, MinVersion: tls.VersionTLS12, CurvePreferences: s.opts.TLSCurves}
		ln = tls.NewListener(ln, s.srv.TLSConfig)
		scheme = "https"
	}
	s.ln = ln
	s.url = scheme + "://" + ln.Addr().String()
	// CTs reach the API at the bridge gateway, https://10.0.0.1:8006,
	// as a PVE CT reaches its node (guest.Manager.Expose).
	if err := s.guests.Expose(PVEAPIPort, ln.Addr().String()); err != nil {
		s.log.Debug("CTs cannot reach the API", "err", err)
	}
	s.serveErr = make(chan error, 1)
	go func() { s.serveErr <- s.srv.Serve(ln) }()
	return nil
}

// allowedHosts are the Host names the API answers to on addr: a web page
// that points its name at the emulator (DNS rebinding) is refused, as it
// could otherwise read the cluster through a browser holding a ticket.
// The certificate's names are the emulator's own.
func (s *Server) allowedHosts(addr string) *hostcheck.Allow {
	allow := hostcheck.ForListen(addr, s.opts.AllowedHosts, "corral sim serve --allowed-host")
	if leaf, err := x509.ParseCertificate(s.tlsCert.Certificate[0]); err == nil {
		allow.Add(leaf.DNSNames...)
	}
	return allow
}

// Dir is the state directory: after Close, a copy of it starts an
// emulator with the same guests, volumes and archives.
func (s *Server) Dir() string { return s.opts.Dir }

// TimeScale is the scale the emulator runs its tasks at (nil: real
// durations), for a client that polls them (pve.Config.TaskTimeScale).
func (s *Server) TimeScale() *float64 { return s.opts.TimeScale }

// URL is the endpoint clients use (without /api2/json), e.g.
// https://127.0.0.1:8006.
func (s *Server) URL() string { return s.url }

// Fingerprint is the SHA-256 fingerprint of the server certificate in
// PVE's colon-separated upper-case hex form.
func (s *Server) Fingerprint() string { return s.certFP }

// Cluster exposes the model, for tests that inspect the data plane.
func (s *Server) Cluster() *model.Cluster { return s.cluster }

// Guests serves the SSH endpoints of the running containers.
func (s *Server) Guests() *guest.Manager { return s.guests }

// Credentials are the bootstrap secrets written to Dir/env.
func (s *Server) Credentials() model.BootstrapCredential { return s.cluster.Credentials() }

// HTTPClient returns a client for this server: for ListenNone a client
// whose transport calls the handler directly; otherwise one that trusts
// exactly this server's certificate. The clients share one transport,
// so that they reuse its connections: a test makes clients by the dozen,
// and each new connection is a TLS handshake, under -race a sixth of
// internal/apply's CPU when each client had its own. Close closes its
// idle connections.
func (s *Server) HTTPClient() *http.Client {
	if s.opts.Listener == ListenNone {
		return &http.Client{Transport: &handlerTransport{h: s.Handler()}}
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.clientTr == nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.certPEM)
		s.clientTr = &http.Transport{
			// It offers the key exchanges the listener accepts: with
			// TLSCurves set (tests' P-256), Go's default offer would
			// compute an X25519MLKEM768 and an X25519 share for each
			// handshake, be asked for P-256 again, and compute that.
			TLSClientConfig:     &tls.Config{RootCAs: pool, ServerName: "pve.sim.invalid", CurvePreferences: s.opts.TLSCurves},
			MaxIdleConnsPerHost: 16,
		}
	}
	return &http.Client{Transport: s.clientTr}
}

// Close stops the listener and the cluster's workers.
func (s *Server) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	clientTr := s.clientTr
	s.closeMu.Unlock()
	var err error
	if s.srv != nil {
		// net/http's Shutdown counts a connection that has not sent a
		// request yet as busy for its first 5 seconds; a client with
		// parallel requests leaves such spares in its pool, and every
		// stop waited for them. They carry no request: close them.
		s.fresh.closeAll()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = s.srv.Shutdown(ctx)
		cancel()
		if err != nil {
			s.srv.Close()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// A spare connection opened after closeAll: closing it is
			// what a stop does, not a failure.
			err = nil
		}
	}
	if clientTr != nil {
		clientTr.CloseIdleConnections()
	}
	if s.guests != nil {
		s.guests.Close()
	}
	s.vms.close()
	err = errors.Join(err, s.cluster.Close())
	if s.dirLock != nil {
		// Unlocked before it is closed: a child process forked at this
		// moment (by any goroutine of this process) holds a copy of the
		// descriptor until it execs, and the lock, which belongs to the
		// open file, would outlive the close until then; a new emulator
		// on this directory right after the stop found it busy (a test
		// that restarts one, with other tests forking beside it).
		unix.Flock(int(s.dirLock.Fd()), unix.LOCK_UN)
		s.dirLock.Close()
	}
	return err
}

// lockDir takes an exclusive flock on Dir/.lock so that two emulators
// never write one state directory.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("sim: state directory %s is in use by another corral emulator (corral's local one, which corral sim stop stops; corral sim serve; or a command with CORRAL_SIM_INPROCESS=1): stop it, or point corral at it with '. %s'", dir, filepath.Join(dir, "env"))
	}
	return f, nil
}

// loadOrMakeCert keeps one self-signed certificate per state directory so
// that its fingerprint (pinned by clients) survives restarts, as a PVE
// node's pve-ssl.pem does.
func (s *Server) loadOrMakeCert() error {
	certPath := filepath.Join(s.opts.Dir, "pve-ssl.pem")
	keyPath := filepath.Join(s.opts.Dir, "pve-ssl.key")
	certPEM, err1 := os.ReadFile(certPath)
	keyPEM, err2 := os.ReadFile(keyPath)
	if err1 != nil || err2 != nil {
		certPEM, keyPEM, err1 = selfSigned()
		if err1 != nil {
			return fmt.Errorf("sim: make certificate: %w", err1)
		}
		if err := model.WriteFileAtomic(keyPath, keyPEM, 0o600); err != nil {
			return err
		}
		if err := model.WriteFileAtomic(certPath, certPEM, 0o644); err != nil {
			return err
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("sim: load certificate: %w", err)
	}
	s.tlsCert, s.certPEM = cert, certPEM
	sum := sha256.Sum256(cert.Certificate[0])
	hexs := make([]string, len(sum))
	for i, b := range sum {
		hexs[i] = fmt.Sprintf("%02X", b)
	}
	s.certFP = strings.Join(hexs, ":")
	return nil
}

func selfSigned() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "pve.sim.invalid", Organization: []string{"PVE Cluster Node (corral sim)"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"pve.sim.invalid", "localhost"},
		// The bridge's gateway too: containers reach the API there, as a
		// PVE node's certificate names the node's own addresses.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(guest.GatewayIP)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// EnvFile renders Dir/env: shell-sourceable exports of the endpoint, the
// operator token, the fingerprint and root's credentials. An emulator
// that serves no port (corral's embedded one, started inside each
// command) has no endpoint to give: its file instead unsets the
// connection variables, so that sourcing it makes corral use this very
// state through the embedded emulator, and says how to serve it.
func (s *Server) EnvFile() string {
	dir := s.opts.Dir
	if s.opts.Listener == ListenNone {
		return "# written by corral's embedded Proxmox VE emulator, which serves no port: corral\n" +
			"# starts it inside each command when PROXMOX_VE_ENDPOINT is unset. Sourcing this\n" +
			"# file (. " + filepath.Join(dir, "env") + ") clears the connection variables so that\n" +
			"# corral uses it. To reach this state over HTTPS instead, run\n" +
			"#   corral sim serve --state " + dir + "\n" +
			"# which rewrites this file with its endpoint, API token and fingerprint.\n" +
			"unset PROXMOX_VE_ENDPOINT PROXMOX_VE_API_TOKEN PROXMOX_VE_FINGERPRINT PROXMOX_VE_CA_FILE PROXMOX_VE_INSECURE CORRAL_INSECURE_PLAIN_HTTP CORRAL_SIM_GUEST_SSH_PORT CORRAL_SIM_TIME_SCALE PVE_ROOT_PASSWORD PVE_ROOT_TOKEN\n"
	}
	cr := s.cluster.Credentials()
	lines := []string{
		"export PROXMOX_VE_ENDPOINT=" + shellQuote(s.url),
		"export PROXMOX_VE_API_TOKEN=" + shellQuote(cr.OperatorToken),
		"export PROXMOX_VE_FINGERPRINT=" + shellQuote(s.certFP),
		"export PVE_ROOT_PASSWORD=" + shellQuote(cr.RootPassword),
		"export PVE_ROOT_TOKEN=" + shellQuote(cr.RootToken),
		"export CORRAL_SIM_GUEST_SSH_PORT=" + strconv.Itoa(s.guests.Port()),
	}
	if ts := s.opts.TimeScale; ts != nil {
		// corral then polls a task when it is expected to end at this
		// scale, not at Proxmox's durations (pve.Config.TaskTimeScale).
		lines = append(lines, "export CORRAL_SIM_TIME_SCALE="+strconv.FormatFloat(*ts, 'g', -1, 64))
	}
	return "# written by corral sim serve; source it: . " + filepath.Join(dir, "env") + "\n" + strings.Join(lines, "\n") + "\n"
}

func (s *Server) writeEnv() error {
	return model.WriteFileAtomic(filepath.Join(s.opts.Dir, "env"), []byte(s.EnvFile()), 0o600)
}

func shellQuote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }

// PVEPort as Options.GuestSSHPort asks for the real SSH port, 22.
const PVEPort = 22

// ExposeToGuests makes the host's TCP service at target reachable from
// the emulator's CTs, on the bridge gateway at port, as a service on the
// LAN is for a PVE CT (tests serve a Git repository to an agent in a CT
// this way). It returns the address the CTs use: the gateway's, or
// target itself where CTs share the host's network (the fallback view).
func (s *Server) ExposeToGuests(port int, target string) (string, error) {
	if isolated, _ := s.guests.Isolated(); !isolated {
		return target, nil
	}
	if err := s.guests.Expose(port, target); err != nil {
		return "", err
	}
	return net.JoinHostPort(guest.GatewayIP, strconv.Itoa(port)), nil
}

// PVEAPIPort is where CTs reach the emulator's API on their gateway
// (guest.GatewayIP), as pveproxy listens on a PVE node.
const PVEAPIPort = 8006

// freePort finds a TCP port free on loopback.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("sim: find a port for guest SSH: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freshConns are the server's connections that have sent no request
// yet (http.StateNew), which Close closes at once instead of letting
// Shutdown wait for them.
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
}

// track is the http.Server's ConnState hook.
func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st != http.StateNew {
		delete(f.conns, c)
		return
	}
	if f.conns == nil {
		f.conns = map[net.Conn]bool{}
	}
	f.conns[c] = true
}

func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
	}
	clear(f.conns)
}
