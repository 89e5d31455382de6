package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
)

// qemu-server's option classes (API2/Qemu.pm): the privilege a key
// needs on /vms/<vmid> when a create or an update sets it.
var (
	vmCPUKeys     = vmKeySet("cores", "cpu", "runningcpu", "cpulimit", "cpuunits", "numa", "smp", "sockets", "vcpus")
	vmMemoryKeys  = vmKeySet("memory", "balloon", "shares", "allow-ksm")
	vmHWTypeKeys  = vmKeySet("acpi", "hotplug", "kvm", "machine", "runningmachine", "scsihw", "smbios1", "tablet", "vga", "watchdog", "audio0", "rng0")
	vmGeneralKeys = vmKeySet("agent", "autostart", "bios", "description", "keyboard", "localtime", "migrate_downtime", "migrate_speed", "name", "onboot", "ostype", "protection", "reboot", "startdate", "startup", "tdf", "template")
	vmDiskKeys    = vmKeySet("boot", "bootdisk", "vmstatestorage")
	vmCloudKeys   = vmKeySet("cicustom", "cipassword", "citype", "ciuser", "ciupgrade", "nameserver", "searchdomain", "sshkeys")
	// vmDriveRE is is_valid_drivename: the buses the emulator serves and
	// the EFI vars and TPM state disks, which are drives to qemu-server
	// (checked, allocated, backed up, snapshotted, cloned and moved as
	// the others) but never boot devices nor hot-plugged.
	vmDriveRE = lazyre.New(`^(?:(?:ide|sata|scsi|virtio)\d+|efidisk0|tpmstate0)$`)
	// vmBusDriveRE is a drive the guest sees on a bus
	// (valid_drive_names_for_boot): what may boot, what a runtime
	// attaches.
	vmBusDriveRE = lazyre.New(`^(ide|sata|scsi|virtio)\d+$`)
	vmSkipPerm   = lazyre.New(`^(?:unused|serial|usb|hostpci|virtiofs)\d+$`)
	vmNetKeyRE   = lazyre.New(`^net\d+$`)
	vmIPCfgRE    = lazyre.New(`^ipconfig\d+$`)
	vmNumaKeyRE  = lazyre.New(`^numa\d+$`)
)

func vmKeySet(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// vmCheckModifyPermLocked is check_vm_modify_config_perm: each key's
// class needs its privilege on /vms/<vmid>; drives, serial ports and
// tags are checked elsewhere, any other key only root may set.
func vmCheckModifyPermLocked(a *Access, auth Auth, vmid int, keys []string) error {
	if auth.IsRoot() {
		return nil
	}
	path := fmt.Sprintf("/vms/%d", vmid)
	for _, k := range slices.Sorted(slices.Values(keys)) {
		var privs []string
		anyOf := false
		switch {
		case vmDriveRE.MatchString(k), k == "cdrom", vmSkipPerm.MatchString(k), k == "tags":
			continue
		case vmCPUKeys[k], vmNumaKeyRE.MatchString(k):
			privs = []string{"VM.Config.CPU"}
		case vmMemoryKeys[k]:
			privs = []string{"VM.Config.Memory"}
		case vmHWTypeKeys[k]:
			privs = []string{"VM.Config.HWType"}
		case vmGeneralKeys[k]:
			privs = []string{"VM.Config.Options"}
		case k == "freeze":
			privs = []string{"VM.PowerMgmt"}
		case vmDiskKeys[k]:
			privs = []string{"VM.Config.Disk"}
		case vmNetKeyRE.MatchString(k):
			privs = []string{"VM.Config.Network"}
		case vmCloudKeys[k], vmIPCfgRE.MatchString(k):
			privs, anyOf = []string{"VM.Config.Cloudinit", "VM.Config.Network"}, true
		default:
			return Failf("only root can set '%s' config\n", k)
		}
		if err := a.Check(auth, path, privs, anyOf); err != nil {
			return err
		}
	}
	return nil
}

// vmAgentPrivs are the privileges of which one lets a caller run the
// agent command cmd (API2/Qemu/Agent.pm): PVE 9 split VM.Monitor into
// VM.GuestAgent.*, VM.GuestAgent.Unrestricted allowing every command;
// PVE 8 asks VM.Monitor.
func vmAgentPrivs(version, cmd string) []string {
	if strings.HasPrefix(version, "8") {
		return []string{"VM.Monitor"}
	}
	switch cmd {
	case "exec", "exec-status": // Agent.pm registers them with Unrestricted alone
		return []string{"VM.GuestAgent.Unrestricted"}
	case "fsfreeze-freeze", "fsfreeze-thaw":
		return []string{"VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.Unrestricted"}
	case "fsfreeze-status":
		return []string{"VM.GuestAgent.Audit", "VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.Unrestricted"}
	}
	return []string{"VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"}
}
