package vmrun

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestBootImage boots the image as a real QEMU guest: an overlay disk,
// a cloud-init seed with a user and a key, the guest agent. The agent
// answers ping and reports an address; SSH through the forwarded port
// with the key reads the host name cloud-init set; an ACPI shutdown
// ends QEMU.
func TestBootImage(t *testing.T) {
	needTools(t)
	if !KVMUsable() {
		testenv.Lack(t, testenv.KVM, "/dev/kvm is not usable")
	}
	img, err := EnsureImage(context.Background(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.Stat(img.Disk)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "vm-9001-disk-0.qcow2")
	if err := Overlay(context.Background(), img.Disk, disk, 3<<30); err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	spub, _ := ssh.NewPublicKey(pub)
	signer, _ := ssh.NewSignerFromKey(priv)
	mac := "BC:24:11:00:90:01"
	ci := model.VMCloudInit{Hostname: "vmtest", User: "corral", SSHKeys: []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(spub)))},
		Nets: []model.VMCloudNet{{Name: "eth0", MAC: mac, IP: "dhcp"}}}
	seed := filepath.Join(dir, "vm-9001-cloudinit.iso")
	if err := WriteSeed(context.Background(), Seed{UserData: ci.UserData(), NetworkConfig: ci.NetworkConfig(), MetaData: ci.MetaData()}, seed); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	spec := Spec{VMID: 9001, Dir: filepath.Join(dir, "run"), MemoryMB: 768, Cores: 1, Kernel: img.Kernel, Initrd: img.Initrd,
		Disks: []Disk{{Key: "scsi0", File: disk, Format: "qcow2"}, {Key: "ide2", File: seed, CDROM: true}},
		MAC:   mac, SSHPort: port, Agent: true}
	began := time.Now()
	vm, err := Start(context.Background(), spec, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(spec.ConsoleLog())
			t.Logf("console:\n%s", b)
		}
	}()
	testenv.WaitFor(t, "the guest agent to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := vm.Agent(ctx, "guest-ping", nil)
		return err == nil
	})
	t.Logf("agent answered %s after start (KVM %v)", time.Since(began).Round(time.Millisecond), vm.KVM)
	addr := agentIPv4(t, vm)
	out := sshOutput(t, port, signer, "cat /etc/hostname")
	t.Logf("SSH answered %s after start; guest address %s", time.Since(began).Round(time.Millisecond), addr)
	if got := strings.TrimSpace(string(out)); got != "vmtest" {
		t.Fatalf("/etc/hostname = %q, want vmtest (cloud-init's hostname)", got)
	}
	if err := vm.Shutdown(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(img.Disk); err != nil || !after.ModTime().Equal(base.ModTime()) || after.Size() != base.Size() {
		t.Errorf("the cached image changed under the overlay: %v, %v", after, err)
	}
}

// agentIPv4 waits for the guest agent to report an IPv4 address on an
// interface other than lo, and returns it.
func agentIPv4(t *testing.T, vm *VM) string {
	var addr string
	testenv.WaitFor(t, "an IPv4 address from the agent", func() bool {
		r, err := vm.Agent(context.Background(), "guest-network-get-interfaces", nil)
		if err != nil {
			return false
		}
		var ifs []struct {
			Name string `json:"name"`
			IPs  []struct {
				Addr string `json:"ip-address"`
				Type string `json:"ip-address-type"`
			} `json:"ip-addresses"`
		}
		json.Unmarshal(r, &ifs)
		for _, i := range ifs {
			for _, a := range i.IPs {
				if i.Name != "lo" && a.Type == "ipv4" {
					addr = a.Addr
				}
			}
		}
		return addr != ""
	})
	return addr
}

// sshOutput waits until SSH as corral with signer through the forwarded
// port runs cmd, and returns its output.
func sshOutput(t *testing.T, port int, signer ssh.Signer, cmd string) []byte {
	cfg := &ssh.ClientConfig{User: "corral", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second}
	var out []byte
	testenv.WaitFor(t, "SSH with the cloud-init key", func() bool {
		c, err := ssh.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cfg)
		if err != nil {
			return false
		}
		defer c.Close()
		s, err := c.NewSession()
		if err != nil {
			return false
		}
		defer s.Close()
		out, err = s.Output(cmd)
		return err == nil
	})
	return out
}
