package model

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"
)

// RunningGuest is what the guest layer (package sim/guest) needs to know
// of a running CT to serve its SSH endpoint.
type RunningGuest struct {
	VMID int
	Node string
	// PID is the CT's init PID; it changes with every start, so a reboot
	// shows as a new PID.
	PID int
	// Address is the CT's loopback address for its endpoints: the
	// address of the first netN that has one on 127/8 (ip=dhcp, or a
	// static ip inside 127.0.0.0/8), as GET .../interfaces reports it.
	// "" when the CT has no such interface (no netN, ip=manual, or only
	// static addresses outside loopback, which the emulator never binds).
	Address string
}

// GuestGeneration moves whenever a guest's config or state changes: a
// poller lists RunningGuests again only when it moved (at thousands of
// running CTs the list is not free).
func (gs *guests) GuestGeneration() uint64 {
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	return gs.guestGen
}

// RunningGuests lists the running CTs of every node, by VMID. The guest
// layer polls it to follow starts, stops, reboots and destroys whatever
// code path caused them.
func (gs *guests) RunningGuests() []RunningGuest {
	st := gs.state()
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	var out []RunningGuest
	for vmid, g := range st.Guests {
		if !g.Running {
			continue
		}
		rg := RunningGuest{VMID: vmid, Node: g.Node, PID: g.PID}
		rg.Address = guestLoopbackLocked(g, gs.guestBlockLocked())
		out = append(out, rg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VMID < out[j].VMID })
	return out
}

// guestLoopbackLocked is the first netN address of g on 127/8, computed
// as CTInterfaces does.
func guestLoopbackLocked(g *Guest, block int) string {
	for _, key := range netKeys(g.Config) {
		n, err := ParseNet(g.Config[key])
		if err != nil {
			continue
		}
		var addr string
		switch ip := n["ip"]; ip {
		case "", "manual":
			continue
		case "dhcp":
			addr = dhcpAddress(block, g.VMID)
		default:
			a, ok := parseCIDR(ip)
			if !ok {
				continue
			}
			addr = a.Address
		}
		if ip := net.ParseIP(addr); ip != nil && ip.To4() != nil && ip.IsLoopback() {
			return addr
		}
	}
	return ""
}

// GuestPID is the init PID of CT vmid while it runs, 0 otherwise: a
// cheap check that an endpoint still serves the same boot.
func (gs *guests) GuestPID(vmid int) int {
	st := gs.state()
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	if g := st.Guests[vmid]; g != nil && g.Running {
		return g.PID
	}
	return 0
}

// WithRunningGuest runs fn while CT vmid runs with init PID pid, holding
// the cluster lock so that no stop, and so no destroy, can remove the
// CT's rootfs while fn writes into it. fn must be quick and must not call
// the Cluster. It reports false, without calling fn, when the CT no
// longer runs that boot. The lock is held for reading: that keeps every
// change out as well, and fn changes no State, so the readers' key
// (ReadKey) stays put when a thousand sshds start.
func (gs *guests) WithRunningGuest(vmid, pid int, fn func() error) (bool, error) {
	st := gs.state()
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	g := st.Guests[vmid]
	if g == nil || !g.Running || g.PID != pid {
		return false, nil
	}
	return true, fn()
}

// GuestRun is what a container runtime needs of a CT's configuration to
// boot it (package sim/guest): its hostname, limits and interfaces.
type GuestRun struct {
	VMID         int
	Hostname     string
	MemoryMiB    int // 0: unlimited
	SwapMiB      int
	Cores        int // 0: every host core
	Unprivileged bool
	// Keyctl is features keyctl=1: PVE lets an unprivileged CT call
	// keyctl(2) only then (LXC.pm's seccomp config answers ENOSYS
	// otherwise), which Docker's runtime may need.
	Keyctl bool
	Nets   []GuestNet
}

// GuestNet is one netN of a CT as the runtime wires it.
type GuestNet struct {
	Key    string // net0, …
	Name   string // eth0, …
	HWAddr string
	IP     string // CIDR, "dhcp", "manual" or ""
	GW     string
}

// GuestRunConfig reads CT vmid's GuestRun from its current config.
func (gs *guests) GuestRunConfig(vmid int) (GuestRun, error) {
	st := gs.state()
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	g := st.Guests[vmid]
	if g == nil {
		return GuestRun{}, fmt.Errorf("no CT %d", vmid)
	}
	r := GuestRun{VMID: vmid, Hostname: g.Config["hostname"], Unprivileged: isTrue(g.Config["unprivileged"]),
		Keyctl: ctParseFeatures(g.Config["features"])["keyctl"] == "1"}
	if r.Hostname == "" {
		r.Hostname = fmt.Sprintf("CT%d", vmid)
	}
	r.MemoryMiB, _ = strconv.Atoi(g.Config["memory"])
	r.SwapMiB, _ = strconv.Atoi(g.Config["swap"])
	r.Cores, _ = strconv.Atoi(g.Config["cores"])
	for _, key := range netKeys(g.Config) {
		n, err := ParseNet(g.Config[key])
		if err != nil {
			continue
		}
		r.Nets = append(r.Nets, GuestNet{Key: key, Name: n["name"], HWAddr: n["hwaddr"], IP: n["ip"], GW: n["gw"]})
	}
	return r, nil
}

// ShutdownHook asks CT vmid's init to power off and waits up to timeout
// for it (the guest layer's runtime); it reports whether the CT stopped.
type ShutdownHook func(vmid int, timeout time.Duration) bool

// SetShutdownHook installs h (nil removes it): a shutdown task calls it
// before it records the CT stopped, so that the guest's own services
// stop cleanly, as on PVE.
func (gs *guests) SetShutdownHook(h ShutdownHook) {
	gs.hookMu.Lock()
	gs.shutdownHook = h
	gs.hookMu.Unlock()
}

func (gs *guests) guestShutdown(vmid int, timeout time.Duration) {
	gs.hookMu.Lock()
	h := gs.shutdownHook
	gs.hookMu.Unlock()
	if h != nil {
		h(vmid, timeout)
	}
}

// SetStartGuard installs h (nil removes it): a start task calls it
// before it records the CT running and fails with its error, so that the
// guest layer can refuse to start a CT it could not run safely (no
// isolation on this host) before any command is sent to it.
func (gs *guests) SetStartGuard(h func(vmid int) error) {
	gs.hookMu.Lock()
	gs.startGuard = h
	gs.hookMu.Unlock()
}

func (gs *guests) guestStartGuard(vmid int) error {
	gs.hookMu.Lock()
	h := gs.startGuard
	gs.hookMu.Unlock()
	if h == nil {
		return nil
	}
	return h(vmid)
}
