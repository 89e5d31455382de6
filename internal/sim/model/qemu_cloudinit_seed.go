package model

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// The NoCloud seed's files as qemu-server's Cloudinit.pm writes them:
// what the real runtime puts on the cloud-init drive (sim/vmrun's
// WriteSeed) and what GET .../cloudinit/dump answers, from one place.

// UserData is the #cloud-config PVE writes (cloudinit_userdata).
// package_upgrade is false: the emulator's guests reach no mirror
// (docs/emulator.md).
func (ci VMCloudInit) UserData() string { return ci.userData(false) }

// userData is UserData with the password shown as "**********" when
// mask is set, as the dump shows it to a caller without
// VM.Config.Cloudinit.
func (ci VMCloudInit) userData(mask bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#cloud-config\nhostname: %s\nmanage_etc_hosts: true\nfqdn: %s\n", ci.Hostname, ci.Hostname)
	if ci.User != "" {
		fmt.Fprintf(&b, "user: %s\n", ci.User)
	}
	if ci.Password != "" {
		pw := ci.Password
		if mask {
			pw = vmHiddenPassword
		}
		fmt.Fprintf(&b, "password: %s\n", pw)
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

// NetworkConfig is the version 1 network configuration PVE writes
// (nocloud_network).
func (ci VMCloudInit) NetworkConfig() string {
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

// MetaData is nocloud_gen_metadata: the instance-id is the SHA-1 of
// the user data and the network config (the password unmasked), so a
// changed drive makes a new instance and cloud-init runs again.
func (ci VMCloudInit) MetaData() string {
	sum := sha1.Sum([]byte(ci.UserData() + ci.NetworkConfig()))
	return "instance-id: " + hex.EncodeToString(sum[:]) + "\n"
}
