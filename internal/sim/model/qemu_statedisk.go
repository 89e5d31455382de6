package model

import (
	"fmt"
)

// The EFI vars disk (efidisk0) and the TPM state disk (tpmstate0):
// drives to qemu-server (Drive.pm), checked, backed up, snapshotted,
// cloned, moved and migrated as the others, but with a size of their
// own (create_disks ignores the GiB asked for), never a boot device and
// never hot-plugged.

// OVMF's vars templates as pve-edk2-firmware ships them: the legacy
// 2 MiB image's vars (efitype=2m, the default) and the 4 MiB image's
// (efitype=4m); create_efidisk allocates a volume of their size and
// copies the template into it.
const (
	vmEFIVars2M = 128 << 10
	vmEFIVars4M = 528 << 10
	// vmTPMStateSize is Drive.pm's TPMSTATE_DISK_SIZE.
	vmTPMStateSize = 4 * mib
)

// vmStateDisk reports whether key is efidisk0 or tpmstate0.
func vmStateDisk(key string) bool { return key == "efidisk0" || key == "tpmstate0" }

// vmStateDiskSize is the size create_disks allocates for a new
// efidisk0 (get_efivars_size: the vars template's) or tpmstate0 (4 MiB),
// and what the storage makes of it: an LV takes whole 4 MiB extents, an
// RBD image whole MiB (rbd create --size is in MiB, rounded up), a file
// the size itself.
func vmStateDiskSize(s *Storage, key string, props PropString) int64 {
	size := int64(vmTPMStateSize)
	if key == "efidisk0" {
		size = vmEFIVars2M
		if props["efitype"] == "4m" {
			size = vmEFIVars4M
		}
	}
	switch s.Type {
	case "lvmthin":
		return roundUp(size, 4*mib)
	case "rbd":
		return roundUp(size, mib)
	}
	return size
}

// vmStateDiskAllocated is what create_disks adds to a new efidisk0's
// options: with pre-enrolled-keys on the 4 MiB image, whose Microsoft
// template (OVMF_VARS_4M.ms.fd) carries the 2023 UEFI CAs,
// create_efidisk marks ms-cert=2023k.
func vmStateDiskAllocated(key string, props PropString) {
	if key == "efidisk0" && props["efitype"] == "4m" && isTrue(props["pre-enrolled-keys"]) {
		props["ms-cert"] = "2023k"
	}
}

// vmCheckStateDiskImport is check_drive_param's rule for an import
// into efidisk0 or tpmstate0: what the imported data is must be said,
// since it cannot be read from it.
func vmCheckStateDiskImport(key string, props PropString) error {
	var need []string
	switch key {
	case "efidisk0":
		need = []string{"efitype", "pre-enrolled-keys"}
	case "tpmstate0":
		need = []string{"version"}
	}
	for _, k := range need {
		if _, ok := props[k]; !ok {
			return ParamError(map[string]string{key: fmt.Sprintf("need to specify '%s' when using 'import-from'", k)})
		}
	}
	return nil
}

// vmCheckTPMVersion is update_vm_api's prohibit_tpm_version_change: the
// TPM of an existing state volume keeps its version (v1.2 unless set).
func vmCheckTPMVersion(old, new string) error {
	o, err1 := ParseProp(old, "file")
	n, err2 := ParseProp(new, "file")
	if err1 != nil || err2 != nil || o["file"] != n["file"] {
		return nil
	}
	version := func(p PropString) string {
		if v := p["version"]; v != "" {
			return v
		}
		return "v1.2"
	}
	if version(o) != version(n) {
		return Failf("cannot change TPM state version after creation\n")
	}
	return nil
}

// vmFirmwareWarning is the warning vm_start gives about the EFI vars
// ("" for none) and the lines it prints after it: OVMF without an
// efidisk0 boots with temporary vars (print_ovmf_commandline), and an
// efidisk0 with pre-enrolled keys but without the 2023 certificates is
// told to enroll them (check_efi_vars). A template is not checked.
func vmFirmwareWarning(vmid int, conf map[string]string) (string, []string) {
	if conf["bios"] != "ovmf" || isTrue(conf["template"]) {
		return "", nil
	}
	if conf["efidisk0"] == "" {
		return "no efidisk configured! Using temporary efivars disk.", nil
	}
	p, err := ParseProp(conf["efidisk0"], "file")
	if err != nil || !isTrue(p["pre-enrolled-keys"]) || p["ms-cert"] == "2023k" {
		return "", nil
	}
	return "EFI disk without 'ms-cert=2023k' option, suggesting that not all UEFI 2023\ncertificates from Microsoft are enrolled yet.", []string{
		"The UEFI 2011 certificates expire in June 2026! The new certificates are required",
		"for secure boot update for Windows and common Linux distributions.",
		"Use 'Disk Action > Enroll Updated Certificates' in the UI or, while the VM is",
		fmt.Sprintf("shut down, run 'qm enroll-efi-keys %d' to enroll the new certificates.", vmid),
		"",
		"For Windows with BitLocker, run the following command inside Powershell:",
		"  manage-bde -protectors -disable <drive>",
		"for each drive with BitLocker (for example, <drive> could be 'C:').",
		"This is required for each drive with BitLocker before proceeding with enrollment.",
		"Otherwise, you will be prompted for the BitLocker recovery key on the next boot.",
	}
}

// vmCPU32Bit are CPUConfig's 32-bit CPU models ($cputypes_32bit).
var vmCPU32Bit = vmKeySet("486", "pentium", "pentium2", "pentium3", "coreduo", "athlon", "kvm32", "qemu32")

// vmCheckFirmware is config_to_command's refusal of OVMF on a 32-bit
// CPU model (get_cpu_bitness; the default model, x86-64-v2-AES, is
// 64-bit), which fails the start.
func vmCheckFirmware(conf map[string]string) error {
	if conf["bios"] != "ovmf" || conf["cpu"] == "" {
		return nil
	}
	if p, err := ParseProp(conf["cpu"], "cputype"); err == nil && vmCPU32Bit[p["cputype"]] {
		return Failf("OVMF (UEFI) BIOS is not supported on 32-bit CPU types\n")
	}
	return nil
}
