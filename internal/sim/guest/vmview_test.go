package guest_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/sim/model"
)

// viewVMAddr is VM vmid's SSH endpoint as a client learns it: eth0 of
// its agent's network-get-interfaces, and the guests' port.
func viewVMAddr(t *testing.T, vms *guest.ViewVMs, m *guest.Manager, vmid int) string {
	t.Helper()
	out, err := vms.Agent(vmid, "network-get-interfaces")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range out.([]any) {
		ifc := i.(map[string]any)
		if ifc["name"] == "eth0" {
			ip := ifc["ip-addresses"].([]any)[0].(map[string]any)["ip-address"].(string)
			return net.JoinHostPort(ip, strconv.Itoa(m.Port()))
		}
	}
	t.Fatalf("the agent reports no eth0: %v", out)
	return ""
}

// TestViewVMs: a VM of the view runtime has a guest that SSH reaches at
// the address its agent reports: the cloud-init user logs in with its
// keys (root and other keys may not), sudo runs a command, the files
// land in the guest's directory, and the host key lasts across boots of
// one instance and changes with new cloud-init data or a new VM.
func TestViewVMs(t *testing.T) {
	_, m, _ := startViewManager(t, "1")
	unavailable := m.ExecUnavailable()
	vms := m.ViewVMs()
	if vms == nil {
		t.Fatal("no view VM runtime in the view")
	}
	key, pub, err := client.NewKey("corral@test")
	if err != nil {
		t.Fatal(err)
	}
	spec := model.VMStartSpec{VMID: 140, Agent: true, MAC: "BC:24:11:00:00:8C", UUID: "u1",
		CloudInit: &model.VMCloudInit{Hostname: "web", User: "admin", SSHKeys: []string{pub}, Nets: []model.VMCloudNet{{Name: "eth0", IP: "dhcp"}}}}
	if _, err := vms.Start(spec); err != nil {
		t.Fatal(err)
	}
	addr := viewVMAddr(t, vms, m, 140)
	if want := model.GuestAddress(m.Block(), 140); !strings.HasPrefix(addr, want+":") {
		t.Fatalf("eth0 at %s, want %s", addr, want)
	}
	dial := func(user string, policy client.HostKeyPolicy) (*client.Client, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return client.Dial(ctx, addr, client.Config{User: user, Signer: key, HostKey: policy, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	}
	if _, err := dial("root", client.HostKeyPolicy{TrustOnFirstUse: true}); err == nil {
		t.Fatal("root logged in to a cloud image")
	}
	cl, err := dial("admin", client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	first := client.AuthorizedKey(cl.HostKey())
	if unavailable != nil {
		t.Logf("the sudo and file checks skipped: %v", unavailable)
	} else {
		out, err := run(t, cl, "sudo -n -- sh -c 'echo $HOME > /srv/who; id -u'")
		if err != nil || !strings.Contains(out, "stdout: 0") {
			t.Fatalf("sudo: %v\n%s", err, out)
		}
		if b, err := os.ReadFile(filepath.Join(vms.Root(140), "srv", "who")); err != nil || string(b) != "/home/admin\n" {
			t.Fatalf("the guest's /srv/who = %q, %v", b, err)
		}
	}
	cl.Close()
	restart := func(s model.VMStartSpec) {
		t.Helper()
		if err := vms.Stop(s.VMID); err != nil {
			t.Fatal(err)
		}
		if vms.Root(s.VMID) != "" {
			t.Fatal("a stopped VM has a root")
		}
		if _, err := vms.Start(s); err != nil {
			t.Fatal(err)
		}
	}
	restart(spec)
	if cl, err = dial("admin", client.HostKeyPolicy{Pinned: first}); err != nil {
		t.Fatalf("the same instance's host key after a reboot: %v", err)
	}
	cl.Close()
	// New cloud-init data: a new instance, new host keys.
	ci := *spec.CloudInit
	ci.Hostname = "web2"
	spec.CloudInit = &ci
	restart(spec)
	if _, err := dial("admin", client.HostKeyPolicy{Pinned: first}); err == nil || !strings.Contains(err.Error(), "pinned key") {
		t.Fatalf("new cloud-init data kept the host key: %v", err)
	}
	// Muted agent: no address reported.
	vms.Mute(140, true)
	if _, err := vms.Agent(140, "network-get-interfaces"); err == nil {
		t.Fatal("a muted agent answered")
	}
	if err := vms.Stop(140); err != nil {
		t.Fatal(err)
	}
	if _, err := vms.Agent(140, "network-get-interfaces"); err == nil {
		t.Fatal("a stopped VM's agent answered")
	}
}
