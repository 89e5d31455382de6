package ui

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui/human"
)

// vmChangeJSON fills in what differs for a VM app's change: the settings
// of a new VM (not a container's), and the config edits as they are
// (sshkeys decoded to a count: the keys are long, not secret).
func vmChangeJSON(cj *ChangeJSON, c plan.Change) {
	if (c.Action == plan.Create || c.Action == plan.Replace) && c.Desired != nil {
		cj.Settings = vmSettings(c.Desired)
	}
	for i, e := range cj.Config {
		if e.Key == "sshkeys" {
			cj.Config[i].Old, cj.Config[i].New = keyCount(e.Old), keyCount(e.New)
		}
	}
	vmBackupReasons(cj, c)
}

// vmBackupReasons adds to an update's reasons how consistent the VM's
// backups become when its agent setting changes, and that a snapshot
// protects the change (snapshotBeforeChange). The reasons are copied
// first: they share their array with the plan's.
func vmBackupReasons(cj *ChangeJSON, c plan.Change) {
	if c.Action != plan.Update || c.Desired == nil {
		return
	}
	cj.Reasons = slices.Clone(cj.Reasons)
	if slices.ContainsFunc(c.Config, func(e plan.ConfigEdit) bool { return e.Key == "agent" }) {
		cj.Reasons = append(cj.Reasons, "backup: "+plan.VMBackupConsistency(c.Desired))
	}
	if c.Desired.SnapshotBeforeChange {
		cj.Reasons = append(cj.Reasons, plan.VMSnapshotNote)
	}
}

// vmSettings lists what a new VM is made with.
func vmSettings(a *plan.App) []SettingJSON {
	conf := plan.VMConfig(*a)
	v := a.VM
	out := []SettingJSON{
		{"image", v.Image},
		{"cores", conf["cores"]},
		{"memory", conf["memory"] + " MiB"},
		{"balloon", balloonText(v.BalloonMiB)},
		{"disk", human.Size(v.DiskSize) + " on " + v.DiskStorage},
		{"net0", conf["net0"]},
		{"ipconfig0", conf["ipconfig0"]},
		{"cloud-init user", v.User + " with " + keyCount(conf["sshkeys"])},
		{"agent", conf["agent"]},
		{"backup", plan.VMBackupConsistency(a)},
	}
	if a.SnapshotBeforeChange {
		out = append(out, SettingJSON{"snapshotBeforeChange", "a VM snapshot (no RAM state) before each in-place change, rolled back to if it fails"})
	}
	if conf["nameserver"] != "" {
		out = append(out, SettingJSON{"nameserver", conf["nameserver"]})
	}
	if conf["bios"] != "" {
		out = append(out, SettingJSON{"bios", conf["bios"] + " (machine " + conf["machine"] + ", EFI vars disk efidisk0 on " + v.DiskStorage + ")"})
	}
	if a.OnBoot {
		out = append(out, SettingJSON{"onboot", "1"})
	}
	return out
}

func balloonText(mib int) string {
	if mib == 0 {
		return "off"
	}
	return strconv.Itoa(mib) + " MiB"
}

// keyCount says how many keys an sshkeys value holds: its non-empty
// lines once unescaped (a key added in PVE's web UI may be escaped
// otherwise than corral escapes it, "%0a" or without a last newline).
func keyCount(encoded string) string {
	keys, err := url.PathUnescape(encoded)
	if err != nil {
		keys = strings.ReplaceAll(encoded, "%0A", "\n")
	}
	n := 0
	for line := range strings.SplitSeq(keys, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	if n == 1 {
		return "1 SSH key"
	}
	return fmt.Sprintf("%d SSH keys", n)
}

// guestSuffix names the guest of a change in the plan's text: " ct 105",
// or " vm 120" for a VM app's; "" without an id.
func guestSuffix(c ChangeJSON, id int) string {
	if c.Kind != plan.KindVM {
		return vmidSuffix(id)
	}
	if id == 0 {
		return " vm"
	}
	return fmt.Sprintf(" vm %d", id)
}
