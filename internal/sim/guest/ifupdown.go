package guest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// writeCTFile writes text to rel inside the CT's root as a 0644 file,
// making missing directories, each owned as its parent directory (so an
// unprivileged CT's root, whose ids are shifted on disk, owns them). It
// never follows a link the CT's users may have made: a symlink among
// rel's directories is an error, one at rel itself is replaced.
func writeCTFile(root, rel, text string) error {
	dir := root
	for _, part := range strings.Split(filepath.Dir(filepath.Clean(rel)), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		if errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			chownAs(dir, parent)
			continue
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s in the CT is not a directory (a link?): not writing %s", strings.TrimPrefix(dir, root), rel)
		}
	}
	p := filepath.Join(root, rel)
	if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	chownAs(p, filepath.Dir(p))
	return nil
}

// chownAs gives p the owner of ref.
func chownAs(p, ref string) {
	if fi, err := os.Lstat(ref); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			os.Lchown(p, int(st.Uid), int(st.Gid))
		}
	}
}
