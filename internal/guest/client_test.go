package guest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
	"golang.org/x/crypto/ssh"
)

// fakeGuest is an in-process SSH server standing in for a container's
// sshd. Commands are a tiny language (see run).
type fakeGuest struct {
	t       *testing.T
	hostKey ssh.Signer
	allowed ssh.PublicKey
	ln      net.Listener
	signals chan string
	execs   atomic.Int32 // exec requests received
	// accepted counts TCP connections; the first dropFirst are closed
	// at once, as by a guest whose sshd is not up yet.
	accepted  atomic.Int32
	dropFirst int32
}

func newFakeGuest(t *testing.T, allowed ssh.PublicKey, addr string) *fakeGuest {
	t.Helper()
	return newFakeGuestDropping(t, allowed, addr, 0)
}

func newFakeGuestDropping(t *testing.T, allowed ssh.PublicKey, addr string, dropFirst int32) *fakeGuest {
	t.Helper()
	host, _, err := NewKey("")
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGuest{t: t, hostKey: host, allowed: allowed, ln: ln, signals: make(chan string, 8), dropFirst: dropFirst}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if meta.User() == "root" && string(key.Marshal()) == string(allowed.Marshal()) {
			return &ssh.Permissions{}, nil
		}
		return nil, errors.New("no")
	}}
	cfg.AddHostKey(host)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if g.accepted.Add(1) <= g.dropFirst {
				nc.Close()
				continue
			}
			go g.serve(nc, cfg)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return g
}

func (g *fakeGuest) addr() string { return g.ln.Addr().String() }

func (g *fakeGuest) serve(nc net.Conn, cfg *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nch := range chans {
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer ch.Close()
			closed := make(chan struct{})
			for req := range creqs {
				switch req.Type {
				case "exec":
					g.execs.Add(1)
					var c struct{ Command string }
					ssh.Unmarshal(req.Payload, &c)
					req.Reply(true, nil)
					go func() {
						code := g.run(c.Command, ch, closed)
						ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
						ch.Close()
					}()
				case "signal":
					var s struct{ Signal string }
					ssh.Unmarshal(req.Payload, &s)
					g.signals <- s.Signal
				default:
					req.Reply(false, nil)
				}
			}
			close(closed)
		}()
	}
}

// run interprets "cmd; cmd; …": out:TEXT and err:TEXT write TEXT with
// \n for newlines, cat copies stdin, sleep:DUR waits, hang waits for the
// channel to close, exit:N ends with N.
func (g *fakeGuest) run(script string, ch ssh.Channel, closed <-chan struct{}) int {
	for _, cmd := range strings.Split(script, "; ") {
		verb, arg, _ := strings.Cut(cmd, ":")
		arg = strings.ReplaceAll(arg, `\n`, "\n")
		switch verb {
		case "out":
			io.WriteString(ch, arg)
		case "err":
			io.WriteString(ch.Stderr(), arg)
		case "cat":
			io.Copy(ch, ch)
		case "sleep":
			d, _ := time.ParseDuration(arg)
			time.Sleep(d) // the fake guest's sleep command
		case "hang":
			<-closed
			return 255
		case "exit":
			n, _ := strconv.Atoi(arg)
			return n
		default:
			fmt.Fprintf(ch.Stderr(), "%s: not found\n", verb)
			return 127
		}
	}
	return 0
}

func testKey(t *testing.T) (ssh.Signer, ssh.PublicKey) {
	t.Helper()
	s, _, err := NewKey("test")
	if err != nil {
		t.Fatal(err)
	}
	return s, s.PublicKey()
}

func testDial(t *testing.T, addr string, cfg Config) (*Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.User == "" {
		cfg.User = "root"
	}
	cfg.RetryMin, cfg.RetryMax = 5*time.Millisecond, 50*time.Millisecond
	c, err := Dial(ctx, addr, cfg)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func TestDial_retriesWhileTheGuestBoots(t *testing.T) {
	signer, pub := testKey(t)
	// A port nothing listens on yet: the first attempts are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	type result struct {
		c   *Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := testDial(t, addr, Config{Signer: signer, HostKey: HostKeyPolicy{VMID: 100, TrustOnFirstUse: true}})
		done <- result{c, err}
	}()
	time.Sleep(100 * time.Millisecond) // the guest "boots"
	g := newFakeGuest(t, pub, addr)
	r := <-done
	if r.err != nil {
		t.Fatalf("dial: %v", r.err)
	}
	if AuthorizedKey(r.c.HostKey()) != AuthorizedKey(g.hostKey.PublicKey()) {
		t.Error("HostKey is not the guest's key")
	}
}

func TestDial_givesUpAtTheDeadline(t *testing.T) {
	signer, _ := testKey(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Dial(context.Background(), addr, Config{User: "root", Signer: signer, ConnectTimeout: 100 * time.Millisecond,
		RetryMin: 5 * time.Millisecond, HostKey: HostKeyPolicy{VMID: 104, TrustOnFirstUse: true}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "CT 104") {
		t.Fatalf("err = %v, want a deadline error naming CT 104", err)
	}
}

func TestDial_hostKeyPolicy(t *testing.T) {
	signer, pub := testKey(t)
	g := newFakeGuest(t, pub, "")
	other, _ := testKey(t)
	tests := []struct {
		name    string
		policy  HostKeyPolicy
		wantErr string
	}{
		{name: "trust on first use", policy: HostKeyPolicy{VMID: 101, TrustOnFirstUse: true}},
		{name: "pinned key matches", policy: HostKeyPolicy{VMID: 101, Pinned: AuthorizedKey(g.hostKey.PublicKey()) + " root@hermes"}},
		{name: "pinned key differs", policy: HostKeyPolicy{VMID: 101, Pinned: AuthorizedKey(other.PublicKey())},
			wantErr: "CT 101 presents SSH host key " + Fingerprint(g.hostKey.PublicKey()) + ", but the pinned key is " + Fingerprint(other.PublicKey())},
		{name: "nothing pinned", policy: HostKeyPolicy{VMID: 101}, wantErr: "CT 101: no pinned host key"},
		{name: "pinned garbage", policy: HostKeyPolicy{VMID: 101, Pinned: "ssh-ed25519 !!"}, wantErr: "CT 101: pinned host key"},
		{name: "pinned key type not offered", policy: HostKeyPolicy{VMID: 101, Pinned: AuthorizedKey(ecdsaKey(t))},
			wantErr: "CT 101 presents SSH host key no ecdsa-sha2-nistp256 key at all"},
		{name: "a logged fingerprint matches", policy: HostKeyPolicy{VMID: 101, Fingerprints: []string{Fingerprint(other.PublicKey()), Fingerprint(g.hostKey.PublicKey())}}},
		{name: "no logged fingerprint matches", policy: HostKeyPolicy{VMID: 101, Fingerprints: []string{Fingerprint(other.PublicKey())}},
			wantErr: "CT 101 presents SSH host key " + Fingerprint(g.hostKey.PublicKey()) + ", but its create task logged " + Fingerprint(other.PublicKey())},
		{name: "a pin wins over logged fingerprints", policy: HostKeyPolicy{VMID: 101, Pinned: AuthorizedKey(other.PublicKey()), Fingerprints: []string{Fingerprint(g.hostKey.PublicKey())}},
			wantErr: "but the pinned key is " + Fingerprint(other.PublicKey())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := testDial(t, g.addr(), Config{Signer: signer, HostKey: tt.policy})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if Fingerprint(c.HostKey()) != Fingerprint(g.hostKey.PublicKey()) {
					t.Error("HostKey is not the guest's key")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestDial_refusedLoginIsNotRetried(t *testing.T) {
	_, pub := testKey(t)
	g := newFakeGuest(t, pub, "")
	stranger, _ := testKey(t)
	_, err := testDial(t, g.addr(), Config{Signer: stranger, HostKey: HostKeyPolicy{VMID: 102, TrustOnFirstUse: true}})
	if err == nil || !strings.Contains(err.Error(), "CT 102") || !strings.Contains(err.Error(), "refused the login") {
		t.Fatalf("err = %v, want a refused login", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the refused login was retried until the deadline: %v", err)
	}
}

func TestRun(t *testing.T) {
	signer, pub := testKey(t)
	g := newFakeGuest(t, pub, "")
	c, err := testDial(t, g.addr(), Config{Signer: signer, HostKey: HostKeyPolicy{TrustOnFirstUse: true}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		script string
		stdin  string
		stdout []string
		stderr []string
		code   int // 0: success
	}{
		{name: "exit status", script: `out:hi\n; exit:3`, stdout: []string{"hi"}, code: 3},
		{name: "lines split across writes", script: `out:a\nb; out:c\n\nd`, stdout: []string{"a", "bc", "", "d"}},
		{name: "stderr apart", script: `err:warn 1\nwarn 2\n; out:ok\n`, stdout: []string{"ok"}, stderr: []string{"warn 1", "warn 2"}},
		{name: "stdin", script: "cat", stdin: "x\ny\n", stdout: []string{"x", "y"}},
		{name: "unknown command", script: "frobnicate", stderr: []string{"frobnicate: not found"}, code: 127},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr []string
			var stdin io.Reader
			if tt.stdin != "" {
				stdin = strings.NewReader(tt.stdin)
			}
			err := c.Run(context.Background(), tt.script, stdin, func(s Stream, line string) {
				if s == Stdout {
					stdout = append(stdout, line)
				} else {
					stderr = append(stderr, line)
				}
			})
			var ee *ExitError
			switch {
			case tt.code == 0 && err != nil:
				t.Fatalf("err = %v", err)
			case tt.code != 0 && (!errors.As(err, &ee) || ee.Code != tt.code):
				t.Fatalf("err = %v, want exit status %d", err, tt.code)
			}
			if !slices.Equal(stdout, tt.stdout) || !slices.Equal(stderr, tt.stderr) {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout, stderr, tt.stdout, tt.stderr)
			}
		})
	}
}

func TestRun_stepTimeoutKillsTheCommand(t *testing.T) {
	signer, pub := testKey(t)
	g := newFakeGuest(t, pub, "")
	c, err := testDial(t, g.addr(), Config{Signer: signer, HostKey: HostKeyPolicy{TrustOnFirstUse: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = c.Run(ctx, "hang", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the step's deadline", err)
	}
	select {
	case sig := <-g.signals:
		if sig != "KILL" {
			t.Errorf("signal %q, want KILL", sig)
		}
	case <-time.After(5 * time.Second):
		t.Error("the guest got no signal")
	}
	// The connection stays usable for the next step.
	if err := c.Run(context.Background(), "exit:0", nil, nil); err != nil {
		t.Errorf("next step: %v", err)
	}
}

// A step whose context ended before it ran does not start at all: a
// command half run and then killed is worse than one not run.
func TestRun_doneContextStartsNothing(t *testing.T) {
	signer, pub := testKey(t)
	g := newFakeGuest(t, pub, "")
	c, err := testDial(t, g.addr(), Config{Signer: signer, HostKey: HostKeyPolicy{TrustOnFirstUse: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out []string
	err = c.Run(ctx, `out:ran\n`, nil, func(_ Stream, l string) { out = append(out, l) })
	if !errors.Is(err, context.Canceled) || len(out) > 0 {
		t.Fatalf("err = %v, output %q; want context.Canceled and no output", err, out)
	}
	if err := c.Run(context.Background(), "exit:0", nil, nil); err != nil {
		t.Fatalf("next step: %v", err)
	}
	if n := g.execs.Load(); n != 1 {
		t.Errorf("the guest got %d exec requests, want 1 (the next step's only)", n)
	}
}

func TestEnvPrefix(t *testing.T) {
	got := envPrefix(map[string]string{"B": "it's", "A": "1"})
	if want := `export A='1'; export B='it'\''s'; `; got != want {
		t.Errorf("envPrefix = %q, want %q", got, want)
	}
}

func TestScanLines_long(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	var lines []int
	scanLines(strings.NewReader(long+"\nend"), func(l string) { lines = append(lines, len(l)) })
	if !slices.Equal(lines, []int{1 << 20, 1 << 20, 1 << 20, 3}) {
		t.Errorf("line lengths %v", lines)
	}
}

// proxy forwards TCP to target like a NAT box: it drops a connection
// idle for longer than idle (0: never), and when frozen it forwards
// nothing while keeping the connection open (a dead peer).
type proxy struct {
	ln     net.Listener
	target string
	idle   time.Duration
	frozen atomic.Bool
}

func newProxy(t *testing.T, target string, idle time.Duration) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, idle: idle}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			go p.pipe(a, b)
		}
	}()
	return p
}

func (p *proxy) pipe(a, b net.Conn) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var once sync.Once
	closeBoth := func() { once.Do(func() { a.Close(); b.Close() }) }
	copyDir := func(dst, src net.Conn) {
		defer closeBoth()
		r := bufio.NewReader(src)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 && !p.frozen.Load() {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go copyDir(a, b)
	go copyDir(b, a)
	if p.idle > 0 {
		go func() {
			for {
				time.Sleep(p.idle / 4) // the proxy's idle check, four times per idle limit
				if time.Since(time.Unix(0, last.Load())) > p.idle {
					closeBoth()
					return
				}
			}
		}()
	}
}

func TestKeepalive_detectsADeadServer(t *testing.T) {
	signer, pub := testKey(t)
	g := newFakeGuest(t, pub, "")
	p := newProxy(t, g.addr(), 0)
	c, err := testDial(t, p.ln.Addr().String(), Config{Signer: signer, HostKey: HostKeyPolicy{TrustOnFirstUse: true},
		KeepaliveInterval: 20 * time.Millisecond, KeepaliveCountMax: 3})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var started atomic.Bool
	go func() {
		done <- c.Run(context.Background(), "out:started\n; hang", nil, func(_ Stream, line string) { started.Store(started.Load() || line == "started") })
	}()
	testenv.WaitFor(t, "the command's first line", started.Load)
	p.frozen.Store(true) // the guest vanishes without closing the connection
	select {
	case err := <-done:
		if !errors.Is(err, ErrDeadConnection) {
			t.Fatalf("err = %v, want ErrDeadConnection", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a dead server went unnoticed")
	}
	if !errors.Is(c.Err(), ErrDeadConnection) {
		t.Errorf("Err() = %v", c.Err())
	}
}

func TestKeepalive_keepsAQuietCommandAlive(t *testing.T) {
	// Through a NAT that drops connections idle for 150ms, a command
	// silent for 500ms finishes only thanks to keepalives.
	tests := []struct {
		name     string
		interval time.Duration
		wantOK   bool
	}{
		{"keepalives every 30ms", 30 * time.Millisecond, true},
		{"no keepalive in time", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signer, pub := testKey(t)
			g := newFakeGuest(t, pub, "")
			p := newProxy(t, g.addr(), 150*time.Millisecond)
			c, err := testDial(t, p.ln.Addr().String(), Config{Signer: signer, HostKey: HostKeyPolicy{TrustOnFirstUse: true},
				KeepaliveInterval: tt.interval, KeepaliveCountMax: 3})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			err = c.Run(context.Background(), `sleep:500ms; out:done\n`, nil, func(_ Stream, l string) { out = append(out, l) })
			if tt.wantOK && (err != nil || !slices.Equal(out, []string{"done"})) {
				t.Fatalf("err = %v, output %q", err, out)
			}
			if !tt.wantOK && err == nil {
				t.Fatal("the idle connection survived without keepalives: the proxy does not drop idle connections")
			}
		})
	}
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestDial_probesUntilThePortAnswers: while the guest's port refuses,
// Dial waits one probe interval between tries, never longer however long
// the guest takes; the first connection accepted once sshd listens is
// the one it logs in over, with no wait in between.
func TestDial_probesUntilThePortAnswers(t *testing.T) {
	signer, pub := testKey(t)
	addr := freeAddr(t)
	const boot = 8 // refused probes before sshd listens
	var waits []time.Duration
	var g *fakeGuest
	cfg := Config{User: "root", Signer: signer, HostKey: HostKeyPolicy{VMID: 100, TrustOnFirstUse: true}}
	cfg.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		if len(waits) == boot {
			g = newFakeGuest(t, pub, addr) // sshd comes up during this wait
		}
		return ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if len(waits) != boot {
		t.Errorf("%d waits, want %d: one per refused probe and none once the port answered", len(waits), boot)
	}
	for i, w := range waits {
		if w != DefaultProbeInterval {
			t.Errorf("wait %d was %v, want the probe interval %v (no growing backoff)", i, w, DefaultProbeInterval)
		}
	}
	if n := g.accepted.Load(); n != 1 {
		t.Errorf("the guest accepted %d connections, want the login on the first", n)
	}
	if AuthorizedKey(c.HostKey()) != AuthorizedKey(g.hostKey.PublicKey()) {
		t.Error("HostKey is not the guest's key")
	}
}

// TestDial_retriesAFailedHandshake: a port that accepts and drops the
// connection (sshd not ready behind it) is retried after a doubling
// backoff from RetryMin, and the login succeeds once sshd answers.
func TestDial_retriesAFailedHandshake(t *testing.T) {
	signer, pub := testKey(t)
	g := newFakeGuestDropping(t, pub, "", 3)
	var waits []time.Duration
	cfg := Config{User: "root", Signer: signer, HostKey: HostKeyPolicy{VMID: 100, TrustOnFirstUse: true}}
	cfg.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, g.addr(), cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.Close()
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	if !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	if n := g.accepted.Load(); n != 4 {
		t.Errorf("%d connections, want 4 (3 dropped, then the login)", n)
	}
}

// ecdsaKey is a fresh ECDSA P-256 public key.
func ecdsaKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}
