package guest

import (
	"os"
	"path/filepath"

	"github.com/corralhq/corral/internal/sim/model"
)

// ifupdown in a real-template CT. At create and at each start the
// emulator writes /etc/network/interfaces as pve-container does
// (model.GuestPreStart), but it is the emulator that puts the addresses
// on the CT's interfaces (bridgeNet.attach; no DHCP server runs on the
// bridge, and the template has no DHCP client), so ifupdown's
// networking.service would fail on them ("RTNETLINK answers: File
// exists", "No DHCP client software found!") and leave systemd
// "degraded". A drop-in, written at each start of a CT whose system has
// networking.service, lets ifup's errors pass: the stanzas stay PVE's,
// the unit is active, and the addresses are the emulator's.

const ifupdownDropIn = "etc/systemd/system/networking.service.d/00corral-sim.conf"

const ifupdownDropInText = `# Written by corral's PVE emulator at each start of this CT: the emulator
# configures the CT's interfaces itself, so ifup's errors on them are not
# failures of this unit.
[Service]
ExecStart=
ExecStart=-/sbin/ifup -a --read-environment
ExecStart=-/bin/sh -c 'if [ -f /run/network/restart-hotplug ]; then /sbin/ifup -a --read-environment --allow=hotplug; fi'
ExecStop=
ExecStop=-/sbin/ifdown -a --read-environment --exclude=lo
`

// setIfupdownDropIn writes the drop-in into root when its system has
// ifupdown's networking.service.
func setIfupdownDropIn(root string) error {
	if !hasOwnSystem(root) {
		return nil
	}
	found := false
	for _, p := range []string{"usr/lib/systemd/system/networking.service", "lib/systemd/system/networking.service"} {
		if fi, err := os.Stat(filepath.Join(root, p)); err == nil && fi.Mode().IsRegular() {
			found = true
		}
	}
	if !found {
		return nil
	}
	return writeCTFile(root, ifupdownDropIn, ifupdownDropInText)
}

// writeCTFile is model.WriteCTFile: it never follows a link the CT's
// users made.
func writeCTFile(root, rel, text string) error { return model.WriteCTFile(root, rel, text) }
