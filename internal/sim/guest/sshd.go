package guest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"

	"github.com/corralhq/corral/internal/sim/model"
)

// serverVersion is what a Debian 12 CT's sshd announces.
const serverVersion = "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u7"

// ctServer is the sshd of one running CT (one boot: a restart gets a new one).
type ctServer struct {
	m    *Manager
	vmid int
	pid  int
	addr string // host:port

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ready  chan struct{} // closed once listening (or failed to)

	listenErr error // set before ready closes
	rootDir   string
	ct        *lxcCT         // the running container (LXC runtime); set before ready closes
	vm        *viewVM        // set when this sshd is a view VM's (vmview.go), nil for a CT
	inner     net.Listener   // the sshd's address inside the container, relayed here
	onBridge  []net.Listener // the sshd at the CT's bridge addresses, relayed here

	mu       sync.Mutex
	stopped  bool
	ln       net.Listener
	conns    map[net.Conn]struct{}
	sessions map[*exec.Cmd]string // running helper → its mount namespace
	leftover map[string]string    // mount namespace → work dir, of ended sessions with live processes
}

func newCTServer(m *Manager, g model.RunningGuest) *ctServer {
	ctx, cancel := context.WithCancel(m.ctx)
	s := &ctServer{
		m: m, vmid: g.VMID, pid: g.PID, addr: net.JoinHostPort(g.Address, strconv.Itoa(m.port)),
		ctx: ctx, cancel: cancel, ready: make(chan struct{}),
		conns: map[net.Conn]struct{}{}, sessions: map[*exec.Cmd]string{}, leftover: map[string]string{},
	}
	s.wg.Add(1) // run
	return s
}

// run waits for the boot delay, then serves until stop.
// newCTServer counted it in s.wg.
func (s *ctServer) run() {
	defer s.wg.Done()
	if s.m.rt != nil && s.vm == nil {
		if err := s.boot(); err != nil {
			if !errors.Is(err, context.Canceled) {
				s.m.log.Error("CT did not start; trying again", "vmid", s.vmid, "err", err)
				go s.m.retry(s)
			}
			s.listenErr = err
			close(s.ready)
			return
		}
	}
	t := time.NewTimer(s.m.c.TaskDuration("bootdelay"))
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		s.listenErr = s.ctx.Err()
		close(s.ready)
		return
	case <-t.C:
	}
	cfg, err := s.serverConfig()
	if err == nil {
		s.mu.Lock()
		if s.stopped {
			err = context.Canceled
		} else {
			s.ln, err = net.Listen("tcp", s.addr)
		}
		s.mu.Unlock()
	}
	s.listenErr = err
	close(s.ready)
	if err != nil {
		if !errors.Is(err, context.Canceled) && s.vm != nil {
			s.m.log.Error("VM sshd did not start", "vmid", s.vmid, "addr", s.addr, "err", err)
		} else if !errors.Is(err, context.Canceled) {
			s.m.log.Error("CT sshd did not start; trying again", "vmid", s.vmid, "addr", s.addr, "err", err)
			go s.m.retry(s)
		}
		return
	}
	s.m.log.Info("CT sshd listening", "vmid", s.vmid, "addr", s.addr)
	s.m.mu.Lock()
	delete(s.m.failures, [2]int{s.vmid, s.pid})
	s.m.mu.Unlock()
	if s.ct != nil {
		s.listenInside()
		s.listenOnBridge()
	}
	s.accept(cfg)
}

// listenInside makes the CT's sshd answer inside the CT at the same
// address, as a PVE CT's own sshd does (a health check of port 22).
func (s *ctServer) listenInside() {
	ln, err := listenIn("/proc/"+strconv.Itoa(s.ct.pid)+"/ns/net", s.addr)
	if err != nil {
		s.m.log.Warn("CT sshd not reachable from inside the CT", "vmid", s.vmid, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		ln.Close()
		return
	}
	s.inner = ln
	go serveRelay(ln, s.addr)
}

// accept serves every connection to the listener until it closes or the
// server stops, each counted in s.wg.
func (s *ctServer) accept(cfg *ssh.ServerConfig) {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(nc, cfg)
			s.mu.Lock()
			delete(s.conns, nc)
			s.mu.Unlock()
		}()
	}
}

// boot starts the CT's container (LXC runtime).
func (s *ctServer) boot() error {
	root, mps, err := s.mounts()
	if err != nil {
		return err
	}
	run, err := s.m.c.GuestRunConfig(s.vmid)
	if err != nil {
		return err
	}
	// A destroy cannot remove the rootfs while a CT runs; check it
	// still runs this boot before LXC mounts it.
	if s.m.c.GuestPID(s.vmid) != s.pid {
		return context.Canceled
	}
	// PVE's pre-start setup, and the emulator's own files for this run.
	if err := s.m.c.GuestPreStart(s.vmid, root); err != nil {
		s.m.log.Warn("CT's pre-start network setup", "vmid", s.vmid, "err", err)
	}
	if err := setIfupdownDropIn(root); err != nil {
		s.m.log.Warn("CT's networking.service drop-in", "vmid", s.vmid, "err", err)
	}
	if err := s.m.setAptProxy(root); err != nil {
		s.m.log.Warn("CT's apt proxy setting", "vmid", s.vmid, "err", err)
	}
	ct, err := s.m.rt.start(s.ctx, s.vmid, root, mps, run, 30*time.Second)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ct = ct
	s.mu.Unlock()
	return nil
}

// stop closes the sshd and its connections and kills what the CT's
// sessions left running.
func (s *ctServer) stop() {
	s.mu.Lock()
	s.stopped = true
	if s.ln != nil {
		s.ln.Close()
	}
	if s.inner != nil {
		s.inner.Close()
	}
	for _, ln := range s.onBridge {
		ln.Close()
	}
	for nc := range s.conns {
		nc.Close()
	}
	var nss []string
	for cmd, ns := range s.sessions {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		nss = append(nss, ns)
	}
	for ns := range s.leftover {
		nss = append(nss, ns)
	}
	root := s.rootDir
	s.mu.Unlock()
	s.cancel()
	killNamespaces(nss, root)
	s.wg.Wait()
	s.mu.Lock()
	ct := s.ct
	s.mu.Unlock()
	if ct != nil {
		ct.kill() // every process of its sessions goes with it
	}
	s.mu.Lock()
	for _, work := range s.leftover {
		removeWork(work)
	}
	s.leftover = nil
	s.mu.Unlock()
}

// serverConfig loads the CT's host key and checks logins against its
// authorized_keys.
func (s *ctServer) serverConfig() (*ssh.ServerConfig, error) {
	if s.vm != nil {
		return s.vmServerConfig()
	}
	root, _, err := s.mounts()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.rootDir = root
	s.mu.Unlock()
	var signers []ssh.Signer
	// A key is written into the rootfs only while the CT still runs,
	// so a destroy never finds a half-written /etc/ssh.
	running, err := s.m.c.WithRunningGuest(s.vmid, s.pid, func() (err error) {
		signers, err = hostKeys(root)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	if !running {
		return nil, context.Canceled // stopped during the boot delay
	}
	cfg := &ssh.ServerConfig{
		ServerVersion: serverVersion,
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if meta.User() != "root" {
				return nil, fmt.Errorf("login as %q: only root may log in to an emulated CT", meta.User())
			}
			if !authorized(root, key) {
				return nil, errors.New("key not in /root/.ssh/authorized_keys")
			}
			return &ssh.Permissions{}, nil
		},
	}
	for _, k := range signers {
		cfg.AddHostKey(k)
	}
	return cfg, nil
}

// mounts returns the CT's rootfs directory and its mount points.
func (s *ctServer) mounts() (string, []viewMount, error) {
	if s.vm != nil {
		return s.vm.root, nil, nil
	}
	gms, err := s.m.c.GuestMounts(s.vmid)
	if err != nil {
		return "", nil, err
	}
	root := ""
	var mps []viewMount
	for _, gm := range gms {
		if gm.Key == "rootfs" {
			root = gm.HostDir
			continue
		}
		mps = append(mps, viewMount{Path: gm.Path, HostDir: gm.HostDir, ReadOnly: gm.ReadOnly})
	}
	if root == "" {
		return "", nil, fmt.Errorf("CT %d has no rootfs", s.vmid)
	}
	return root, mps, nil
}

// hostKeys loads the CT's SSH host keys from its /etc/ssh: those create
// made (model.HostKeyTypes), and an RSA key if the CT has one. A CT
// without any (its template had no /etc/ssh, or it was created by an
// older emulator) gets an ed25519 key now, at its first start, kept in
// its rootfs from then on.
func hostKeys(root string) ([]ssh.Signer, error) {
	var signers []ssh.Signer
	for _, file := range []string{"ssh_host_ecdsa_key", "ssh_host_ed25519_key", "ssh_host_rsa_key"} {
		data, err := model.ReadCTFile(root, "etc/ssh/"+file) // never through a link, at most 1 MiB
		if err != nil {
			return nil, err
		}
		if data == "" {
			continue
		}
		signer, err := ssh.ParsePrivateKey([]byte(data))
		if err != nil {
			return nil, fmt.Errorf("/etc/ssh/%s: %w", file, err)
		}
		signers = append(signers, signer)
	}
	if len(signers) > 0 {
		return signers, nil
	}
	signer, err := hostKey(root)
	if err != nil {
		return nil, err
	}
	return []ssh.Signer{signer}, nil
}

// hostKey makes the CT's ed25519 host key (see hostKeys).
func hostKey(root string) (ssh.Signer, error) {
	path := filepath.Join(root, "etc", "ssh", "ssh_host_ed25519_key")
	if data, err := model.ReadCTFile(root, "etc/ssh/ssh_host_ed25519_key"); err != nil {
		return nil, err
	} else if data != "" {
		return ssh.ParsePrivateKey([]byte(data))
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	hostname := "localhost"
	if b, err := model.ReadCTFile(root, "etc/hostname"); err == nil && strings.TrimSpace(b) != "" {
		hostname = strings.TrimSpace(b)
	}
	block, err := ssh.MarshalPrivateKey(priv, "root@"+hostname)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := model.WriteFileAtomic(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " root@" + hostname + "\n"
	if err := model.WriteFileAtomic(path+".pub", []byte(pub), 0o644); err != nil {
		return nil, err
	}
	return signer, nil
}

// authorized reports whether key is a line of the CT's
// /root/.ssh/authorized_keys, read as model.ReadCTFile reads (the CT's
// root controls it: never through a link, never a FIFO, at most 1 MiB).
func authorized(root string, key ssh.PublicKey) bool {
	return authorizedIn(root, "root/.ssh/authorized_keys", key)
}

// authorizedIn is authorized for the keys file at rel under root.
func authorizedIn(root, rel string, key ssh.PublicKey) bool {
	data, err := model.ReadCTFile(root, rel)
	if err != nil || data == "" {
		return false
	}
	want := key.Marshal()
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey(line)
		if err == nil && bytes.Equal(k.Marshal(), want) {
			return true
		}
	}
	return false
}

func (s *ctServer) serveConn(nc net.Conn, cfg *ssh.ServerConfig) {
	if !s.current() {
		// The CT stopped or restarted since the last poll: this sshd is
		// gone, and the new boot's (if any) will answer.
		nc.Close()
		s.m.kick()
		return
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second)) // LoginGraceTime, shortened
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		s.m.log.Debug("CT ssh login failed", "vmid", s.vmid, "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	nc.SetDeadline(time.Time{})
	defer sc.Close()
	go ssh.DiscardRequests(reqs) // keepalive@openssh.com gets its (failure) reply
	var wg sync.WaitGroup
	for nch := range chans {
		switch nch.ChannelType() {
		case "session":
		case "direct-tcpip":
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.directTCPIP(nch)
			}()
			continue
		default:
			nch.Reject(ssh.UnknownChannelType, "unknown channel type")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.session(sc, ch, creqs)
		}()
	}
	wg.Wait()
}

// directTCPIPRequest is a direct-tcpip channel's payload (RFC 4254 7.2).
type directTCPIPRequest struct {
	Host     string
	Port     uint32
	OrigHost string
	OrigPort uint32
}

// directTCPIP serves local port forwarding (ssh -L, or a client's
// Dial): sshd connects to host:port from inside the CT, as a CT's own
// sshd does with AllowTcpForwarding's default, so a service listening in
// the CT (on its loopback or its address) is reachable through the
// CT's SSH login. In the fallback view the CT has the host's network.
func (s *ctServer) directTCPIP(nch ssh.NewChannel) {
	var req directTCPIPRequest
	if err := ssh.Unmarshal(nch.ExtraData(), &req); err != nil {
		nch.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	addr := net.JoinHostPort(req.Host, strconv.Itoa(int(req.Port)))
	var c net.Conn
	var err error
	if s.ct != nil {
		c, err = dialIn("/proc/"+strconv.Itoa(s.ct.pid)+"/ns/net", addr, 10*time.Second)
	} else {
		c, err = net.DialTimeout("tcp", addr, 10*time.Second)
	}
	if err != nil {
		// OpenSSH answers "Connection refused" and the like as the reason.
		nch.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	defer c.Close()
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(c, ch)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() { io.Copy(ch, c); ch.CloseWrite(); done <- struct{}{} }()
	select {
	case <-done:
		<-done
	case <-s.ctx.Done():
	}
}

// ptyRequest is a session's pty-req (RFC 4254 6.2).
type ptyRequest struct {
	Term          string
	Columns, Rows uint32
	Width, Height uint32
	Modes         string
}

// windowChange is a window-change request (RFC 4254 6.7).
type windowChange struct {
	Columns, Rows uint32
	Width, Height uint32
}

// session serves one session channel: env, pty-req and window-change
// before or during the command, then one exec or shell.
func (s *ctServer) session(sc *ssh.ServerConn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	ss := &sshSession{s: s, sc: sc, ch: ch, done: make(chan struct{})}
	for req := range reqs {
		switch req.Type {
		case "env":
			req.Reply(ss.setEnv(req.Payload), nil)
		case "pty-req":
			var p ptyRequest
			ok := !ss.started && ss.tty == nil && ssh.Unmarshal(req.Payload, &p) == nil
			if ok {
				ss.tty = &p
			}
			req.Reply(ok, nil)
		case "window-change":
			ss.resize(req.Payload)
			if req.WantReply {
				req.Reply(false, nil)
			}
		case "exec":
			var c struct{ Command string }
			if ss.started || ssh.Unmarshal(req.Payload, &c) != nil {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			ss.start(c.Command, false)
		case "shell":
			if ss.started {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			ss.start("", true)
		case "signal":
			ss.signal(req.Payload)
			if req.WantReply {
				req.Reply(false, nil)
			}
		default: // subsystem, x11-req, …
			req.Reply(false, nil)
		}
	}
	if !ss.started {
		ch.Close()
		return
	}
	<-ss.done
}

// sshSession is one session channel's state: what the client asked for
// before its command (env, pty), whether the command started, and,
// under mu, the command's process group and pty master while it runs.
type sshSession struct {
	s       *ctServer
	sc      *ssh.ServerConn
	ch      ssh.Channel
	env     []string
	tty     *ptyRequest
	started bool
	done    chan struct{} // closed when the command ended

	mu     sync.Mutex
	pgid   int
	master *os.File // the pty's master side while a pty session runs
}

// start runs the command (or the shell) in the background.
func (ss *sshSession) start(command string, shell bool) {
	ss.started = true
	go func() {
		defer close(ss.done)
		ss.s.exec(ss.sc, ss.ch, execSpec{command: command, shell: shell, env: ss.env, tty: ss.tty}, func(pid int, m *os.File) {
			ss.mu.Lock()
			ss.pgid, ss.master = pid, m
			ss.mu.Unlock()
		})
		ss.mu.Lock()
		ss.master = nil
		ss.mu.Unlock()
	}()
}

// setEnv takes an env request before the command: LANG and LC_* only,
// as Debian's sshd_config accepts (AcceptEnv LANG LC_*).
func (ss *sshSession) setEnv(payload []byte) bool {
	var kv struct{ Name, Value string }
	ok := ssh.Unmarshal(payload, &kv) == nil && !ss.started &&
		(kv.Name == "LANG" || strings.HasPrefix(kv.Name, "LC_")) && !strings.ContainsRune(kv.Name, '=')
	if ok {
		ss.env = append(ss.env, kv.Name+"="+kv.Value)
	}
	return ok
}

// resize is window-change: the running pty is resized, or the pty asked
// for takes the size before the command starts.
func (ss *sshSession) resize(payload []byte) {
	var w windowChange
	if ssh.Unmarshal(payload, &w) != nil {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.master != nil {
		pty.Setsize(ss.master, &pty.Winsize{Rows: uint16(w.Rows), Cols: uint16(w.Columns), X: uint16(w.Width), Y: uint16(w.Height)})
	} else if ss.tty != nil && !ss.started {
		ss.tty.Columns, ss.tty.Rows, ss.tty.Width, ss.tty.Height = w.Columns, w.Rows, w.Width, w.Height
	}
}

// signal sends a named signal to the command's process group.
func (ss *sshSession) signal(payload []byte) {
	var sig struct{ Signal string }
	if ssh.Unmarshal(payload, &sig) != nil {
		return
	}
	ss.mu.Lock()
	p := ss.pgid
	ss.mu.Unlock()
	if n, ok := signals[sig.Signal]; ok && p > 0 {
		syscall.Kill(-p, n)
	}
}

var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP, "ILL": syscall.SIGILL,
	"INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV,
	"TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

// execSpec is what a session runs: a command (exec) or the login shell
// (shell), on a pty when the client asked for one.
type execSpec struct {
	command string
	shell   bool
	env     []string
	tty     *ptyRequest
}

// exec runs the command in the CT's view, streams its output to ch and
// reports its exit status, as sshd does for an exec or shell request.
// started registers the command's process group and pty master with the
// session (which resizes the pty on window-change), and again with a nil
// master before the master is closed.
// With a pty the command is a session leader whose controlling terminal
// is the pty (so `tty` names it and job control works), and stdout and
// stderr both go to ch's data stream, as sshd does.
func (s *ctServer) exec(sc *ssh.ServerConn, ch ssh.Channel, e execSpec, started func(pgid int, master *os.File)) {
	defer ch.Close()
	spec, code, err := s.view(sc, e)
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "%v\n", err)
		sendExitStatus(ch, code)
		return
	}
	sio, err := s.openStdio(e.tty)
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "guest exec: %v\n", err)
		sendExitStatus(ch, 255)
		return
	}
	cmd, ns, err := s.startCommand(spec, sio, e.tty != nil)
	if errors.Is(err, errServerStopped) {
		return
	}
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "guest exec: %v\n", err)
		sendExitStatus(ch, 255)
		return
	}
	started(cmd.Process.Pid, sio.master)
	werr := sio.pump(ch, cmd, started)
	s.ended(cmd, ns, spec)
	sendExit(ch, cmd, werr)
}

// ended forgets a session's command once it exited: its overlay work
// directory goes, unless processes it left behind in its mount
// namespace still use it (then it goes with them, at the server's stop).
func (s *ctServer) ended(cmd *exec.Cmd, ns string, spec viewSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, cmd)
	if ns != "" && len(processesIn(ns, spec.Root)) > 0 {
		s.leftover[ns] = spec.Work
	} else {
		removeWork(spec.Work)
	}
}

// view is the viewSpec of e in the CT as it runs now, or the error (with
// the exit status) that refuses the session: exec unavailable (126), the
// mounts unreadable or the CT no longer in the boot this server serves
// (255).
func (s *ctServer) view(sc *ssh.ServerConn, e execSpec) (viewSpec, int, error) {
	if err := s.m.ExecUnavailable(); err != nil {
		return viewSpec{}, 126, err
	}
	root, mps, err := s.mounts()
	if err != nil {
		return viewSpec{}, 255, fmt.Errorf("guest exec: %w", err)
	}
	if !s.current() {
		return viewSpec{}, 255, fmt.Errorf("guest exec: %s %d is not running", s.noun(), s.vmid)
	}
	work := filepath.Join(root, ".corral-ovl", randomID())
	env := sessionEnv(sc, e.env)
	if s.vm != nil {
		env = s.vm.sessionEnv(sc, e.env)
	}
	if e.tty != nil {
		term := e.tty.Term
		if term == "" {
			term = "dumb"
		}
		env = append(env, "TERM="+term)
	}
	return viewSpec{Root: root, Work: work, Mounts: mps, Command: e.command, Shell: e.shell, Env: env}, 0, nil
}

// errServerStopped: the server stopped before the command started; the
// session ends without an exit status.
var errServerStopped = errors.New("server stopped")

// sessionIO is a command's stdio: ends are the session's side (closed
// once the command runs), ours the emulator's side; master is the pty's
// master with a pty (then ours is just it), nil with pipes.
type sessionIO struct {
	ends, ours []*os.File
	master     *os.File
}

// openStdio opens a pty sized as tty asks (the CT's own /dev/pts when it
// is a container), or three pipes without one.
func (s *ctServer) openStdio(tty *ptyRequest) (*sessionIO, error) {
	if tty != nil {
		var m, t *os.File
		var err error
		if s.ct != nil {
			m, t, err = s.ct.openPty() // the CT's own /dev/pts
		} else {
			m, t, err = pty.Open()
		}
		if err != nil {
			return nil, fmt.Errorf("allocate a pty: %w", err)
		}
		pty.Setsize(m, &pty.Winsize{Rows: uint16(tty.Rows), Cols: uint16(tty.Columns), X: uint16(tty.Width), Y: uint16(tty.Height)})
		return &sessionIO{ends: []*os.File{t, t, t}, ours: []*os.File{m}, master: m}, nil
	}
	inR, inW, err1 := os.Pipe()
	outR, outW, err2 := os.Pipe()
	errR, errW, err3 := os.Pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeFiles([]*os.File{inR, inW, outR, outW, errR, errW})
		return nil, err
	}
	return &sessionIO{ends: []*os.File{inR, outW, errW}, ours: []*os.File{inW, outR, errR}}, nil
}

// closeFiles closes every non-nil file of fs.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// closeEnds closes the session's side, a pty's slave once.
func (sio *sessionIO) closeEnds() {
	seen := map[*os.File]bool{}
	for _, f := range sio.ends {
		if !seen[f] {
			seen[f] = true
			f.Close()
		}
	}
}

// startCommand starts spec on sio's ends, in the CT or the sandbox, and
// registers it with the server (with its mount namespace when it is the
// sandbox's: a container's own processes stop with it). A stopped
// server starts nothing (errServerStopped).
func (s *ctServer) startCommand(spec viewSpec, sio *sessionIO, tty bool) (*exec.Cmd, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		sio.closeEnds()
		closeFiles(sio.ours)
		return nil, "", errServerStopped
	}
	var cmd *exec.Cmd
	var err error
	if s.ct != nil {
		cmd, err = s.ct.startSession(spec, sio.ends[0], sio.ends[1], sio.ends[2], tty)
	} else {
		cmd, err = s.m.sandbox().startHelper(spec, sio.ends[0], sio.ends[1], sio.ends[2], tty)
	}
	sio.closeEnds()
	if err != nil {
		closeFiles(sio.ours)
		return nil, "", err
	}
	ns := "" // a container's own processes stop with it
	if s.ct == nil {
		ns, _ = os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/mnt")
	}
	s.sessions[cmd] = ns
	return cmd, ns, nil
}

// pump copies between ch and the command's stdio until the command ends
// and, like sshd, until every holder of stdout/stderr closed them; with a
// pty, a process that kept it open gets a moment to flush, then loses
// it. It returns the command's Wait error.
func (sio *sessionIO) pump(ch ssh.Channel, cmd *exec.Cmd, started func(pgid int, master *os.File)) error {
	var copies sync.WaitGroup
	master := sio.master
	if master != nil {
		go io.Copy(master, ch) // ends when the client closes or ch does
		copies.Add(1)
		go func() {
			defer copies.Done()
			// Read until EIO: every holder of the terminal closed it.
			io.Copy(ch, master)
		}()
	} else {
		inW, outR, errR := sio.ours[0], sio.ours[1], sio.ours[2]
		go func() {
			io.Copy(inW, ch)
			inW.Close()
		}()
		for _, p := range []struct {
			r *os.File
			w io.Writer
		}{{outR, ch}, {errR, ch.Stderr()}} {
			copies.Add(1)
			go func() {
				defer copies.Done()
				io.Copy(p.w, p.r)
				p.r.Close() // a writer left behind gets EPIPE, as with a gone client
			}()
		}
	}
	werr := cmd.Wait()
	if master == nil {
		sio.ours[0].Close()
		copies.Wait() // like sshd, until every holder of stdout/stderr closed them
		return werr
	}
	// The shell's exit hangs up its terminal; a process that kept
	// the pty open still gets a moment to flush, then loses it.
	flushed := make(chan struct{})
	go func() { copies.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(2 * time.Second):
	}
	started(cmd.Process.Pid, nil) // no window-change reaches it once closed
	master.Close()
	copies.Wait()
	return werr
}

// sendExit reports how cmd ended: its exit status, or the signal that
// killed it (exit-signal), or 255 when it could not be waited for.
func sendExit(ch ssh.Channel, cmd *exec.Cmd, werr error) {
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case werr != nil && cmd.ProcessState == nil:
		sendExitStatus(ch, 255)
	case ws.Signaled():
		name := strings.TrimPrefix(signalName(ws.Signal()), "SIG")
		ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{name, ws.CoreDump(), "", ""}))
	default:
		sendExitStatus(ch, ws.ExitStatus())
	}
}

func sendExitStatus(ch ssh.Channel, code int) {
	ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
}

func signalName(sig syscall.Signal) string {
	for name, n := range signals {
		if n == sig {
			return name
		}
	}
	return strconv.Itoa(int(sig))
}

// current reports whether the guest still runs the boot this sshd
// serves: a CT's PID in the model, a view VM's server not stopped.
func (s *ctServer) current() bool {
	if s.vm != nil {
		return s.ctx.Err() == nil
	}
	return s.m.c.GuestPID(s.vmid) == s.pid
}

// noun names the guest in messages.
func (s *ctServer) noun() string {
	if s.vm != nil {
		return "VM"
	}
	return "CT"
}

// sessionEnv is the environment sshd gives root's commands.
func sessionEnv(sc *ssh.ServerConn, clientEnv []string) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/bash", "MAIL=/var/mail/root",
	}
	rh, rp, _ := net.SplitHostPort(sc.RemoteAddr().String())
	lh, lp, _ := net.SplitHostPort(sc.LocalAddr().String())
	env = append(env, "SSH_CLIENT="+rh+" "+rp+" "+lp, "SSH_CONNECTION="+rh+" "+rp+" "+lh+" "+lp)
	return append(env, clientEnv...)
}

func randomID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// listenOnBridge makes the sshd answer at the CT's addresses on the
// bridge, on the same port, from inside the CT's network namespace: the
// addresses the API reports to other CTs (model.CTBridgeInterfaces), so a
// client in another CT (corral's agent) reaches this CT as on a PVE
// bridge. Where the CT's own sshd holds the port already (a real
// template's openssh on 22), that one answers.
func (s *ctServer) listenOnBridge() {
	ns := "/proc/" + strconv.Itoa(s.ct.pid) + "/ns/net"
	for _, a := range s.m.c.GuestBridgeAddresses(s.vmid) {
		if ip := net.ParseIP(a); ip == nil || ip.IsLoopback() {
			continue
		}
		addr := net.JoinHostPort(a, strconv.Itoa(s.m.port))
		ln, err := listenIn(ns, addr)
		if err != nil {
			s.m.log.Debug("CT sshd not on the bridge (the CT's own may answer)", "vmid", s.vmid, "addr", addr, "err", err)
			continue
		}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			ln.Close()
			return
		}
		s.onBridge = append(s.onBridge, ln)
		s.mu.Unlock()
		go serveRelay(ln, s.addr)
	}
}
