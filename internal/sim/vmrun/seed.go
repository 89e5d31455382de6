package vmrun

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CloudInit is what PVE's cloud-init drive carries (qemu-server's
// PVE::QemuServer::Cloudinit, NoCloud format): the VM's name as its
// host name, the user, its password (PVE stores it hashed), the SSH
// keys (decoded from the config's URL encoding) and one network entry
// per ipconfigN.
type CloudInit struct {
	Hostname string
	User     string
	Password string
	SSHKeys  []string
	Nets     []CloudNet
}

// CloudNet is one ipconfigN with its netN's MAC address.
type CloudNet struct {
	Name     string // eth0 for net0
	MAC      string
	IP, GW   string // "dhcp" or an address/prefix; "" for none
	IP6, GW6 string
}

// userData is the #cloud-config PVE writes. package_upgrade is false:
// the emulator's guests reach no mirror (docs/emulator.md).
func (ci CloudInit) userData() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#cloud-config\nhostname: %s\nmanage_etc_hosts: true\nfqdn: %s\n", ci.Hostname, ci.Hostname)
	if ci.User != "" {
		fmt.Fprintf(&b, "user: %s\n", ci.User)
	}
	if ci.Password != "" {
		fmt.Fprintf(&b, "password: %s\n", ci.Password)
	}
	if len(ci.SSHKeys) > 0 {
		b.WriteString("ssh_authorized_keys:\n")
		for _, k := range ci.SSHKeys {
			fmt.Fprintf(&b, "  - %s\n", k)
		}
	}
	b.WriteString("chpasswd:\n  expire: False\nusers:\n  - default\npackage_upgrade: false\n")
	return b.String()
}

// networkConfig is the version 1 network configuration PVE writes.
func (ci CloudInit) networkConfig() string {
	var b strings.Builder
	b.WriteString("version: 1\nconfig:\n")
	for _, n := range ci.Nets {
		fmt.Fprintf(&b, "    - type: physical\n      name: %s\n      mac_address: '%s'\n", n.Name, strings.ToLower(n.MAC))
		if n.IP == "" && n.IP6 == "" {
			continue
		}
		b.WriteString("      subnets:\n")
		switch n.IP {
		case "":
		case "dhcp":
			b.WriteString("      - type: dhcp4\n")
		default:
			fmt.Fprintf(&b, "      - type: static\n        address: '%s'\n", n.IP)
			if n.GW != "" {
				fmt.Fprintf(&b, "        gateway: '%s'\n", n.GW)
			}
		}
		switch n.IP6 {
		case "":
		case "dhcp":
			b.WriteString("      - type: dhcp6\n")
		case "auto":
			b.WriteString("      - type: ipv6_slaac\n")
		default:
			fmt.Fprintf(&b, "      - type: static6\n        address: '%s'\n", n.IP6)
			if n.GW6 != "" {
				fmt.Fprintf(&b, "        gateway: '%s'\n", n.GW6)
			}
		}
	}
	return b.String()
}

// WriteSeed writes ci as a NoCloud seed: an ISO 9660 image with volume
// id cidata holding user-data, meta-data (its instance-id the digest of
// the data, as PVE's, so a changed drive reruns cloud-init) and
// network-config.
func WriteSeed(ctx context.Context, ci CloudInit, iso string) error {
	dir, err := os.MkdirTemp(filepath.Dir(iso), ".seed-")
	if err != nil {
		return fmt.Errorf("cloud-init drive: %w", err)
	}
	defer os.RemoveAll(dir)
	user, netw := ci.userData(), ci.networkConfig()
	sum := sha1.Sum([]byte(user + netw))
	files := map[string]string{
		"user-data":      user,
		"network-config": netw,
		"meta-data":      "instance-id: " + hex.EncodeToString(sum[:]) + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return fmt.Errorf("cloud-init drive: %w", err)
		}
	}
	tool, err := exec.LookPath("genisoimage")
	if err != nil {
		if tool, err = exec.LookPath("xorrisofs"); err != nil {
			return fmt.Errorf("cloud-init drive: genisoimage not found: install Debian's genisoimage (apt-get install genisoimage), as root")
		}
	}
	out, err := exec.CommandContext(ctx, tool, "-quiet", "-output", iso, "-volid", "cidata", "-joliet", "-rock", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cloud-init drive: %s: %w: %s", filepath.Base(tool), err, out)
	}
	return nil
}
