package sim

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corralhq/corral/internal/sim/vmrun"
	"github.com/corralhq/corral/internal/testenv"
)

// TestQemu_realBoot boots one real VM through the emulator's HTTP API:
// create with import-from the cached image, a cloud-init user and key
// and the agent; start; the agent answers ping and reports an IPv4
// address; a snapshot-mode backup freezes and thaws its filesystems
// (realFreeze); shutdown; destroy frees its disk files. Minutes under
// TCG (one boot serves every check of a real VM here), so it runs only
// with CORRAL_TEST_FULL=1 or CORRAL_REQUIRE_KVM=1.
func TestQemu_realBoot(t *testing.T) {
	t.Parallel()
	if !testenv.Full() && !testenv.KVM.Required() {
		t.Skip("boots a real VM (minutes without KVM); CORRAL_TEST_FULL=1 or CORRAL_REQUIRE_KVM=1 runs it")
	}
	for _, tool := range []string{"qemu-img", "qemu-system-x86_64", "genisoimage"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Lackf(t, testenv.KVM, "%s not found (apt-get install qemu-system-x86 qemu-utils genisoimage)", tool)
		}
	}
	// A boot under TCG takes both cores for minutes (and the image's
	// build as long): alone, not beside the other real boot or the
	// real-template tests.
	testenv.HoldMachineAlone(t)
	if _, ok := vmrun.CachedImage(); !ok {
		// Built once per machine (about 80 s; a build under way in
		// another test process is waited for through its lock file).
		if _, err := vmrun.EnsureImage(context.Background(), io.Discard); err != nil {
			testenv.Lackf(t, testenv.KVM, "the VM image cannot be built here: %v", err)
		}
	}
	k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), RealVMs: true})
	root := k.root()
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	spub, _ := ssh.NewPublicKey(pub)
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(spub)))
	p := url.Values{"vmid": {"900"}, "name": {"realvm"}, "memory": {"768"}, "cores": {"1"}, "agent": {"1"},
		"scsi0": {"local-lvm:0,import-from=local:import/" + ImportImageName}, "ide2": {"local-lvm:cloudinit"},
		"net0": {"virtio,bridge=vmbr0"}, "ipconfig0": {"ip=dhcp"}, "ciuser": {"corral"},
		"sshkeys": {strings.ReplaceAll(url.QueryEscape(key), "+", "%20")}}
	create := k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p)
	t.Logf("create:\n%s", strings.Join(create.log, "\n"))
	began := time.Now()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/900/status/start", nil)
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(k.dir, "run", "qemu", "900", "console.log"))
			t.Logf("console:\n%s", b)
		}
	}()
	testenv.WaitFor(t, "the guest agent to answer ping", func() bool {
		return k.do(root, http.MethodPost, "/nodes/pve/qemu/900/agent/ping", nil).status == http.StatusOK
	})
	t.Logf("agent answered %s after start", time.Since(began).Round(time.Second))
	var addr string
	testenv.WaitFor(t, "an IPv4 address from network-get-interfaces", func() bool {
		r := k.do(root, http.MethodGet, "/nodes/pve/qemu/900/agent/network-get-interfaces", nil)
		var got struct {
			Result []struct {
				Name string `json:"name"`
				IPs  []struct {
					Addr string `json:"ip-address"`
					Type string `json:"ip-address-type"`
				} `json:"ip-addresses"`
			} `json:"result"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.data, &got) != nil {
			return false
		}
		for _, i := range got.Result {
			for _, a := range i.IPs {
				if i.Name != "lo" && a.Type == "ipv4" {
					addr = a.Addr
				}
			}
		}
		return addr != ""
	})
	t.Logf("guest address %s, %s after start", addr, time.Since(began).Round(time.Second))
	realFreeze(t, k, root, "900")
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/900/status/shutdown", url.Values{"timeout": {"120"}, "forceStop": {"0"}})
	disk := filepath.Join(k.dir, "data", "pve", "local-lvm", "vm-900-disk-0")
	if _, err := os.Stat(disk); err != nil {
		t.Fatalf("the imported disk: %v", err)
	}
	k.mustOK(root, http.MethodDelete, "/nodes/pve/qemu/900", nil)
	for _, f := range []string{disk, filepath.Join(k.dir, "data", "pve", "local-lvm", "vm-900-cloudinit")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("destroy left %s: %v", f, err)
		}
	}
}
