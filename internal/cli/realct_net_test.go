package cli

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pve"
)

const netManifest = `apps:
  - name: neta
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
  - name: netb
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    network:
      bridge: vmbr0
      dns: [192.0.2.53]
`

// TestRealTemplateNetwork: two real-template CTs on ip=dhcp, one with a
// nameserver.
//   - pve-container's Debian setup wrote /etc/network/interfaces and
//     /etc/resolv.conf at create, ifupdown's networking.service is
//     active with them, and a static net1 added later is in the file
//     (and on eth1) after the next start.
//   - GET …/interfaces gives the host the loopback address it reaches a
//     CT at, and a CT (through the API at the bridge gateway) the CT's
//     bridge address; a command in CT A reaches CT B's sshd at the
//     address the API gave A.
func TestRealTemplateNetwork(t *testing.T) {
	t.Parallel()
	c := newRealCluster(t)
	m := writeManifestIn(t, "netct", netManifest)
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	exec := func(app, script string) result { return c.execIn(m, app, script) }
	vmid := map[string]int{}
	for _, a := range c.status(m).Apps {
		vmid[a.App] = a.Containers[0].VMID
	}
	tests := []struct {
		name, app, script, want string
	}{
		// at the end of the boot, ifupdown's unit has not failed
		{"neta's networking did not fail", "neta", "systemctl is-system-running --wait >/dev/null; systemctl --failed --no-legend --plain | grep -c networking || true", "0\n"},
		{"netb's networking did not fail", "netb", "systemctl is-system-running --wait >/dev/null; systemctl --failed --no-legend --plain | grep -c networking || true", "0\n"},
		{"dhcp: interfaces", "neta", "grep -A1 '^auto eth0' /etc/network/interfaces", "auto eth0\niface eth0 inet dhcp\n"},
		{"lo is declared", "neta", "grep -c '^auto lo' /etc/network/interfaces", "1\n"},
		{"the template's lines stay", "neta", "grep -c '^source /etc/network/interfaces.d/' /etc/network/interfaces", "1\n"},
		{"nameserver: resolv.conf", "netb", "cat /etc/resolv.conf", "# --- BEGIN PVE ---\nnameserver 192.0.2.53\n# --- END PVE ---\n"},
		{"the setup's files are the CT root's (shifted when unprivileged)", "netb",
			"stat -c %U /etc/network/interfaces /etc/resolv.conf /etc/apt/apt.conf.d/00corral-sim-proxy /etc/systemd/system/networking.service.d /etc/systemd/system/networking.service.d/00corral-sim.conf",
			"root\nroot\nroot\nroot\nroot\n"},
		{"ifupdown's unit is active", "netb", "systemctl is-active networking", "active\n"},
	}
	for _, tt := range tests {
		if r := exec(tt.app, tt.script); r.code != 0 || r.stdout != tt.want {
			t.Errorf("%s: exit %d, stdout %q, want %q\n%s", tt.name, r.code, r.stdout, tt.want, r.stderr)
		}
	}

	// The host's view: the loopback address it reaches neta's sshd at.
	ifs, err := c.pveClient().Interfaces(context.Background(), "pve", vmid["neta"])
	if err != nil {
		t.Fatal(err)
	}
	if a := ifaceInet(ifs, "eth0"); !strings.HasPrefix(a, "127.") {
		t.Errorf("the host is given %q for neta's eth0, want its loopback address", a)
	}

	// From inside neta: the API at the gateway gives the bridge
	// addresses, and neta reaches netb's sshd there with a key netb
	// authorizes.
	port := strconv.Itoa(c.srv.Guests().Port())
	api := "curl -sfk -H 'Authorization: PVEAPIToken=" + c.srv.Credentials().OperatorToken + "' https://10.0.0.1:8006/api2/json/nodes/pve/lxc/%d/interfaces" +
		" | python3 -c 'import json,sys; print([i[\"inet\"] for i in json.load(sys.stdin)[\"data\"] if i[\"name\"]==\"eth0\"][0])'"
	r := exec("neta", strings.ReplaceAll(api, "%d", strconv.Itoa(vmid["neta"])))
	if r.code != 0 || !strings.HasPrefix(r.stdout, "10.0.") {
		t.Errorf("neta's own eth0 as the API tells neta: exit %d %q, want its bridge address\n%s", r.code, r.stdout, r.stderr)
	}
	r = exec("neta", "rm -f /root/k /root/k.pub; ssh-keygen -q -t ed25519 -N '' -f /root/k && cat /root/k.pub")
	if r.code != 0 {
		t.Fatalf("ssh-keygen in neta: %d %s", r.code, r.stderr)
	}
	volid, _, _ := strings.Cut(c.config(vmid["netb"])["rootfs"], ",")
	keys := c.file(volid, "root/.ssh/authorized_keys")
	f, err := os.OpenFile(keys, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(r.stdout)
	f.Close()
	sshTo := func(addr string) string {
		return "ssh -i /root/k -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p " + port + " root@" + addr + " hostname"
	}
	reach := "a=$(" + strings.ReplaceAll(api, "%d", strconv.Itoa(vmid["netb"])) + ") && " + sshTo("${a%/*}")
	if r := exec("neta", reach); r.code != 0 || r.stdout != "netb\n" {
		t.Errorf("neta reaching netb at the address the API gives it: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}

	// A static net1 added later is written at the next start, as PVE's
	// pre-start setup does, and netb's sshd answers there too.
	pc := c.pveRoot()
	if err := pc.UpdateContainerConfig(context.Background(), "pve", vmid["netb"], &pve.ConfigUpdate{Net: map[int]pve.NetDevice{1: {Name: "eth1", Bridge: "vmbr0", IP: "10.0.200.20/16"}}}); err != nil {
		t.Fatal(err)
	}
	upid, err := pc.RebootContainer(context.Background(), "pve", vmid["netb"])
	if err == nil {
		_, err = pc.WaitTask(context.Background(), upid, pve.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "netb's sshd after the reboot", func() bool { return exec("netb", "true").code == 0 }, func() string { return "" })
	if r := exec("netb", "sed -n '/^auto eth1/,/^$/p' /etc/network/interfaces; ip -4 -o addr show eth1 | awk '{print $4}'; systemctl is-system-running --wait >/dev/null; systemctl is-active networking"); r.stdout != "auto eth1\niface eth1 inet static\n\taddress 10.0.200.20/16\n\n10.0.200.20/16\nactive\n" {
		t.Errorf("after a new net1 and a reboot: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	if r := exec("neta", sshTo("10.0.200.20")); r.code != 0 || r.stdout != "netb\n" {
		t.Errorf("neta reaching netb at its static address: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
}

// ifaceInet is the inet address of the interface named name.
func ifaceInet(ifs []pve.Interface, name string) string {
	for _, i := range ifs {
		if i.Name == name {
			return i.Inet
		}
	}
	return ""
}
