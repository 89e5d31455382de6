package model

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
)

// A restore's volumes and config: restore_cleanup_oldconf,
// restore_allocate_devices, vma extract's writes, and
// restore_update_config_line over the backed-up config.

// vmRestoreDriveRE is restore_update_config_line's drive line.
var vmRestoreDriveRE = lazyre.New(`^((?:ide|scsi|virtio|sata|efidisk|tpmstate)\d+):\s*(\S+)\s*$`)

// restoreAllocate frees the disks of an overwritten VM that the archive
// brings back (the others become unused), then allocates each device.
func (q *vmRestorer) restoreAllocate(w *Worker, spec vmRestoreSpec, old map[string]string, devs []*vmRestoreDev) error {
	byKey := map[string]bool{}
	for _, d := range devs {
		byKey[d.virtdev] = true
	}
	err := w.Do(func(st *State) error {
		for _, k := range vmDriveKeys(old) {
			p, err := ParseProp(old[k], "file")
			// drive_is_cdrom($drive, 1): the cloud-init drive is a disk here.
			if err != nil || p["media"] == "cdrom" && !strings.Contains(p["file"], "cloudinit") || !byKey[k] {
				continue
			}
			if v := st.Volumes[st.volKey(spec.node, p["file"])]; v != nil && v.Owner == spec.vmid {
				if err := q.storage.freeVolumeLocked(spec.node, p["file"]); err != nil {
					w.logLocked("%s", strings.TrimRight(errText(err), "\n"))
				}
			}
		}
		for _, d := range devs {
			if err := q.restoreAllocOneLocked(w, spec, d); err != nil {
				return err
			}
		}
		q.journal.markCore()
		return nil
	})
	if err != nil {
		q.restoreFree(w, spec, devs)
	}
	return err
}

// restoreAllocOneLocked allocates device d (its size rounded up to KiB)
// and logs its volume and, for a disk, where vma writes it.
func (q *vmRestorer) restoreAllocOneLocked(w *Worker, spec vmRestoreSpec, d *vmRestoreDev) error {
	s, err := q.storage.storageCheckEnabledLocked(d.storage, spec.node)
	if err != nil {
		return err
	}
	d.format = vmRestoreFormat(s, d.format)
	name := ""
	switch {
	case d.cloudinit:
		name = fmt.Sprintf("vm-%d-cloudinit", spec.vmid)
		if s.DirLike() {
			name += "." + d.format
		}
	case s.DirLike() && d.format != "raw":
		name = fmt.Sprintf("vm-%d-disk-%d.%s", spec.vmid, q.storage.freeDiskNumberLocked(spec.node, d.storage, spec.vmid), d.format)
	}
	v, lines, err := q.storage.allocImageLocked(spec.node, s, spec.vmid, name, d.format, (d.size+kib-1)/kib*kib)
	if err != nil {
		return err
	}
	for _, l := range lines {
		w.logLocked("%s", l)
	}
	d.volid, d.path = v.VolID(), q.storage.volumePath(spec.node, d.storage, v.Name)
	w.logLocked("new volume ID is '%s'", d.volid)
	if !d.cloudinit {
		w.logLocked("map '%s' to '%s' (write zeros = 0)", d.devname, vmImageHostPath(s, spec.vmid, v.Name))
	}
	return nil
}

// restoreData writes the devices' data from the archive (the cloud-init
// drive is made empty: qemu-server regenerates it at start) and logs
// vma's totals.
func (q *vmRestorer) restoreData(w *Worker, spec vmRestoreSpec, devs []*vmRestoreDev) error {
	byName := map[string]*vmRestoreDev{}
	var total int64
	for _, d := range devs {
		if d.cloudinit {
			if err := vmWriteVolume(d.path, "", d.size); err != nil {
				return err
			}
			continue
		}
		byName[d.devname] = d
		total += d.size
	}
	var stored int64
	_, err := readVMArchive(spec.path, func(e vmaEntry, r io.Reader) error {
		d := byName[e.name]
		if d == nil {
			return nil
		}
		if err := os.RemoveAll(d.path); err != nil {
			return err
		}
		n, err := extractVMADevice(e, r, d.path)
		stored += n
		return err
	})
	if err != nil {
		return Failf("command 'vma extract' failed: %s\n", err)
	}
	w.Log("progress 100%% (read %d bytes, duration 0 sec)", total)
	sparse := total - stored
	w.Log("total bytes read %d, sparse bytes %d (%.3g%%)", total, sparse, float64(sparse)*100/float64(max(total, 1)))
	return nil
}

// restoreConfig writes the VM's config: the archive's, each line as
// restore_update_config_line makes it, the override options on top;
// volumes of the VM the config does not name become unusedN (rescan),
// and the VM joins the pool.
func (q *vmRestorer) restoreConfig(w *Worker, spec vmRestoreSpec, text string, devs []*vmRestoreDev) error {
	volOf := map[string]string{}
	for _, d := range devs {
		volOf[d.virtdev] = d.volid
	}
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString(vmRestoreLine(line, volOf, spec.unique))
	}
	conf := vmParseConfigText(b.String())
	maps.Copy(conf, spec.override)
	return w.Do(func(st *State) error {
		vm, err := q.vmLocked(spec.node, spec.vmid)
		if err != nil {
			return err
		}
		vm.Config, vm.Pending, vm.PendingDelete = conf, nil, nil
		q.restoreRescanLocked(vm)
		if spec.pool != "" {
			st.Access.addToPool(spec.vmid, spec.pool)
		}
		q.journal.markCore()
		return nil
	})
}

// restoreRescanLocked is rescan's update_disk_config: every image of
// the VM on its node that the config does not name becomes unusedN.
func (q *vmRestorer) restoreRescanLocked(vm *VM) {
	st := q.state()
	named := map[string]bool{}
	for k, v := range vm.Config {
		if vmDriveRE.MatchString(k) || strings.HasPrefix(k, "unused") {
			if p, err := ParseProp(v, "file"); err == nil {
				named[p["file"]] = true
			}
		}
	}
	var free []string
	for _, v := range st.Volumes {
		if v.Owner == vm.VMID && v.Content == "images" && st.volOn(v, vm.Node) && !named[v.VolID()] {
			free = append(free, v.VolID())
		}
	}
	slices.Sort(free)
	n := 0
	for _, volid := range free {
		for vm.Config[fmt.Sprintf("unused%d", n)] != "" {
			n++
		}
		vm.Config[fmt.Sprintf("unused%d", n)] = volid
	}
}

// vmRestoreLine is restore_update_config_line: hints, lock, unusedN and
// parent go; a drive gets its new volume (a backup=0 one is kept as a
// comment); vmgenid is always new; with unique the NICs' MACs and
// smbios1's uuid are new.
func vmRestoreLine(line string, volOf map[string]string, unique bool) string {
	for _, p := range []string{"#qmdump#", "#vzdump#", "lock:", "parent:"} {
		if strings.HasPrefix(line, p) {
			return ""
		}
	}
	key, value, _ := strings.Cut(line, ": ")
	switch {
	case strings.HasPrefix(key, "unused") && !strings.HasPrefix(line, "#"):
		return ""
	case vmNetKeyRE.MatchString(key) && unique:
		return key + ": " + vmNetNewMAC(value) + "\n"
	case vmRestoreDriveRE.MatchString(line):
		p, err := ParseProp(value, "file")
		switch {
		case err != nil:
		case p["backup"] != "" && !isTrue(p["backup"]):
			return "#" + line + "\n"
		case volOf[key] != "":
			delete(p, "format")
			p["file"] = volOf[key]
			return key + ": " + p.Print("file") + "\n"
		}
	case key == "vmgenid" && value != "0":
		return "vmgenid: " + vmUUID() + "\n"
	case key == "smbios1" && unique:
		if p, err := ParseProp(value, ""); err == nil {
			p["uuid"] = vmUUID()
			return "smbios1: " + p.Print("", "uuid") + "\n"
		}
	}
	return line + "\n"
}

// vmNetNewMAC gives a netN value a new random MAC (a unique restore, a
// clone).
func vmNetNewMAC(v string) string {
	p, err := ParseProp(v, "model")
	if err != nil {
		return v
	}
	for k := range p {
		if qemuNICModels[k] {
			delete(p, k)
			p["model"] = k
		}
	}
	return vmNetWithMAC(p.Print("", "model"))
}

// vmParseConfigText is parse_vm_config over a config's main section:
// leading '#' lines are the description, then "key: value" lines.
func vmParseConfigText(text string) map[string]string {
	conf := map[string]string{}
	var descr []string
	for line := range strings.SplitSeq(text, "\n") {
		switch {
		case strings.HasPrefix(line, "["):
			return vmWithDescription(conf, descr)
		case strings.HasPrefix(line, "#"):
			descr = append(descr, line[1:])
		default:
			if k, v, ok := strings.Cut(line, ":"); ok && k != "" {
				conf[k] = strings.TrimSpace(v)
			}
		}
	}
	return vmWithDescription(conf, descr)
}

func vmWithDescription(conf map[string]string, descr []string) map[string]string {
	if len(descr) > 0 {
		conf["description"] = strings.Join(descr, "\n")
	}
	return conf
}

// vmImageHostPath is PVE::Storage::path of a VM image on a PVE node:
// /dev/<vg>/<name> on LVM, <path>/images/<vmid>/<name> on a directory.
func vmImageHostPath(s *Storage, vmid int, name string) string {
	if s.LVMLike() {
		return "/dev/" + s.VGName + "/" + name
	}
	return fmt.Sprintf("%s/images/%d/%s", s.Path, vmid, name)
}
