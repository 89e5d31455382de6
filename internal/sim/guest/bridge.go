package guest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/sim/model"
)

// The emulator's network: one network namespace per Manager, held by a
// child process (sleep, with a parent-death signal), with a bridge vmbr0
// at GatewayIP/16. Every CT's eth0 is a veth on that bridge, so CTs of
// one emulator reach each other and the gateway, and nothing else: the
// host's network is never changed, and two emulators' bridges live in
// different namespaces. The namespace goes with the holder, so a killed
// emulator leaves none behind.
//
// eth0's address: a static ip=… as configured (its gw= is added to the
// bridge, so the CT reaches "its host" there); ip=dhcp gets
// 10.0.<n/256>.<n%256>/16 with n = vmid%65000+2 and GatewayIP as
// default route. The address PVE reports for ip=dhcp stays the CT's
// loopback address (lxc_net.go): that is where corral reaches the CT's
// sshd, and inside the CT every 127/8 address is local, so a service
// bound to it answers the CT's own sessions.
//
// The gateway forwards GatewayIP:8006 to the emulator's PVE API (Expose),
// as a real CT reaches its node's API on the node's bridge address.

// GatewayIP is vmbr0's address in every emulator's network namespace.
const GatewayIP = "10.0.0.1"

// bridgeMAC is vmbr0's MAC (locally administered; each emulator's bridge
// is in a namespace of its own).
const bridgeMAC = "02:00:0a:00:00:01"

// bridgeNet is the emulator's own network namespace with its bridge.
type bridgeNet struct {
	holder *exec.Cmd
	log    *slog.Logger

	mu  sync.Mutex
	lns []net.Listener
	gws map[string]bool // addresses added to vmbr0

	// relayed are the emulator-side local addresses of connections
	// forward relays from the bridge, to the CT-side client's address:
	// how the API knows a request came from a CT (FromBridge).
	relayed sync.Map
}

// newBridgeNet makes the namespace and its bridge (needs root and ip).
func newBridgeNet(log *slog.Logger) (*bridgeNet, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("ip not found: install Debian's iproute2")
	}
	holder := exec.Command("sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	go holder.Wait()
	n := &bridgeNet{holder: holder, log: log, gws: map[string]bool{}}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// A fixed MAC: a bridge that takes its lowest port's would
		// change it as CTs come and go, and stale ARP entries in the
		// CTs would drop their traffic to the gateway.
		{"link", "add", "vmbr0", "address", bridgeMAC, "type", "bridge"},
		{"addr", "add", GatewayIP + "/16", "dev", "vmbr0"},
		{"link", "set", "vmbr0", "up"},
	} {
		if err := n.ip(args...); err != nil {
			n.close()
			return nil, err
		}
	}
	// Routes between the bridge's subnets (dhcp and static CTs); the
	// namespace has no other interface, so nothing leaves it.
	if out, err := exec.Command("nsenter", "--net="+n.nsPath(), "--", "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward").CombinedOutput(); err != nil {
		log.Warn("no routing between the bridge's subnets", "err", err, "out", string(out))
	}
	return n, nil
}

func (n *bridgeNet) nsPath() string { return "/proc/" + strconv.Itoa(n.holder.Process.Pid) + "/ns/net" }

// ip runs ip(8) in the namespace.
func (n *bridgeNet) ip(args ...string) error {
	out, err := exec.Command("nsenter", append([]string{"--net=" + n.nsPath(), "--", "ip"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// innerAddress is eth0's address on the bridge for ip=dhcp.
func innerAddress(vmid int) string { return model.BridgeAddress(vmid) }

// attach plugs run's interfaces into the CT whose init is pid: a veth
// pair made in the emulator's namespace, one end on vmbr0 (veth<vmid>i<n>,
// as PVE names it), the other moved into the CT and set up there with
// its name, MAC, address and default route. (LXC's own veth setup
// would need lxc-start inside the namespace, where /sys still shows the
// host's interfaces.)
func (n *bridgeNet) attach(pid int, run model.GuestRun) error {
	in := func(args ...string) error {
		out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", "--", "ip"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s in the CT: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	for i, nic := range run.Nets {
		if nic.Name == "" {
			continue
		}
		host := fmt.Sprintf("veth%di%d", run.VMID, i)
		peer := fmt.Sprintf("c%di%d", run.VMID, i)
		n.ip("link", "del", host) // a previous boot's, if its CT died oddly
		if err := n.ip("link", "add", host, "type", "veth", "peer", "name", peer); err != nil {
			return err
		}
		if err := n.ip("link", "set", host, "master", "vmbr0", "up"); err != nil {
			return err
		}
		if err := n.ip("link", "set", peer, "netns", strconv.Itoa(pid)); err != nil {
			return err
		}
		args := []string{"link", "set", peer, "name", nic.Name}
		if nic.HWAddr != "" {
			args = append(args, "address", strings.ToLower(nic.HWAddr))
		}
		if err := in(args...); err != nil {
			return err
		}
		if err := in("link", "set", nic.Name, "up"); err != nil {
			return err
		}
		addr, gw := "", ""
		switch {
		case nic.IP == "dhcp":
			addr, gw = innerAddress(run.VMID), GatewayIP
		case strings.Contains(nic.IP, "/"):
			addr = nic.IP
			if g := net.ParseIP(nic.GW); g != nil && g.To4() != nil {
				if _, ipnet, err := net.ParseCIDR(nic.IP); err == nil && ipnet.Contains(g) {
					n.addGateway(g.String(), ipnet)
					gw = g.String()
				}
			}
		}
		if addr != "" {
			if err := in("addr", "add", addr, "dev", nic.Name); err != nil {
				return err
			}
		}
		if gw != "" {
			// A second netN with a gateway finds the route taken.
			if err := in("route", "add", "default", "via", gw, "dev", nic.Name); err != nil && !strings.Contains(err.Error(), "File exists") {
				return err
			}
		}
	}
	return nil
}

// addGateway gives vmbr0 a static CT's gateway address, once.
func (n *bridgeNet) addGateway(gw string, ipnet *net.IPNet) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gws[gw] || gw == GatewayIP {
		return
	}
	ones, _ := ipnet.Mask.Size()
	if err := n.ip("addr", "add", gw+"/"+strconv.Itoa(ones), "dev", "vmbr0"); err != nil {
		n.log.Warn("gateway address on vmbr0", "err", err)
		return
	}
	n.gws[gw] = true
}

// listen opens a TCP listener inside the namespace.
func (n *bridgeNet) listen(addr string) (net.Listener, error) { return listenIn(n.nsPath(), addr) }

// listenIn opens a TCP listener inside the network namespace at nsPath.
func listenIn(nsPath, addr string) (ln net.Listener, err error) {
	nerr := inNetns(nsPath, func() { ln, err = net.Listen("tcp", addr) })
	if nerr != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, nerr
	}
	return ln, err
}

// dialIn connects to addr from inside the network namespace at nsPath: a
// socket belongs to the namespace it was made in, so only the connect's
// start needs the thread there.
func dialIn(nsPath, addr string, timeout time.Duration) (c net.Conn, err error) {
	nerr := inNetns(nsPath, func() { c, err = net.DialTimeout("tcp", addr, timeout) })
	if nerr != nil {
		if c != nil {
			c.Close()
		}
		return nil, nerr
	}
	return c, err
}

// inNetns runs fn on a locked OS thread that has entered the network
// namespace at nsPath, then returns the thread to the emulator's.
func inNetns(nsPath string, fn func()) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- err
			return
		}
		defer own.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("enter the guests' network namespace: %w", err)
			return
		}
		fn()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// This thread stays in the wrong namespace: let it exit
			// with the goroutine (no UnlockOSThread).
			ch <- err
			return
		}
		runtime.UnlockOSThread()
		ch <- nil
	}()
	return <-ch
}

// forward serves addr (inside the namespace) by relaying each connection
// to target (in the emulator's namespace).
func (n *bridgeNet) forward(addr, target string) error {
	ln, err := n.listen(addr)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.lns = append(n.lns, ln)
	n.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relayNoted(c, target, &n.relayed)
		}
	}()
	return nil
}

// serveRelay relays every connection to ln on to target until ln closes.
func serveRelay(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go relay(c, target)
	}
}

func relay(c net.Conn, target string) { relayNoted(c, target, nil) }

// relayNoted is relay that, with noted, keeps the relayed connection's
// local address → c's remote address while it lasts.
func relayNoted(c net.Conn, target string, noted *sync.Map) {
	defer c.Close()
	t, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer t.Close()
	if noted != nil {
		key := t.LocalAddr().String()
		noted.Store(key, c.RemoteAddr().String())
		defer noted.Delete(key)
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(t, c); t.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, t); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}

// close ends the forwarders and the namespace's holder.
func (n *bridgeNet) close() {
	n.mu.Lock()
	for _, ln := range n.lns {
		ln.Close()
	}
	n.lns = nil
	n.mu.Unlock()
	if n.holder.Process != nil {
		n.holder.Process.Kill()
	}
}
