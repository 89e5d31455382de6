package guest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corralhq/corral/internal/sim/model"
)

// ViewVMs is the VM runtime of the unisolated view (model.VMRuntime):
// no QEMU boots, but each started VM gets a guest that SSH reaches, for
// fast tests of what a client does inside a VM. Its guest agent answers
// as model.AgentVMRuntime's does, guest-exec runs its command in the
// guest (vmexec.go), and network-get-interfaces reports
// eth0 at the address where the guest's sshd listens: the VM's
// loopback address in the emulator's guest block (model.GuestAddress,
// as a CT's with ip=dhcp), or a static ipconfig0 address, reachable
// only when it is on loopback.
//
// The guest is what a cloud image with cloud-init makes of the VM's
// cloud-init drive: the user (ciuser) may log in with the keys of
// sshkeys, written to its ~/.ssh/authorized_keys; root may not (Debian's
// cloud images: "Please login as the user …"). Its host keys are made at
// the first boot of an instance and made anew when the cloud-init data
// change, as cloud-init does for a new instance-id (qemu-server derives
// the instance-id from a hash of the data). Commands run in the
// filesystem view of a CT (view.go) over the guest's own directory,
// kept per VM (its VMID and smbios1 uuid, so a recreated VM is another
// machine) under the emulator's run/vmview/. Deviations from a real
// guest: every login's commands run with the view's root rights, and
// sudo is a shell script that runs its command (cloud-init gives the
// user sudo without a password, so a script that sudo's behaves the
// same); the disks are not the guest's filesystem.
type ViewVMs struct {
	*model.AgentVMRuntime
	m *Manager

	mu  sync.Mutex
	vms map[int]*viewVM
}

// viewVM is one running VM of ViewVMs.
type viewVM struct {
	root string // the guest's filesystem
	user string // the cloud-init user, "" without a cloud-init drive
	ip   string // eth0's IPv4 address, "" for none
	mac  string
	srv  *ctServer // its sshd, nil when ip is not on loopback
}

// ViewVMs is the view's VM runtime when CTs run in the unisolated view
// (no LXC, opted in), nil otherwise: where guests are real containers,
// VMs are real QEMU guests or state only.
func (m *Manager) ViewVMs() *ViewVMs {
	if m.rt != nil || m.refused != nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.vmView == nil {
		m.vmView = &ViewVMs{AgentVMRuntime: model.NewAgentVMRuntime(), m: m, vms: map[int]*viewVM{}}
		m.vmView.RunExecWith(m.vmView.runExec)
	}
	return m.vmView
}

// Root is the directory of VM vmid's guest filesystem while it runs,
// "" when it does not.
func (r *ViewVMs) Root(vmid int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v := r.vms[vmid]; v != nil {
		return v.root
	}
	return ""
}

// Start prepares the guest's files as cloud-init would and starts its
// sshd (after the boot delay, as a CT's).
func (r *ViewVMs) Start(spec model.VMStartSpec) (int, error) {
	v, err := r.prepare(spec)
	if err != nil {
		return 0, fmt.Errorf("view VM %d: %w", spec.VMID, err)
	}
	pid, err := r.AgentVMRuntime.Start(spec)
	if err != nil {
		return 0, err
	}
	if ip, err := netip.ParseAddr(v.ip); err == nil && ip.IsLoopback() {
		v.srv = newCTServer(r.m, model.RunningGuest{VMID: spec.VMID, PID: pid, Address: v.ip})
		v.srv.vm = v
	}
	r.mu.Lock()
	old := r.vms[spec.VMID]
	r.vms[spec.VMID] = v
	r.mu.Unlock()
	if old != nil && old.srv != nil {
		old.srv.stop()
	}
	if v.srv != nil {
		go v.srv.run()
	}
	return pid, nil
}

// Stop ends the VM: its sshd, connections and sessions go with it.
func (r *ViewVMs) Stop(vmid int) error {
	r.end(vmid)
	return r.AgentVMRuntime.Stop(vmid)
}

// Shutdown powers the guest off at once.
func (r *ViewVMs) Shutdown(vmid int, timeout time.Duration) error {
	r.end(vmid)
	return r.AgentVMRuntime.Shutdown(vmid, timeout)
}

func (r *ViewVMs) end(vmid int) {
	r.mu.Lock()
	v := r.vms[vmid]
	delete(r.vms, vmid)
	r.mu.Unlock()
	if v != nil && v.srv != nil {
		v.srv.stop()
	}
}

// close stops every guest (the emulator stops).
func (r *ViewVMs) close() {
	r.mu.Lock()
	vms := r.vms
	r.vms = map[int]*viewVM{}
	r.mu.Unlock()
	for _, v := range vms {
		if v.srv != nil {
			v.srv.stop()
		}
	}
}

// Agent answers as AgentVMRuntime's agent, and network-get-interfaces
// as qemu-ga does: lo, and eth0 with the guest's address.
func (r *ViewVMs) Agent(vmid int, command string) (any, error) {
	out, err := r.AgentVMRuntime.Agent(vmid, command)
	if err != nil || command != "network-get-interfaces" {
		return out, err
	}
	r.mu.Lock()
	v := r.vms[vmid]
	r.mu.Unlock()
	ifs := []any{agentInterface("lo", "00:00:00:00:00:00", "127.0.0.1", 8)}
	if v != nil && v.ip != "" {
		ifs = append(ifs, agentInterface("eth0", strings.ToLower(v.mac), v.ip, 8))
	}
	return ifs, nil
}

// agentInterface is one interface of qemu-ga's network-get-interfaces.
func agentInterface(name, mac, ip string, prefix int) map[string]any {
	return map[string]any{"name": name, "hardware-address": mac, "ip-addresses": []any{
		map[string]any{"ip-address-type": "ipv4", "ip-address": ip, "prefix": prefix},
	}}
}

// prepare makes the guest's directory what cloud-init leaves at a boot
// of spec's instance: on a new instance-id new host keys, the user's
// authorized_keys and the host name; and the view's sudo.
func (r *ViewVMs) prepare(spec model.VMStartSpec) (*viewVM, error) {
	id := strconv.Itoa(spec.VMID)
	if spec.UUID != "" {
		id += "-" + spec.UUID
	}
	v := &viewVM{root: filepath.Join(r.m.c.Dir(), "run", "vmview", id), mac: spec.MAC, ip: model.GuestAddress(r.m.c.GuestBlock(), spec.VMID)}
	if err := os.MkdirAll(filepath.Join(v.root, "etc", "ssh"), 0o755); err != nil {
		return nil, err
	}
	if err := writeSudo(v.root); err != nil {
		return nil, err
	}
	ci := spec.CloudInit
	if ci == nil {
		return v, nil
	}
	v.user = ci.User
	if len(ci.Nets) > 0 && ci.Nets[0].IP != "" && ci.Nets[0].IP != "dhcp" {
		addr, _, _ := strings.Cut(ci.Nets[0].IP, "/")
		v.ip = addr
	}
	if err := newInstance(v.root, ci); err != nil {
		return nil, err
	}
	if v.user == "" {
		return v, nil
	}
	sshDir := filepath.Join(v.root, "home", v.user, ".ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return nil, err
	}
	return v, model.WriteFileAtomic(filepath.Join(sshDir, "authorized_keys"), []byte(strings.Join(ci.SSHKeys, "\n")+"\n"), 0o600)
}

// newInstance removes the host keys when the cloud-init data differ
// from the last boot's (a new instance-id: cloud-init's ssh module
// deletes the keys and makes new ones), and writes the host name.
func newInstance(root string, ci *model.VMCloudInit) error {
	data, err := json.Marshal(ci)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:20])
	idFile := filepath.Join(root, "var", "lib", "cloud", "data", "instance-id")
	if old, err := os.ReadFile(idFile); err == nil && strings.TrimSpace(string(old)) == id {
		return nil
	}
	keys, _ := filepath.Glob(filepath.Join(root, "etc", "ssh", "ssh_host_*"))
	for _, k := range keys {
		if err := os.Remove(k); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "hostname"), []byte(ci.Hostname+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(idFile), 0o755); err != nil {
		return err
	}
	return os.WriteFile(idFile, []byte(id+"\n"), 0o644)
}

// viewSudo is the view guest's sudo: the commands run with root's rights
// already, so it runs its command, taking the options a script passes
// without a password prompt (-n, -E, -H, --), and -i, root's login shell
// (corral exec -it of a VM app).
const viewSudo = `#!/bin/sh
# corral's emulator, view VM guest: every command runs with root's rights
# here; cloud-init gives the user sudo without a password (NOPASSWD:ALL).
login=
while [ $# -gt 0 ]; do
	case "$1" in
	-n|-E|-H) shift ;;
	-i) login=1; shift ;;
	--) shift; break ;;
	-*) echo "sudo: option $1 is not emulated" >&2; exit 1 ;;
	*) break ;;
	esac
done
if [ -n "$login" ]; then
	shell=
	while IFS=: read -r u _ _ _ _ _ s; do [ "$u" = root ] && shell=$s; done < /etc/passwd
	[ -x "$shell" ] || shell=/bin/sh
	cd /root 2>/dev/null || cd /
	[ $# -gt 0 ] || exec "$shell" -l
	exec "$shell" -l -c "$*"
fi
[ $# -gt 0 ] || { echo "usage: sudo [-n] [-i] [--] command" >&2; exit 1; }
exec "$@"
`

func writeSudo(root string) error {
	dir := filepath.Join(root, "usr", "local", "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return model.WriteFileAtomic(filepath.Join(dir, "sudo"), []byte(viewSudo), 0o755)
}

// vmServerConfig is serverConfig for a view VM's sshd: its host keys,
// and logins of the cloud-init user with its authorized_keys.
func (s *ctServer) vmServerConfig() (*ssh.ServerConfig, error) {
	v := s.vm
	s.mu.Lock()
	s.rootDir = v.root
	s.mu.Unlock()
	signers, err := hostKeys(v.root)
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	cfg := &ssh.ServerConfig{
		ServerVersion: serverVersion,
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			switch {
			case v.user == "":
				return nil, errors.New("the VM has no cloud-init user")
			case meta.User() != v.user:
				return nil, fmt.Errorf("Please login as the user %q rather than the user %q", v.user, meta.User())
			case !authorizedIn(v.root, "home/"+v.user+"/.ssh/authorized_keys", key):
				return nil, errors.New("key not in the user's ~/.ssh/authorized_keys")
			}
			return &ssh.Permissions{}, nil
		},
	}
	for _, k := range signers {
		cfg.AddHostKey(k)
	}
	return cfg, nil
}

// sessionEnv is the environment of the cloud-init user's commands.
func (v *viewVM) sessionEnv(sc *ssh.ServerConn, clientEnv []string) []string {
	home := "/home/" + v.user
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games",
		"HOME=" + home, "USER=" + v.user, "LOGNAME=" + v.user, "SHELL=/bin/bash", "MAIL=/var/mail/" + v.user,
	}
	rh, rp, _ := net.SplitHostPort(sc.RemoteAddr().String())
	lh, lp, _ := net.SplitHostPort(sc.LocalAddr().String())
	env = append(env, "SSH_CLIENT="+rh+" "+rp+" "+lp, "SSH_CONNECTION="+rh+" "+rp+" "+lh+" "+lp)
	return append(env, clientEnv...)
}
