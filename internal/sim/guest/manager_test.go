package guest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

var root = model.Auth{UserID: "root@pam"}

// freePort is a TCP port free on loopback right now, so that tests
// running in parallel processes never share the guests' port.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type kit struct {
	t   *testing.T
	c   *model.Cluster
	m   *guest.Manager
	key ssh.Signer
	pub string
}

func newKit(t *testing.T) *kit {
	t.Helper()
	return newKitPoll(t, 10*time.Millisecond)
}

// newKitPoll is newKit with the manager polling every poll.
func newKitPoll(t *testing.T, poll time.Duration) *kit {
	t.Helper()
	return newKitIn(t, t.TempDir(), poll)
}

// newKitIn is newKitPoll with the emulator's state in dir.
func newKitIn(t *testing.T, dir string, poll time.Duration) *kit {
	t.Helper()
	c, err := model.Open(model.Options{Dir: dir, HasTimeScale: true, TimeScale: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, err := guest.Start(c, guest.Options{Port: freePort(t), Poll: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	key, pub, err := client.NewKey("corral@test")
	if err != nil {
		t.Fatal(err)
	}
	return &kit{t: t, c: c, m: m, key: key, pub: pub}
}

// needExec skips the test when this machine cannot run guest commands,
// saying why.
func (k *kit) needExec() {
	k.t.Helper()
	testenv.NeedGuestExec(k.t, k.m.ExecUnavailable())
}

func (k *kit) task(upid string, err error) {
	k.t.Helper()
	if err != nil {
		k.t.Fatal(err)
	}
	task, err := k.c.WaitTask(context.Background(), "pve", upid)
	if err != nil {
		k.t.Fatal(err)
	}
	if task.ExitStatus != "OK" {
		k.t.Fatalf("task %s: %s\n%s", task.Type, task.ExitStatus, strings.Join(task.Log, "\n"))
	}
}

// create makes and starts CT vmid with corral's key and extra params.
func (k *kit) create(vmid int, extra map[string]string) {
	k.t.Helper()
	params := map[string]string{
		"vmid": strconv.Itoa(vmid), "ostemplate": model.DefaultTemplate, "rootfs": "local-lvm:1",
		"net0": "name=eth0,bridge=vmbr0,ip=dhcp", "ssh-public-keys": k.pub, "hostname": "hermes", "features": "nesting=1",
	}
	for key, v := range extra {
		params[key] = v
	}
	k.task(k.c.CreateCT(root, "pve", params))
	k.task(k.c.StartCT(root, "pve", vmid, nil))
}

func (k *kit) destroy(vmid int) {
	k.t.Helper()
	k.task(k.c.StopCT(root, "pve", vmid, nil))
	k.task(k.c.DestroyCT(root, "pve", vmid, nil))
}

// addr is CT vmid's SSH endpoint as a client learns it: eth0's address
// from GET .../interfaces and the emulator's guest port.
func (k *kit) addr(vmid int) string {
	k.t.Helper()
	ifs, err := k.c.CTInterfaces("pve", vmid)
	if err != nil {
		k.t.Fatal(err)
	}
	for _, ifc := range ifs {
		if ifc.Name == "eth0" {
			ip, _, _ := strings.Cut(ifc.Inet, "/")
			return net.JoinHostPort(ip, strconv.Itoa(k.m.Port()))
		}
	}
	k.t.Fatalf("CT %d has no eth0: %+v", vmid, ifs)
	return ""
}

func (k *kit) dial(vmid int, policy client.HostKeyPolicy) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	policy.VMID = vmid
	return client.Dial(ctx, k.addr(vmid), client.Config{User: "root", Signer: k.key, HostKey: policy, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
}

// output collects a command's lines.
type output struct {
	mu    sync.Mutex
	lines []string
}

func (o *output) add(s client.Stream, line string) {
	o.mu.Lock()
	o.lines = append(o.lines, string(s)+": "+line)
	o.mu.Unlock()
}

func (o *output) String() string { return strings.Join(o.lines, "\n") }

func run(t *testing.T, c *client.Client, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out output
	err := c.Run(ctx, script, nil, out.add)
	return out.String(), err
}

func TestGuest_volumeSurvivesRecreate_rootfsDoesNot(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	vol, err := k.c.AllocVolume(root, "pve", "local-lvm", map[string]string{"vmid": "999", "filename": "vm-999-disk-0", "size": "1G"})
	if err != nil {
		t.Fatal(err)
	}
	giveToCTRoot(t, k.c, vol)
	mp0 := map[string]string{"mp0": vol + ",mp=/home/hermes"}
	k.create(105, mp0)

	c1, err := k.dial(105, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	first := client.AuthorizedKey(c1.HostKey())

	k.needExec()
	out, err := run(t, c1, "echo hi; echo oops >&2; exit 3")
	var ee *client.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("exit: err = %v, want exit status 3 (output %q)", err, out)
	}
	// Streams are ordered each on its own, not against each other.
	lines := strings.Split(out, "\n")
	slices.Sort(lines)
	if !slices.Equal(lines, []string{"stderr: oops", "stdout: hi"}) {
		t.Errorf("output = %q", out)
	}
	out, err = run(t, c1, "echo x > /root/x && echo y > /home/hermes/y && cat /etc/hostname && pwd && cat /root/x /home/hermes/y")
	if err != nil || out != "stdout: hermes\nstdout: /root\nstdout: x\nstdout: y" {
		t.Fatalf("write: %v, output %q", err, out)
	}
	mounts, err := k.c.GuestMounts(105)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.Key != "rootfs" {
			continue
		}
		if _, err := os.Stat(filepath.Join(m.HostDir, "root", "x")); err != nil {
			t.Errorf("/root/x is not in the CT's rootfs volume: %v", err)
		}
	}
	c1.Close()

	k.destroy(105)
	k.create(105, mp0)

	// The new CT has a new host key: the pinned one is refused …
	_, err = k.dial(105, client.HostKeyPolicy{Pinned: first})
	var hk *client.HostKeyError
	if !errors.As(err, &hk) || hk.VMID != 105 || !strings.Contains(err.Error(), hk.Want) || !strings.Contains(err.Error(), hk.Got) || hk.Want == hk.Got {
		t.Fatalf("pinned dial to the recreated CT: err = %v, want a host key error naming CT 105 and both fingerprints", err)
	}
	// … and trust on first use sees a different key.
	c2, err := k.dial(105, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if client.AuthorizedKey(c2.HostKey()) == first {
		t.Error("host key unchanged by recreate")
	}
	out, err = run(t, c2, "cat /home/hermes/y; test -e /root/x && echo x is back; true")
	if err != nil || out != "stdout: y" {
		t.Fatalf("after recreate: %v, output %q; want the volume's y and no /root/x", err, out)
	}
	// The pinned key of the new CT is accepted.
	c3, err := k.dial(105, client.HostKeyPolicy{Pinned: client.AuthorizedKey(c2.HostKey())})
	if err != nil {
		t.Fatalf("dial with the new pinned key: %v", err)
	}
	c3.Close()
}

func TestGuest_stopClosesEndpointAndKillsSessions(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.create(106, nil)
	c, err := k.dial(106, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k.needExec()

	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.Run(context.Background(), "echo up; sleep 600", nil, func(_ client.Stream, line string) {
			if line == "up" {
				close(started)
			}
		})
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("command ended early: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("command did not start")
	}
	k.task(k.c.StopCT(root, "pve", 106, nil))
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("command succeeded although the CT stopped")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("command still running after the CT stopped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = client.Dial(ctx, k.addr2(106), client.Config{User: "root", Signer: k.key, HostKey: client.HostKeyPolicy{VMID: 106, TrustOnFirstUse: true}, RetryMin: 10 * time.Millisecond})
	if err == nil {
		t.Fatal("SSH still answers for a stopped CT")
	}
}

// addr2 is the endpoint of a CT that may be stopped (interfaces then
// reports nothing): its DHCP loopback address on node id 1.
func (k *kit) addr2(vmid int) string {
	return net.JoinHostPort("127.1."+strconv.Itoa(vmid/256)+"."+strconv.Itoa(vmid%256), strconv.Itoa(k.m.Port()))
}

func TestGuest_refusesUnknownKeyAndUser(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.create(107, nil)
	other, _, err := client.NewKey("")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		user   string
		signer ssh.Signer
	}{
		{"unknown key", "root", other},
		{"other user", "hermes", k.key},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := client.Dial(ctx, k.addr(107), client.Config{User: tt.user, Signer: tt.signer,
				HostKey: client.HostKeyPolicy{VMID: 107, TrustOnFirstUse: true}, RetryMin: 10 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), "refused the login") {
				t.Fatalf("err = %v, want a refused login", err)
			}
		})
	}
}

func TestRunningGuests_address(t *testing.T) {
	t.Parallel()
	tests := []struct {
		vmid int
		net  map[string]string
		want string
	}{
		{110, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=dhcp"}, "127.1.0.110"},
		{512, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=dhcp"}, "127.129.2.1"},
		{111, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=127.9.9.9/8"}, "127.9.9.9"},
		{112, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=192.0.2.8/24"}, ""},
		{113, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=192.0.2.8/24", "net1": "name=eth1,bridge=vmbr0,ip=dhcp"}, "127.1.0.113"},
		{114, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=manual"}, ""},
	}
	k := newKit(t)
	for _, tt := range tests {
		k.create(tt.vmid, tt.net)
	}
	got := map[int]string{}
	for _, g := range k.c.RunningGuests() {
		got[g.VMID] = g.Address
	}
	for _, tt := range tests {
		if got[tt.vmid] != tt.want {
			t.Errorf("CT %d %v: address %q, want %q", tt.vmid, tt.net, got[tt.vmid], tt.want)
		}
		// The endpoint address agrees with GET .../interfaces.
		ifs, _ := k.c.CTInterfaces("pve", tt.vmid)
		found := tt.want == ""
		for _, ifc := range ifs {
			if ifc.Name != "lo" && strings.HasPrefix(ifc.Inet, tt.want+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("CT %d: interfaces %+v do not report %s", tt.vmid, ifs, tt.want)
		}
	}
}

func TestGuest_stopKillsDetachedProcesses(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.create(109, nil)
	c, err := k.dial(109, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k.needExec()
	pid := startDaemon(t, c, 7109)
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Fatalf("daemon %d not running: %v", pid, err)
	}
	k.task(k.c.StopCT(root, "pve", 109, nil))
	testenv.WaitFor(t, fmt.Sprintf("daemon %d to end with the CT's stop", pid), func() bool {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || strings.Contains(string(data), ") Z ") // gone, or a zombie waiting for its reaper
	})
}

// TestGuest_stopEndsSessionsBeforeTheTaskEnds: the CT's processes are
// gone when its stop task ends, not at the manager's next poll (here an
// hour away), so a destroy right after a stop never races a session
// writing into the rootfs.
func TestGuest_stopEndsSessionsBeforeTheTaskEnds(t *testing.T) {
	t.Parallel()
	k := newKitPoll(t, time.Hour)
	k.create(110, nil) // the start reaches the manager through the run hook
	c, err := k.dial(110, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k.needExec()
	pid := startDaemon(t, c, 7110)
	k.task(k.c.StopCT(root, "pve", 110, nil))
	// Killed, it may still be exiting; it has left its namespaces then.
	if ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt"); err == nil {
		t.Errorf("daemon %d still runs in %s when the CT's stop task has ended", pid, ns)
	}
}

// newBootDelayKit is a kit whose tasks take no time and whose CTs'
// sshd answers 2 s after their start, as a booting guest's.
func newBootDelayKit(t *testing.T) *kit {
	t.Helper()
	c, err := model.Open(model.Options{Dir: t.TempDir(), HasTimeScale: true, TimeScale: 1, Durations: map[string]time.Duration{
		"vzcreate": 0, "vzstart": 0, "bootdelay": 2 * time.Second,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// An endpoint that fails is tried again after 100 ms, not a second.
	m, err := guest.Start(c, guest.Options{Port: freePort(t), Poll: 10 * time.Millisecond, RetryWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	k := &kit{t: t, c: c, m: m}
	k.key, k.pub, _ = client.NewKey("")
	return k
}

func TestGuest_sshdAnswersAfterTheBootDelay(t *testing.T) {
	t.Parallel()
	k := newBootDelayKit(t)
	m := k.m
	k.create(115, nil)
	addr := k.addr(115)
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Fatal("sshd answered right after the start task, before the boot delay")
	}
	cl, err := k.dial(115, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatalf("after the boot delay: %v", err)
	}
	cl.Close()
	if ep, ok := m.Endpoint(115); !ok || ep != addr {
		t.Errorf("Endpoint = %q, %v; want %s", ep, ok, addr)
	}
}

func TestGuest_concurrentSessions(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.create(116, nil)
	c, err := k.dial(116, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k.needExec()
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			out, err := run(t, c, "cat /etc/hostname > /root/s"+strconv.Itoa(i)+" && sleep 0.2 && cat /root/s"+strconv.Itoa(i))
			if err == nil && out != "stdout: hermes" {
				err = errors.New("output " + out)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	out, err := run(t, c, "ls /root | grep -c '^s'")
	if err != nil || out != "stdout: "+strconv.Itoa(n) {
		t.Errorf("after the sessions: %v, %q", err, out)
	}
	// Every session's overlay work directory is gone once it ended.
	mounts, err := k.c.GuestMounts(116)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.Key == "rootfs" {
			// A container without a system of its own keeps its boot's
			// overlays (boot-*) while it runs.
			entries, err := os.ReadDir(filepath.Join(m.HostDir, ".corral-ovl"))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), "boot-") {
					t.Errorf("work directory %s left in the rootfs", e.Name())
				}
			}
		}
	}
}

// startDaemon starts a daemon in the guest in its own session and process
// group, as provisioning steps start them, and returns its host PID (in
// a container the guest's $! is a PID of the CT's own namespace, so the
// host's /proc is searched for the daemon's unique command line).
func startDaemon(t *testing.T, c *client.Client, marker int) int {
	t.Helper()
	out, err := run(t, c, "setsid sleep "+strconv.Itoa(marker)+" </dev/null >/dev/null 2>&1 & echo $!")
	if err != nil {
		t.Fatalf("start daemon: %v (%q)", err, out)
	}
	if _, err := strconv.Atoi(strings.TrimPrefix(out, "stdout: ")); err != nil {
		t.Fatalf("output %q", out)
	}
	want := "sleep\x00" + strconv.Itoa(marker) + "\x00"
	found := 0
	testenv.WaitFor(t, fmt.Sprintf("daemon sleep %d on the host", marker), func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == want {
				found = pid
				return true
			}
		}
		return false
	})
	return found
}

// giveToCTRoot gives a volume allocated through the storage API (a blank
// file system, root's on PVE) to an unprivileged CT's root, as
// mkfs.ext4 -E root_owner=100000:100000 does for a volume PVE makes for
// one: without it the CT's root sees nobody's directory and cannot
// write there.
func giveToCTRoot(t *testing.T, c *model.Cluster, volid string) {
	t.Helper()
	if !c.IDShift() {
		return
	}
	dir, err := c.VolumePath("pve", volid)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, model.CTRootID, model.CTRootID); err != nil {
		t.Fatal(err)
	}
}

// An endpoint that could not start (here its address is taken when the
// boot delay ends; on a loaded host, a container start that outlasts
// LXC's wait) is started again, so the CT does not run without an sshd
// until its next restart.
func TestGuest_endpointRetriedAfterAFailedStart(t *testing.T) {
	t.Parallel()
	k := newBootDelayKit(t)
	m := k.m
	k.create(116, nil)
	addr := k.addr(116)
	squatter, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("take %s before the boot delay ends: %v", addr, err)
	}
	testenv.WaitFor(t, "the endpoint to fail on the taken address", func() bool {
		ep, ok := m.Endpoint(116)
		if ok {
			t.Fatal("the endpoint listens on an address that is taken")
		}
		return ep != "" // ready, and failed
	})
	squatter.Close()
	cl, err := k.dial(116, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatalf("after the address was freed: %v", err)
	}
	cl.Close()
}
