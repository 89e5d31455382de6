package sim

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// vmSSHKey is the public key the VM clients hand cloud-init: a public
// key, no secret.
const vmSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPaSlPV5i9PXb8ewVqg4aX2bz1IIqbTKWFY8kzs6HlKT ops@corral"

// sshkeysEscaped is vmSSHKey as the clients send it and PVE keeps it:
// percent-encoded whole (Python's quote with no safe characters), as qemu-server's
// sshkeys parameter requires.
var sshkeysEscaped = strings.NewReplacer(" ", "%20", "@", "%40").Replace(vmSSHKey)

// Issue 34: community.general.proxmox_kvm creates a basic VM (SCSI disk
// on local-lvm, cloud-init drive with user, key and address, agent on,
// virtio NIC on vmbr0), creates it again (unchanged), starts it, reads
// its status, hot-plugs a second NIC with proxmox_nic (again: unchanged),
// raises its memory, shuts it down
// (testdata/thirdparty/ansible/vm.yml); the emulator holds what it
// asked for; then the same playbook with --tags remove destroys it.
func TestThirdParty_ansibleVM(t *testing.T) {
	t.Parallel()
	play, err := exec.LookPath("ansible-playbook")
	if err != nil {
		testenv.Lack(t, testenv.Ansible, "ansible-playbook is not installed: apt-get install ansible to run community.general.proxmox_kvm against the emulator (.ci/run does)")
	}
	ansibleOfTheDay(t, 3)
	py := pythonWith(t, "proxmoxer")
	p := newThirdParty(t)
	playbook := func(args ...string) {
		cmd := exec.Command(play, append([]string{"-i", "localhost,", testdataDir(t, "ansible") + "/vm.yml"}, args...)...)
		cmd.Env = append(ansibleEnv(t), "REQUESTS_CA_BUNDLE="+p.ca, "ANSIBLE_PYTHON_INTERPRETER="+py, "VM_SSH_KEY="+vmSSHKey)
		p.run(cmd)
	}
	playbook()
	var conf map[string]any
	p.ok(p.root(), "GET", "/nodes/pve/qemu/200/config", nil, &conf)
	for key, want := range map[string]any{
		"name": "vm1", "cores": float64(2), "memory": "1024", "agent": "1", "ciuser": "ops",
		"scsi0": "local-lvm:vm-200-disk-0,size=4G", "ide2": "local-lvm:vm-200-cloudinit,media=cdrom",
		"ipconfig0": "ip=192.0.2.20/24,gw=192.0.2.1", "sshkeys": sshkeysEscaped, "ostype": "l26",
	} {
		if conf[key] != want {
			t.Errorf("VM 200's %s after the playbook: %#v, want %#v", key, conf[key], want)
		}
	}
	if net1, _ := conf["net1"].(string); !strings.HasPrefix(net1, "virtio=BC:24:11:") || !strings.HasSuffix(net1, ",bridge=vmbr0,firewall=1,tag=20") {
		t.Errorf("VM 200's net1, which proxmox_nic hot-plugged: %q", net1)
	}
	if net0, _ := conf["net0"].(string); !strings.HasPrefix(net0, "virtio=BC:24:11:") || !strings.HasSuffix(net0, ",bridge=vmbr0") {
		t.Errorf("VM 200's net0: %q", net0)
	}
	var st struct {
		Status string `json:"status"`
	}
	p.ok(p.root(), "GET", "/nodes/pve/qemu/200/status/current", nil, &st)
	if st.Status != "stopped" {
		t.Errorf("VM 200 is %s, the playbook shut it down", st.Status)
	}
	playbook("--tags", "remove")
	if r := p.do(p.root(), "GET", "/nodes/pve/qemu/200/config", nil); r.status != 500 {
		t.Errorf("VM 200, which the playbook removed: %d %s", r.status, r.data)
	}
	if files := p.volumeFiles("200"); len(files) != 0 {
		t.Errorf("VM 200's volumes after its removal: %v", files)
	}
}
