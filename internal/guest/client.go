// Package guest is corral's SSH client for the inside of a container:
// connect while the guest boots, keep the connection alive through long
// silent commands, run commands with their output streamed line by line,
// and check the guest's host key (trusted on first use right after corral
// created the container, pinned afterwards).
//
// The package keeps no state: the caller stores the pinned host key
// (Client.HostKey, AuthorizedKey) where it can read it back from Proxmox.
package guest

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/corralhq/corral/internal/wait"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Defaults of Config.
const (
	DefaultKeepaliveInterval = 30 * time.Second // OpenSSH ServerAliveInterval
	DefaultKeepaliveCountMax = 3                // OpenSSH ServerAliveCountMax
	DefaultConnectTimeout    = 3 * time.Minute  // waiting for a booting guest
	// DefaultProbeInterval and DefaultProbeTimeout: while a guest boots,
	// its SSH port is tried this often, each try given this long, so
	// that the login starts within a probe interval of sshd listening.
	DefaultProbeInterval = 150 * time.Millisecond
	DefaultProbeTimeout  = 500 * time.Millisecond
)

// HostKeyPolicy says which host key the guest must present.
type HostKeyPolicy struct {
	// VMID names the container in errors.
	VMID int
	// VM says the guest is a virtual machine (errors say "VM", not "CT").
	VM bool
	// TrustOnFirstUse accepts whatever key the guest presents: use it
	// only right after corral created the container, then pin the key
	// from Client.HostKey.
	TrustOnFirstUse bool
	// Pinned is the expected key in authorized_keys form ("ssh-ed25519
	// AAAA…", a trailing comment is ignored). Required unless
	// TrustOnFirstUse or Fingerprints.
	Pinned string
	// Fingerprints accepts a key whose SHA256 fingerprint ("SHA256:…") is
	// one of them: the keys a container's create task logged, before
	// corral has the whole key to pin.
	Fingerprints []string
}

// Config configures Dial. User and Signer are required.
type Config struct {
	User    string
	Signer  ssh.Signer
	HostKey HostKeyPolicy
	// Sudo runs every Exec's script through sudo -n (as root): for a
	// login as a cloud image's user, which cloud-init gives sudo
	// without a password, where root may not log in.
	Sudo bool
	// ConnectTimeout bounds the whole connect, retries included, when ctx
	// has no earlier deadline. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// KeepaliveInterval and KeepaliveCountMax: after CountMax keepalives
	// without an answer, each Interval apart, the connection is closed
	// and running commands fail with ErrDeadConnection.
	KeepaliveInterval time.Duration
	KeepaliveCountMax int
	// ProbeInterval is the pause between tries of a port that does not
	// answer yet, ProbeTimeout how long one TCP connect may take
	// (defaults DefaultProbeInterval, DefaultProbeTimeout).
	ProbeInterval, ProbeTimeout time.Duration
	// RetryMin and RetryMax bound the backoff after a port that answered
	// but whose SSH handshake failed (a guest half up), doubling from
	// RetryMin (default 100ms) up to RetryMax (default 1s).
	RetryMin, RetryMax time.Duration

	// sleep replaces wait.Sleep in tests, which record the waits.
	sleep func(ctx context.Context, d time.Duration) error
}

// ErrDeadConnection is returned once keepalives went unanswered.
var ErrDeadConnection = errors.New("guest SSH connection is dead (keepalives unanswered)")

// HostKeyError is a guest presenting another host key than the pinned one.
type HostKeyError struct {
	VMID      int
	VM        bool   // the guest is a VM
	Want, Got string // SHA256 fingerprints
	// Logged: Want are the keys the create task logged, not a pin.
	Logged bool
}

func (e *HostKeyError) Error() string {
	noun, what := "CT", "container"
	if e.VM {
		noun, what = "VM", "VM"
	}
	if e.Logged {
		return fmt.Sprintf("%s %d presents SSH host key %s, but its create task logged %s: something else answers at the %s's address, "+
			"or its keys were replaced right after create; treat it as an attack unless you know why", noun, e.VMID, e.Got, e.Want, what)
	}
	return fmt.Sprintf("%s %d presents SSH host key %s, but the pinned key is %s: the %s was replaced or its key changed outside corral; "+
		"if that is expected, recreate it with corral (which trusts the new key on first use), else treat it as an attack", noun, e.VMID, e.Got, e.Want, what)
}

// ExitError is a command that ended with a non-zero status or a signal.
type ExitError struct {
	Code   int    // exit status; -1 when killed by a signal
	Signal string // e.g. "KILL", "" when the command exited
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return "command killed by signal " + e.Signal
	}
	return fmt.Sprintf("command exited with status %d", e.Code)
}

// Client is one SSH connection to a guest.
type Client struct {
	conn    *ssh.Client
	hostKey ssh.PublicKey
	sudo    bool // Config.Sudo
	done    chan struct{}

	mu  sync.Mutex
	err error // why the connection ended, once it did
}

// Dial connects to addr (host:port) as cfg.User while the guest is still
// booting: it tries the TCP port every ProbeInterval, each try bounded by
// ProbeTimeout, and logs in over the first connection that is accepted;
// a handshake that fails (reset, cut short, timed out) is retried after a
// short backoff. It gives up when ctx ends or ConnectTimeout passes. A
// host key mismatch or a refused login is not retried.
func Dial(ctx context.Context, addr string, cfg Config) (*Client, error) {
	if cfg.User == "" || cfg.Signer == nil {
		return nil, errors.New("guest: Config needs User and Signer")
	}
	pinned, fingerprints, err := cfg.HostKey.trusted()
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()

	var seen ssh.PublicKey
	sshCfg := &ssh.ClientConfig{
		User:              cfg.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(cfg.Signer)},
		HostKeyCallback:   hostKeyCheck(cfg.HostKey, pinned, fingerprints, &seen),
		HostKeyAlgorithms: hostKeyAlgorithms(pinned),
	}
	backoff := cfg.RetryMin
	var last error
	for attempt := 1; ; attempt++ {
		// Probe: a port that does not answer yet is tried again soon.
		d := net.Dialer{Timeout: cfg.ProbeTimeout}
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			last = err
			if werr := cfg.sleep(ctx, cfg.ProbeInterval); werr != nil {
				return nil, dialGaveUp(cfg.HostKey.VMID, addr, attempt, werr, last)
			}
			continue
		}
		// The port answers: log in over this very connection.
		conn, err := handshake(ctx, nc, addr, sshCfg)
		if err == nil {
			return newClient(conn, seen, cfg), nil
		}
		if ferr := loginFailed(err, addr, cfg, pinned); ferr != nil {
			return nil, ferr
		}
		last = err
		if werr := cfg.sleep(ctx, backoff); werr != nil {
			return nil, dialGaveUp(cfg.HostKey.VMID, addr, attempt, werr, last)
		}
		backoff = min(backoff*2, cfg.RetryMax)
	}
}

// trusted is which host keys Dial accepts: the pinned key (parsed), or
// one of the fingerprints the console logged, or any (trust on first
// use, both nil). A pinned key or trust on first use overrides the
// fingerprints; with none of the three there is nothing to trust.
func (h HostKeyPolicy) trusted() (pinned ssh.PublicKey, fingerprints []string, err error) {
	fingerprints = h.Fingerprints
	if h.TrustOnFirstUse || h.Pinned != "" {
		fingerprints = nil
	}
	if !h.TrustOnFirstUse && len(fingerprints) == 0 {
		if h.Pinned == "" {
			return nil, nil, fmt.Errorf("guest: CT %d: no pinned host key and trust on first use not allowed", h.VMID)
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.Pinned))
		if err != nil {
			return nil, nil, fmt.Errorf("guest: CT %d: pinned host key: %w", h.VMID, err)
		}
		pinned = k
	}
	return pinned, fingerprints, nil
}

// withDefaults is cfg with every unset timing filled in, so that a
// zero Config dials as documented.
func (cfg Config) withDefaults() Config {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Second
	}
	cfg.RetryMax = max(cfg.RetryMax, cfg.RetryMin)
	if cfg.sleep == nil {
		cfg.sleep = wait.Sleep
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if cfg.KeepaliveCountMax <= 0 {
		cfg.KeepaliveCountMax = DefaultKeepaliveCountMax
	}
	return cfg
}

// hostKeyCheck is the handshake's host key callback: it refuses a key
// other than the pinned one or the logged fingerprints, and records the
// accepted key in *seen (a first use's key, for the caller to pin).
func hostKeyCheck(h HostKeyPolicy, pinned ssh.PublicKey, fingerprints []string, seen *ssh.PublicKey) ssh.HostKeyCallback {
	return func(_ string, _ net.Addr, key ssh.PublicKey) error {
		if pinned != nil && string(key.Marshal()) != string(pinned.Marshal()) {
			return &HostKeyError{VMID: h.VMID, VM: h.VM, Want: Fingerprint(pinned), Got: Fingerprint(key)}
		}
		if len(fingerprints) > 0 && !slices.Contains(fingerprints, Fingerprint(key)) {
			return &HostKeyError{VMID: h.VMID, VM: h.VM, Want: strings.Join(fingerprints, " or "), Got: Fingerprint(key), Logged: true}
		}
		*seen = key
		return nil
	}
}

// newClient starts the logged-in connection's keepalive and the watch
// that records why it ended.
func newClient(conn *ssh.Client, hostKey ssh.PublicKey, cfg Config) *Client {
	c := &Client{conn: conn, hostKey: hostKey, sudo: cfg.Sudo, done: make(chan struct{})}
	go c.keepalive(cfg.KeepaliveInterval, cfg.KeepaliveCountMax)
	go func() {
		err := conn.Wait()
		c.setErr(fmt.Errorf("guest SSH connection closed: %w", err))
		close(c.done)
	}()
	return c
}

// loginFailed is Dial's error for a handshake that no retry will mend (a
// host key mismatch, a pinned key type the guest no longer has, a
// refused login), or nil for one worth retrying.
func loginFailed(err error, addr string, cfg Config, pinned ssh.PublicKey) error {
	var hk *HostKeyError
	if errors.As(err, &hk) {
		return hk
	}
	if pinned != nil && strings.Contains(err.Error(), "no common algorithm for host key") {
		// The guest no longer has a key of the pinned type: as
		// changed a key as any, and no retry will bring it back.
		return &HostKeyError{VMID: cfg.HostKey.VMID, Want: Fingerprint(pinned), Got: "no " + pinned.Type() + " key at all"}
	}
	if isAuthError(err) {
		return fmt.Errorf("guest: CT %d at %s refused the login as %s: %w (is corral's public key in the container's authorized_keys?)", cfg.HostKey.VMID, addr, cfg.User, err)
	}
	return nil
}

// dialGaveUp is Dial's error once ctx ended.
func dialGaveUp(vmid int, addr string, attempts int, err, last error) error {
	return fmt.Errorf("guest: CT %d at %s did not accept SSH in %d attempts: %w (last error: %v); is the container running and its sshd up?", vmid, addr, attempts, err, last)
}

// hostKeyAlgorithms asks for the pinned key's algorithm, so that a
// guest with several host keys presents the one that was pinned.
func hostKeyAlgorithms(pinned ssh.PublicKey) []string {
	if pinned == nil {
		return nil
	}
	if pinned.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{pinned.Type()}
}

// handshake runs the SSH handshake on the TCP connection nc within ctx;
// it closes nc when it fails.
func handshake(ctx context.Context, nc net.Conn, addr string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	// A handshake that hangs (guest half up) is cut after 20 s and retried.
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	c, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	if !stop() {
		// ctx ended and closed nc, possibly right after a handshake
		// that succeeded: that connection is unusable.
		nc.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// isAuthError reports a refused login (x/crypto/ssh has no typed error).
func isAuthError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unable to authenticate")
}

// keepalive sends keepalive@openssh.com every interval; after countMax
// unanswered in a row it closes the connection.
func (c *Client) keepalive(interval time.Duration, countMax int) {
	t := time.NewTicker(interval)
	defer t.Stop()
	replies := make(chan struct{}, 1)
	missed, inflight := 0, false
	for {
		select {
		case <-c.done:
			return
		case <-replies:
			inflight, missed = false, 0
			continue
		case <-t.C:
		}
		if inflight {
			missed++
			if missed >= countMax {
				c.setErr(ErrDeadConnection)
				c.conn.Close()
				return
			}
			continue
		}
		inflight = true
		go func() {
			// Any reply, even a refusal, proves the server alive.
			if _, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				select {
				case replies <- struct{}{}:
				default:
				}
			}
		}()
	}
}

func (c *Client) setErr(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// Err is why the connection ended, nil while it is up.
func (c *Client) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// HostKey is the key the guest presented (pin it after trust on first use).
func (c *Client) HostKey() ssh.PublicKey { return c.hostKey }

// DialContext connects to addr (host:port) from inside the guest, over
// this SSH login (a direct-tcpip channel, what ssh -L uses): a service
// the guest serves on its own loopback or address is reachable without
// opening a port to the network.
func (c *Client) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.conn.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s inside the guest: %w", addr, c.lost(err))
	}
	return conn, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Stream names an output stream of a command.
type Stream string

// Streams of Run's onLine.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Command is one command to run in the guest.
type Command struct {
	// Script runs with the login shell's -c.
	Script string
	// Env is exported before Script (in the command line: processes in
	// the guest can see it, so pass secrets on Stdin instead).
	Env map[string]string
	// Stdin feeds the command's standard input; nil gives it EOF.
	Stdin io.Reader
	// OnLine gets every output line without its newline, in order per
	// stream, one call at a time. Nil discards output. When Exec returns
	// early (ctx ended, connection lost) lines already in flight may
	// still arrive for a moment after it returned.
	OnLine func(stream Stream, line string)
}

// Run runs cmd in the guest; see Exec.
func (c *Client) Run(ctx context.Context, cmd string, stdin io.Reader, onLine func(Stream, string)) error {
	return c.Exec(ctx, Command{Script: cmd, Stdin: stdin, OnLine: onLine})
}

// session opens a session for one command, unless the connection is
// already lost or ctx has ended (then the command is not started).
func (c *Client) session(ctx context.Context) (*ssh.Session, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("guest command not started: %w", context.Cause(ctx))
	}
	sess, err := c.conn.NewSession()
	if err != nil {
		return nil, c.lost(err)
	}
	return sess, nil
}

// Exec runs cmd and waits for it. A non-zero exit is an *ExitError; when
// ctx ends first the command's process group is killed (or, if ctx had
// already ended, the command is not started) and ctx's error returned
// (wrapped); a connection lost meanwhile gives ErrDeadConnection
// or the transport's error.
func (c *Client) Exec(ctx context.Context, cmd Command) error {
	sess, err := c.session(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	if cmd.Stdin != nil {
		sess.Stdin = cmd.Stdin
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := sess.StderrPipe()
	if err != nil {
		return err
	}
	var mu sync.Mutex
	emit := func(s Stream, line string) {
		if cmd.OnLine == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		cmd.OnLine(s, line)
	}
	var readers sync.WaitGroup
	for _, p := range []struct {
		s Stream
		r io.Reader
	}{{Stdout, stdout}, {Stderr, stderr}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			scanLines(p.r, func(line string) { emit(p.s, line) })
		}()
	}
	script := envPrefix(cmd.Env) + cmd.Script
	if c.sudo {
		script = "sudo -n -- sh -c " + ShellQuote(script)
	}
	if err := sess.Start(script); err != nil {
		return c.lost(err)
	}
	waited := make(chan error, 1)
	go func() {
		readers.Wait() // all output delivered before the exit status
		waited <- sess.Wait()
	}()
	return c.await(ctx, sess, waited, nil)
}

// exitError maps ssh.Session.Wait's error.
func (c *Client) exitError(err error) error {
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if ee.Signal() != "" {
			return &ExitError{Code: -1, Signal: ee.Signal()}
		}
		return &ExitError{Code: ee.ExitStatus()}
	}
	// No exit status (*ssh.ExitMissingError) or a transport error: the
	// connection went away under the command.
	return c.lost(err)
}

// lost prefers the connection's own end reason (e.g. ErrDeadConnection).
func (c *Client) lost(err error) error {
	select {
	case <-c.done:
	case <-time.After(100 * time.Millisecond):
	}
	if cerr := c.Err(); cerr != nil {
		return cerr
	}
	return fmt.Errorf("guest SSH: %w", err)
}

// scanLines calls fn for every line of r (a final line without newline
// included); a line longer than 1 MiB is split.
func scanLines(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	split := false // the current line was already partly delivered
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil { // ReadLine returns data or an error, never both
			if len(long) > 0 {
				fn(string(long))
			}
			io.Copy(io.Discard, r)
			return
		}
		long = append(long, chunk...)
		switch {
		case !isPrefix:
			if len(long) > 0 || !split {
				fn(string(long))
			}
			long, split = long[:0], false
		case len(long) >= 1<<20:
			fn(string(long))
			long, split = long[:0], true
		}
	}
}

// envPrefix renders env as shell exports.
func envPrefix(env map[string]string) string {
	if len(env) == 0 {
		return ""
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s; ", k, ShellQuote(env[k]))
	}
	return b.String()
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// NewKey makes an ephemeral ed25519 key for corral's logins. The private
// key stays in the Signer; authorizedKey is the public key in
// authorized_keys form, for the container's ssh-public-keys.
func NewKey(comment string) (signer ssh.Signer, authorizedKey string, err error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	signer, err = ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, "", err
	}
	authorizedKey = AuthorizedKey(signer.PublicKey())
	if comment != "" {
		authorizedKey += " " + comment
	}
	return signer, authorizedKey, nil
}

// AuthorizedKey is key in authorized_keys form, without comment or newline.
func AuthorizedKey(key ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

// Fingerprint is key's SHA256 fingerprint as ssh-keygen -l prints it.
func Fingerprint(key ssh.PublicKey) string { return ssh.FingerprintSHA256(key) }
