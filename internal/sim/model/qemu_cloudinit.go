package model

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// VMCloudInit is what a VM's cloud-init drive carries (the model's
// side: internal/sim hands it to the QEMU runtime, sim/vmrun, which
// writes the NoCloud seed; the model imports no other part of the
// emulator).
type VMCloudInit struct {
	Hostname, User, Password string
	SSHKeys                  []string
	Nets                     []VMCloudNet
}

// VMCloudNet is one netN with its ipconfigN, named ethN as qemu-server
// names it in the seed's network-config.
type VMCloudNet struct {
	Name, MAC, IP, GW, IP6, GW6 string
}

// qemuNICModels are the netN models qemu-server knows; in a netN
// string the model's key carries the MAC address ("virtio=BC:24:…").
var qemuNICModels = map[string]bool{
	"virtio": true, "e1000": true, "e1000e": true, "rtl8139": true, "vmxnet3": true,
	"e1000-82540em": true, "e1000-82544gc": true, "e1000-82545em": true, "i82551": true, "i82557b": true, "i82559er": true, "ne2k_isa": true, "ne2k_pci": true, "pcnet": true,
}

// qemuCloudInit is what a VM's cloud-init drive carries, read from its
// config as qemu-server's PVE::QemuServer::Cloudinit does: the host name
// is the VM's name (else "VM<vmid>"), the keys are the URL-decoded
// sshkeys one per line, and each netN with an ipconfigN gives an entry
// named ethN keyed by netN's MAC. It is the base of the cloud-init drive
// the qemu API's start will generate.
func qemuCloudInit(vmid int, conf map[string]string) (VMCloudInit, error) {
	ci := VMCloudInit{Hostname: conf["name"], User: conf["ciuser"], Password: conf["cipassword"]}
	if ci.Hostname == "" {
		ci.Hostname = "VM" + strconv.Itoa(vmid)
	}
	if raw := conf["sshkeys"]; raw != "" {
		keys, err := url.PathUnescape(raw)
		if err != nil {
			return ci, fmt.Errorf("sshkeys: %w (PVE stores the keys URL-encoded)", err)
		}
		for line := range strings.SplitSeq(keys, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				ci.SSHKeys = append(ci.SSHKeys, line)
			}
		}
	}
	for i := range 32 {
		nic := conf["net"+strconv.Itoa(i)]
		if nic == "" {
			continue
		}
		n := VMCloudNet{Name: "eth" + strconv.Itoa(i)}
		props, err := ParseProp(nic, "model")
		if err != nil {
			return ci, fmt.Errorf("net%d: %w", i, err)
		}
		for k, v := range props {
			if qemuNICModels[k] || k == "macaddr" {
				n.MAC = v
			}
		}
		if ipc := conf["ipconfig"+strconv.Itoa(i)]; ipc != "" {
			props, err := ParseProp(ipc, "")
			if err != nil {
				return ci, fmt.Errorf("ipconfig%d: %w", i, err)
			}
			n.IP, n.GW, n.IP6, n.GW6 = props["ip"], props["gw"], props["ip6"], props["gw6"]
		}
		ci.Nets = append(ci.Nets, n)
	}
	return ci, nil
}
