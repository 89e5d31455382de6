package ui

import (
	"fmt"
	"strconv"

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
	}
	if conf["nameserver"] != "" {
		out = append(out, SettingJSON{"nameserver", conf["nameserver"]})
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

// keyCount says how many keys an sshkeys value holds.
func keyCount(encoded string) string {
	n := 0
	for i := 0; i+3 <= len(encoded); i++ {
		if encoded[i:i+3] == "%0A" {
			n++
		}
	}
	if encoded != "" && n == 0 {
		n = 1
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
