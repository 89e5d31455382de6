// Package guest gives every running container of the emulated cluster a
// real SSH endpoint, as a CT's sshd on PVE would be.
//
// A Manager follows the cluster's running CTs (model.Cluster.RunningGuests).
// When a CT starts, its sshd begins to answer after the "bootdelay" task
// duration (scaled like every task), on the CT's own loopback address:
// the address GET /nodes/{node}/lxc/{vmid}/interfaces reports for its
// first netN on 127/8 (ip=dhcp gives 127.<block>.<vmid/256>.<vmid%256>,
// where block is the loopback block this emulator claimed: block.go).
// A CT without such an interface (no netN, ip=manual, only addresses
// outside loopback) has no reachable sshd, as on a real network it could
// not be reached from here either. The port is 22 when the emulator may
// bind it (as root, or with net.ipv4.ip_unprivileged_port_start <= 22),
// else FallbackPort for every CT; Manager.Port says which, and the sim
// server's env file exports it as CORRAL_SIM_GUEST_SSH_PORT.
//
// The sshd accepts root only, by public key, against the CT's
// /root/.ssh/authorized_keys (where create's ssh-public-keys land), read
// at each login. Its host keys are those the create task made in the
// CT's /etc/ssh (model.HostKeyTypes, fingerprints in the task log); a CT
// without any gets an ed25519 key at its first start. They last as long
// as the CT and change when the CT is recreated. Sessions take
// "exec" requests (no shell, no pty); "env" accepts LANG and LC_* as
// Debian's sshd_config does; "signal" signals the command's process
// group. Commands run in the CT's filesystem view (view.go). Where this
// machine allows no mount namespace, every command fails with exit
// status 126 and "guest exec unavailable: <reason>" on stderr.
//
// When a CT stops (or reboots), its sshd closes, its connections drop,
// and every process left in its sessions is killed.
package guest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/sim/aptproxy"
	"github.com/corralhq/corral/internal/sim/model"
)

// FallbackPort is the SSH port of every CT when port 22 cannot be bound.
const FallbackPort = 2222

// Options configure a Manager.
type Options struct {
	// Port is the port every CT's sshd listens on; 0 picks 22 when it
	// can be bound, else FallbackPort.
	Port int
	// Poll is how often the cluster's running CTs are checked; default
	// 50ms.
	Poll time.Duration
	// RetryWait is the first wait before an endpoint that did not start
	// is started again (retry); default 1s. It doubles per failure of
	// the same boot, up to a minute.
	RetryWait time.Duration
	Logger    *slog.Logger
	// AptSources are the package sources the CTs' apt proxy forwards to
	// (apt.go); nil means the host's own (/etc/apt/sources.list(.d)).
	AptSources []string
	// View runs the CTs in the unisolated filesystem view even where LXC
	// can run, as CORRAL_SIM_RUNTIME=view does for a whole process (it
	// still needs that view's opt-in): for one emulator of many in a
	// test process, whose test is about state, not containers.
	View bool
}

// Manager serves the SSH endpoints of a cluster's running CTs. Create it
// with Start; Close stops every endpoint.
type Manager struct {
	c    *model.Cluster
	log  *slog.Logger
	port int
	poll time.Duration
	// retryWait is Options.RetryWait.
	retryWait time.Duration

	sbOnce sync.Once
	sb     sandbox // see sandbox()

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	mu  sync.Mutex
	cts map[int]*ctServer
	// failures counts failed starts of a CT's endpoint per boot
	// ({vmid, pid}), for retry's wait.
	failures map[[2]int]int

	claim net.Listener // holds the guest address block (block.go)

	rt    *lxcRuntime // nil in the fallback view (lxc.go)
	rtErr error       // why there is no runtime
	// refused is why CTs may not start (no runtime and no opt-in to the
	// unisolated view); nil when they may.
	refused error

	vmView *ViewVMs // the view's VM runtime once asked for (ViewVMs), under mu

	aptProxy string          // the apt proxy's URL for CTs, "" without one (apt.go)
	apt      *aptproxy.Proxy // that proxy, closed with the manager
}

// Start probes whether guest exec works on this machine and begins to
// follow c's running CTs.
func Start(c *model.Cluster, opts Options) (*Manager, error) {
	if c == nil {
		return nil, errors.New("guest: no cluster")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.RetryWait <= 0 {
		opts.RetryWait = time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	port := choosePort(opts.Port)
	block, claim, err := claimBlock(c.Dir(), port)
	if err != nil {
		return nil, err
	}
	if err := c.SetGuestBlock(block); err != nil {
		claim.Close()
		return nil, err
	}
	go holdClaim(claim)
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		c: c, log: log.WithGroup("guest"), port: port, poll: opts.Poll, retryWait: opts.RetryWait,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1), cts: map[int]*ctServer{},
		claim: claim,
	}
	if opts.View {
		m.rtErr = errors.New("the emulator's options ask for the unisolated view")
		m.refuseUnisolated()
	} else if m.rt, m.rtErr = newLXCRuntime(c.Dir(), m.log); m.rtErr != nil {
		m.refuseUnisolated()
	}
	// Unprivileged CTs get PVE's user namespace, and their files shifted
	// ids on disk, only where their containers really have it.
	c.SetIDShift(m.rt != nil && m.rt.userns == nil)
	switch {
	case m.rt == nil:
		if m.refused == nil {
			m.log.Warn("unprivileged CTs get no user namespace in the fallback view: their root is the emulator's user and their files keep the container's ids on disk")
		}
	case m.rt.userns != nil:
		m.log.Warn("unprivileged CTs get no user namespace: their root is host root and their files keep the container's ids on disk", "reason", m.rt.userns)
	}
	m.startAptProxy(opts.AptSources)
	c.SetRunHook(m.sync) // a stopped CT's sessions end with its stop
	if m.rt != nil {
		c.SetShutdownHook(m.shutdown)
	}
	go m.loop()
	return m, nil
}

// choosePort is want, or 22 when a loopback address may bind it, else
// FallbackPort.
func choosePort(want int) int {
	if want != 0 {
		return want
	}
	ln, err := net.Listen("tcp", "127.255.255.254:22")
	if err != nil {
		return FallbackPort
	}
	ln.Close()
	return 22
}

// Block is the loopback block of this emulator's guest addresses,
// 127.<block>.x.y (see model.SetGuestBlock).
func (m *Manager) Block() int { return m.c.GuestBlock() }

// Port is the port of every CT's sshd.
func (m *Manager) Port() int { return m.port }

// ExecUnavailable is nil when commands can run inside CTs, else the
// reason they cannot (tests skip with it, apply reports it).
func (m *Manager) ExecUnavailable() error {
	if m.rt != nil {
		m.sbOnce.Do(func() {}) // LXC needs no probe; orders this after DisableExec
		if m.sb.err == nil {
			return nil
		}
	}
	if err := m.sandbox().err; err != nil {
		return fmt.Errorf("guest exec unavailable: %w", err)
	}
	return nil
}

// DisableExec makes every guest command fail as on a machine without
// namespaces, with reason: for tests of how clients report that. It must
// be called before the first command runs; it reports whether it took.
func (m *Manager) DisableExec(reason string) bool {
	took := false
	m.sbOnce.Do(func() {
		m.sb = sandbox{err: errors.New(reason)}
		took = true
	})
	return took
}

// sandbox probes the machine once, on first use (so that an emulator
// whose CTs never run a command never starts a helper).
func (m *Manager) sandbox() sandbox {
	m.sbOnce.Do(func() {
		m.sb = probeSandbox(m.c.Dir())
		if m.sb.err != nil {
			m.log.Warn("guest exec unavailable: commands sent to containers will fail", "reason", m.sb.err)
		}
	})
	return m.sb
}

// UnisolatedEnv, set to 1, lets CTs run in the unisolated fallback view
// where LXC cannot run. Without it the emulator refuses to start CTs
// there: a guest command in the view runs in the host's PID and mount
// namespaces (a quickstart's pkill would reach the host's processes), so
// it must never be what a newcomer gets by default.
const UnisolatedEnv = "CORRAL_SIM_UNISOLATED"

// refuseUnisolated runs where LXC cannot: without the opt-in, every CT
// start task and guest command fails with one message naming the fix;
// with it, the view runs and the log says loudly what that means.
func (m *Manager) refuseUnisolated() {
	if os.Getenv(UnisolatedEnv) == "1" {
		m.log.Warn("GUEST COMMANDS RUN UNISOLATED ON THIS HOST ("+UnisolatedEnv+"=1): they run in the host's PID, mount and network namespaces and can see and kill your processes", "reason", m.rtErr)
		return
	}
	m.refused = fmt.Errorf("the emulator cannot isolate containers on this machine: %w; "+
		"install Debian's lxc (apt-get install --no-install-recommends lxc) and run as root, "+
		"or run with --unisolated-guests / %s=1 to run guest commands directly on this host (they can see and kill your processes)",
		m.rtErr, UnisolatedEnv)
	// Info, not louder: whoever starts a CT gets the message (the start
	// task's error, apply's check, `corral sim serve`'s banner) once.
	m.log.Info("CTs will not start", "reason", m.refused)
	m.sbOnce.Do(func() { m.sb = sandbox{err: m.refused} })
	m.c.SetStartGuard(func(int) error { return m.refused })
}

// Refused is nil when CTs may start, else why not and the fix (no LXC
// and no opt-in to the unisolated view): preflight reports it before a
// manifest's first change.
func (m *Manager) Refused() error { return m.refused }

// Isolated reports whether CTs run as real containers (LXC), and if not,
// why they run in the fallback view.
func (m *Manager) Isolated() (bool, error) { return m.rt != nil, m.rtErr }

// UserNamespace reports whether unprivileged CTs run in PVE's user
// namespace (container root = host uid 100000), and if not, why not.
func (m *Manager) UserNamespace() (bool, error) {
	if m.rt == nil {
		return false, m.rtErr
	}
	return m.rt.userns == nil, m.rt.userns
}

// Endpoint is host:port of CT vmid's sshd once it answers.
func (m *Manager) Endpoint(vmid int) (string, bool) {
	m.mu.Lock()
	s := m.cts[vmid]
	m.mu.Unlock()
	if s == nil {
		return "", false
	}
	select {
	case <-s.ready:
		return s.addr, s.listenErr == nil
	default:
		return "", false
	}
}

// Close stops every endpoint and kills the processes of their sessions.
func (m *Manager) Close() error {
	m.c.SetRunHook(nil)
	m.c.SetShutdownHook(nil)
	m.c.SetStartGuard(nil)
	m.cancel()
	<-m.done
	m.mu.Lock()
	cts, vms := m.cts, m.vmView
	m.cts = map[int]*ctServer{}
	m.mu.Unlock()
	for _, s := range cts {
		s.stop()
	}
	if vms != nil {
		vms.close()
	}
	m.claim.Close()
	if m.apt != nil {
		m.apt.Close() // its server and CONNECT tunnels: CTs lose their way out
	}
	if m.rt != nil {
		m.rt.close()
	}
	return nil
}

// Expose makes target (host:port in the emulator's namespace, the PVE
// API) reachable from every CT at GatewayIP:port, as a CT reaches its
// node's API on its bridge. It fails without the LXC runtime's network.
func (m *Manager) Expose(port int, target string) error {
	if m.rt == nil || m.rt.net == nil {
		return errors.New("guest: CTs have no network of their own here")
	}
	return m.rt.net.forward(net.JoinHostPort(GatewayIP, strconv.Itoa(port)), target)
}

// FromBridge reports whether remote (an API request's client address)
// is a connection the bridge's forwarders relay from inside a CT.
func (m *Manager) FromBridge(remote string) bool {
	if m.rt == nil || m.rt.net == nil {
		return false
	}
	_, ok := m.rt.net.relayed.Load(remote)
	return ok
}

func (m *Manager) loop() {
	defer close(m.done)
	t := time.NewTicker(m.poll)
	defer t.Stop()
	// The running CTs are listed again when a guest changed since the
	// last look, when kicked, and every fullSync polls in any case.
	const fullSync = 20
	var last uint64
	for n, force := 0, true; ; n++ {
		if gen := m.c.GuestGeneration(); force || gen != last || n%fullSync == 0 {
			last = gen
			m.sync()
		}
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			force = false
		case <-m.wake:
			force = true
		}
	}
}

// sync starts an endpoint for every newly running CT and stops those of
// CTs that stopped, restarted (new PID) or changed address. The loop runs
// it, and the cluster's run hook, so calls may overlap: each stale
// endpoint leaves the map under m.mu, and so is stopped by one call.
func (m *Manager) sync() {
	running := map[int]model.RunningGuest{}
	for _, g := range m.c.RunningGuests() {
		if g.Address != "" {
			running[g.VMID] = g
		}
	}
	var stale []*ctServer
	m.mu.Lock()
	for vmid, s := range m.cts {
		if g, ok := running[vmid]; !ok || g.PID != s.pid || net.JoinHostPort(g.Address, strconv.Itoa(m.port)) != s.addr {
			stale = append(stale, s)
			delete(m.cts, vmid)
		}
	}
	m.mu.Unlock()
	// The old sshd of a restarted CT frees its address before the new
	// one binds it.
	for _, s := range stale {
		s.stop()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	for vmid, g := range running {
		if m.cts[vmid] == nil {
			s := newCTServer(m, g)
			m.cts[vmid] = s
			go s.run()
		}
	}
}

// shutdown asks CT vmid's init to power off and waits for it (at most
// timeout): the shutdown task's clean stop. The sync that follows the
// task's state change then finds the container gone.
func (m *Manager) shutdown(vmid int, timeout time.Duration) bool {
	m.mu.Lock()
	s := m.cts[vmid]
	m.mu.Unlock()
	if s == nil {
		return true
	}
	s.mu.Lock()
	ct := s.ct
	s.mu.Unlock()
	if ct == nil {
		return true
	}
	return ct.shutdown(timeout)
}

// retry drops s, whose container or sshd did not start (a start that took
// longer than LXC's wait on a loaded host, an address not yet free), so
// that a later sync starts the CT's endpoint again, as long as the model
// still has that CT running this boot. Without it the CT would run in
// the model with no sshd until its next restart. The wait doubles per
// failure of the same boot, from Options.RetryWait (1 s) up to a minute.
func (m *Manager) retry(s *ctServer) {
	m.mu.Lock()
	key := [2]int{s.vmid, s.pid}
	if m.failures == nil {
		m.failures = map[[2]int]int{}
	}
	n := m.failures[key]
	m.failures[key] = n + 1
	m.mu.Unlock()
	select {
	case <-m.ctx.Done():
		return
	case <-time.After(min(m.retryWait<<min(n, 6), time.Minute)):
	}
	m.mu.Lock()
	mine := m.cts[s.vmid] == s
	if mine {
		delete(m.cts, s.vmid)
	} else {
		delete(m.failures, key) // that boot ended: no later start counts on it
	}
	m.mu.Unlock()
	if mine {
		s.stop()
		m.kick()
	}
}

// kick makes the loop look at the cluster now.
func (m *Manager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}
