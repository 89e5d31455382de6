package model

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
)

// The qmrestore task (create_vm's restorefn, restore_vma_archive).

// vmRestoreDev is one volume a restore makes: a disk of the archive
// (devname set) or the cloud-init drive.
type vmRestoreDev struct {
	virtdev, devname string
	storage, format  string
	size             int64
	cloudinit        bool
	volid, path      string // once allocated
	fileSize         int64
}

// vmQmdumpMapRE is a #qmdump#map hint: virtdev, devname, storage, format.
var vmQmdumpMapRE = lazyre.New(`^#qmdump#map:(\S+):(\S+):(\S*):(\S*):$`)

// vmHintDriveRE are the drive keys parse_backup_hints looks at for a
// cloud-init drive.
var vmHintDriveRE = lazyre.New(`^(?:ide|sata|scsi)\d+$`)

// restoreTask runs the restore under the VM's config flock; a failure
// leaves the VM's config unlocked, as PVE's does ("state is NOT cleaned
// up"). With start the VM boots after.
func (q *vmRestorer) restoreTask(w *Worker, spec vmRestoreSpec) error {
	emsg := fmt.Sprintf("unable to restore VM %d -", spec.vmid)
	restored, err := q.restoreLocked(w, spec, emsg)
	if err != nil {
		w.cleanup(func(st *State) {
			if vm := st.VMs[spec.vmid]; vm != nil && vm.Config["lock"] == "create" {
				delete(vm.Config, "lock")
				q.journal.markCore()
			}
		})
		if restored {
			w.Warn("error after data was restored, VM disks should be OK but config may require adaptions. VM %d state is NOT cleaned up.", spec.vmid)
		} else {
			w.Warn("error before or during data restore, some or all disks were not completely restored. VM %d state is NOT cleaned up.", spec.vmid)
		}
		return err
	}
	if spec.start {
		return q.power.startTask(w, spec.node, spec.vmid)
	}
	return nil
}

// restoreLocked is the restore inside lock_config_full: the checks of
// the VM (protection, running), the archive's config and devices, the
// volumes, their data, then the config. It reports whether the data was
// restored.
func (q *vmRestorer) restoreLocked(w *Worker, spec vmRestoreSpec, emsg string) (bool, error) {
	release, err := q.vmLocks.acquire(w.ctx, spec.vmid, configLockTimeout)
	if err != nil {
		return false, err
	}
	defer release()
	var old map[string]string
	err = w.Do(func(st *State) error {
		vm, err := q.vmLocked(spec.node, spec.vmid)
		if err != nil {
			return err
		}
		if isTrue(vm.Config["protection"]) {
			return Failf("%s - protection mode enabled\n", emsg)
		}
		if vm.Running {
			return Failf("%s vm is running\n", emsg)
		}
		old = maps.Clone(vm.Config)
		return nil
	})
	if err != nil {
		return false, err
	}
	if spec.live {
		return false, Failf("live-restore is only compatible with backup images from a Proxmox Backup Server\n")
	}
	w.Log("restore vma archive: %s", vmaRestoreCommand(spec.hostPath, w))
	text, devs, err := q.restoreReadArchive(w, spec)
	if err != nil {
		return false, err
	}

	if err := q.restoreAllocate(w, spec, old, devs); err != nil {
		return false, err
	}
	if err := q.restoreData(w, spec, devs); err != nil {
		q.restoreFree(w, spec, devs)
		return false, err
	}
	return true, q.restoreConfig(w, spec, text, devs)
}

// vmaRestoreCommand is the pipe restore_vma_archive logs.
func vmaRestoreCommand(archive string, w *Worker) string {
	tmp := fmt.Sprintf("/var/tmp/vzdumptmp%d", 100000+len(w.t.UPID))
	cmd := ""
	switch {
	case strings.HasSuffix(archive, ".zst"):
		cmd = "zstd -q -d -c " + archive + " | "
	case strings.HasSuffix(archive, ".gz"):
		cmd = "zcat " + archive + " | "
	}
	src := "-"
	if cmd == "" {
		src = archive
	}
	return fmt.Sprintf("%svma extract -v -r %s.fifo %s %s", cmd, tmp, src, tmp)
}

// restoreReadArchive reads the archive's config and devices, logging
// what vma extract prints of its header, and parse_backup_hints' devices
// with their target storage (checked: images content, the caller's
// Datastore.AllocateSpace).
func (q *vmRestorer) restoreReadArchive(w *Worker, spec vmRestoreSpec) (string, []*vmRestoreDev, error) {
	sizes := map[string]vmaEntry{}
	var names []string
	text, err := readVMArchive(spec.path, func(e vmaEntry, _ io.Reader) error {
		sizes[e.name] = e
		names = append(names, e.name)
		return nil
	})
	if err != nil {
		return "", nil, Failf("%s\n", err)
	}
	w.Log("CFG: size: %d name: qemu-server.conf", len(text))
	for i, n := range names {
		w.Log("DEV: dev_id=%d size: %d devname: %s", i+1, sizes[n].devSize, n)
	}
	w.Log("CTIME: %s", q.clock().Format("Mon Jan _2 15:04:05 2006"))
	// check_restore_permissions on the backed-up config merged with the
	// options comes first, then parse_backup_hints' storage checks.
	merged := vmParseConfigText(text)
	maps.Copy(merged, spec.override)
	var devs []*vmRestoreDev
	err = w.Do(func(st *State) error {
		if err := q.restoreBridgesLocked(spec.auth, merged); err != nil {
			return err
		}
		for line := range strings.SplitSeq(text, "\n") {
			d, err := q.restoreHintLocked(spec, line, sizes)
			if err != nil {
				return err
			}
			if d != nil {
				devs = append(devs, d)
			}
		}
		return nil
	})
	slices.SortFunc(devs, func(a, b *vmRestoreDev) int { return strings.Compare(a.virtdev, b.virtdev) })
	return text, devs, err
}

// restoreHintLocked is parse_backup_hints for one config line: a
// #qmdump#map device or a cloud-init drive (nil for any other line).
func (q *vmRestorer) restoreHintLocked(spec vmRestoreSpec, line string, sizes map[string]vmaEntry) (*vmRestoreDev, error) {
	var d *vmRestoreDev
	if m := vmQmdumpMapRE.FindStringSubmatch(line); m != nil {
		e, ok := sizes[m[2]]
		if !ok {
			return nil, Failf("archive does not contain data for drive '%s'\n", m[1])
		}
		d = &vmRestoreDev{virtdev: m[1], devname: m[2], storage: m[3], format: m[4], size: e.devSize, fileSize: e.fileSize}
		if d.storage == "" {
			d.storage = "local"
		}
	} else if k, v, ok := strings.Cut(line, ": "); ok && vmHintDriveRE.MatchString(k) {
		p, err := ParseProp(v, "file")
		sid, name, _ := ParseVolID(p["file"])
		if err != nil || !strings.Contains(name, "cloudinit") {
			return nil, nil
		}
		d = &vmRestoreDev{virtdev: k, storage: sid, format: "raw", size: 4 * mib, cloudinit: true}
		if strings.HasSuffix(name, ".qcow2") {
			d.format = "qcow2"
		}
	} else {
		return nil, nil
	}
	if spec.storage != "" {
		d.storage = spec.storage
	}
	if d.format == "" {
		d.format = "raw"
	}
	s := q.state().storage(d.storage)
	if s == nil {
		return nil, Failf("storage '%s' does not exist\n", d.storage)
	}
	if !s.HasContent("images") {
		return nil, Failf("Content type 'images' is not available on storage '%s'\n", d.storage)
	}
	if !spec.auth.IsRoot() {
		if err := q.state().Access.Check(spec.auth, "/storage/"+d.storage, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// restoreFree is restore_destroy_volumes: the volumes made so far go.
func (q *vmRestorer) restoreFree(w *Worker, spec vmRestoreSpec, devs []*vmRestoreDev) {
	w.cleanup(func(st *State) {
		for _, d := range devs {
			if d.volid == "" {
				continue
			}
			if err := q.storage.freeVolumeLocked(spec.node, d.volid); err != nil {
				w.logLocked("unable to cleanup '%s' - %s", d.volid, strings.TrimRight(errText(err), "\n"))
				continue
			}
			w.logLocked("temporary volume '%s' successfully removed", d.volid)
		}
	})
}

// vmRestoreFormat is resolve_format_hint: LVM storages hold raw only,
// a directory storage the formats qemu-server can restore into.
func vmRestoreFormat(s *Storage, format string) string {
	if s.LVMLike() || (format != "raw" && format != "qcow2" && format != "vmdk") {
		return "raw"
	}
	return format
}
