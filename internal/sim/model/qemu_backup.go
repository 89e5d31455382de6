package model

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/pvesize"
)

// A VM's backup inside a vzdump job (pve-manager VZDump.pm
// exec_backup_task with qemu-server VZDump/QemuServer.pm): the same
// steps as a CT's (guestBackup) up to the mode; then the archive is a
// VM archive (qemu_vma.go) holding qemu-server.conf and each backed-up
// disk's data, read from the volume files. In snapshot mode a running
// VM with the guest agent has its filesystems frozen while the disks
// are read and thawed after, logged as qga_fs_freeze and qga_fs_thaw
// log it; stop mode shuts the VM down for the copy and starts it again.

// vmBackup is one VM's backup: guestBackup's job, name, log and
// registration, and what the VM's steps learn.
type vmBackup struct {
	*guestBackup
	q          *vmPower // the VM's lookups, flock and runtime, its stop and start
	devs       []vmaDevice
	config     string // qemu-server.conf as assemble writes it
	agent      string // the config's agent option
	wasRunning bool
	stoppedAt  time.Time // vmstoptime: when stop or suspend mode took the VM away
}

// vzdumpVM is exec_backup_task for VM vmid. Its error has been logged
// ("Backup of VM <vmid> failed - …") when it returns.
func (vz *vzdump) vzdumpVM(w *Worker, job vzdumpJob, vmid int, dumpdir string) error {
	b := &vmBackup{guestBackup: &guestBackup{c: w.c, w: w, job: job, vmid: vmid, dumpdir: dumpdir}, q: &w.c.vmPower}
	b.began = b.c.now()
	b.firstLine = len(w.logSnapshot())
	err := b.backup()
	err = b.finish(err)
	b.report(err)
	return err
}

// backup is the steps up to a registered archive.
func (b *vmBackup) backup() error {
	if err := b.inspect(); err != nil {
		return err
	}
	if err := b.name(); err != nil {
		return err
	}
	b.info("Starting Backup of VM %d (qemu)", b.vmid)
	b.info("Backup started at %s", b.began.Format("2006-01-02 15:04:05"))
	b.info("status = %s", map[bool]string{true: "running", false: "stopped"}[b.running])
	if err := b.lock(); err != nil {
		return err
	}
	b.mode = b.job.mode
	if !b.running {
		b.mode = "stop"
	}
	if b.mode == "snapshot" {
		if err := b.prepare(); err != nil {
			return err
		}
	}
	b.info("backup mode: %s", b.mode)
	b.info("ionice priority: 7")
	if b.mode != "snapshot" {
		if err := b.prepare(); err != nil {
			return err
		}
	}
	if err := b.w.Phase("vzdump", 0.05); err != nil {
		return err
	}
	if err := b.quiesce(); err != nil {
		return err
	}
	if err := b.assemble(); err != nil {
		return err
	}
	dst, size, err := b.archiveVMA()
	if err != nil {
		return err
	}
	return b.register(dst, size)
}

// inspect reads the VM's state and makes the backup-limit check.
func (b *vmBackup) inspect() error {
	return b.w.Do(func(st *State) error {
		vm, err := b.q.vmLocked(b.job.node, b.vmid)
		if err != nil {
			return Failf("unable to find VM '%d'\n", b.vmid)
		}
		b.running, b.wasRunning = vm.Running, vm.Running
		b.hostname = vm.Config["name"]
		if b.hostname == "" {
			b.hostname = fmt.Sprintf("VM %d", b.vmid) // generate_notes' guestname
		}
		if b.job.prune != nil && !b.job.remove || b.job.protect {
			return b.c.vzdumpCheckLimitLocked(b.job, b.vmid)
		}
		return nil
	})
}

// name sets the archive's name: vzdump-qemu-<vmid>-<time>.vma[.zst|.gz].
func (b *vmBackup) name() error {
	b.basename = fmt.Sprintf("vzdump-qemu-%d-%s", b.vmid, b.began.Format("2006_01_02-15_04_05"))
	b.ext = ".vma"
	switch b.job.compress {
	case "zstd":
		b.ext += ".zst"
	case "gzip":
		b.ext += ".gz"
	case "1", "lzo":
		return Failf("lzo compression is not implemented by this emulator - use zstd or gzip\n")
	}
	b.archive = b.basename + b.ext
	b.volid = b.job.storage + ":backup/" + b.archive
	return nil
}

// lock is lock_vm: set_lock 'backup' under the config flock.
func (b *vmBackup) lock() error {
	release, err := b.q.vmLocks.acquire(b.w.ctx, b.vmid, configLockTimeout)
	if err != nil {
		return err
	}
	defer release()
	if err := b.w.Do(func(st *State) error {
		vm, err := b.q.vmLocked(b.job.node, b.vmid)
		if err != nil {
			return err
		}
		if err := vmCheckLock(vm); err != nil {
			return err
		}
		vm.Config["lock"] = "backup"
		b.q.journal.markCore()
		return nil
	}); err != nil {
		return err
	}
	b.locked = true
	return nil
}

// prepare is the plugin's prepare: the VM's name, then each drive
// get_backup_volumes lists, included or excluded with its reason; the
// included ones become the archive's devices.
func (b *vmBackup) prepare() error {
	return b.w.Do(func(st *State) error {
		vm, err := b.q.vmLocked(b.job.node, b.vmid)
		if err != nil {
			return err
		}
		if n := vm.Config["name"]; n != "" {
			b.w.logLocked("INFO: VM Name: %s", n)
		}
		b.conf, b.agent, b.devs = maps.Clone(vm.Config), vm.Config["agent"], nil
		for _, k := range vmDriveKeys(vm.Config) {
			p, err := ParseProp(vm.Config[k], "file")
			if err != nil || p["media"] == "cdrom" || p["file"] == "none" || p["file"] == "cdrom" {
				continue
			}
			if v, ok := p["backup"]; ok && !isTrue(v) {
				b.w.logLocked("INFO: exclude disk '%s' '%s' (backup=no)", k, p["file"])
				continue
			}
			line := fmt.Sprintf("INFO: include disk '%s' '%s'", k, p["file"])
			if n, err := pvesize.Parse(p["size"]); err == nil && p["size"] != "" {
				line += " " + pvesize.Format(n)
			}
			b.w.logLocked("%s", line)
			v := st.Volumes[st.volKey(b.job.node, p["file"])]
			if v == nil {
				return Failf("cannot determine size of volume '%s' - volume '%s' does not exist\n", p["file"], p["file"])
			}
			sid, name, _ := ParseVolID(p["file"])
			b.devs = append(b.devs, vmaDevice{name: "drive-" + k, key: k, volid: p["file"], storage: sid, format: v.Format,
				path: b.c.storage.volumePath(b.job.node, sid, name), devSize: v.Size})
		}
		return nil
	})
}

// vmDriveKeys are conf's drive keys, sorted.
func vmDriveKeys(conf map[string]string) []string {
	var out []string
	for _, k := range slices.SortedFunc(maps.Keys(conf), vmDriveOrder) {
		if vmDriveRE.MatchString(k) {
			out = append(out, k)
		}
	}
	return out
}

// quiesce is the mode's step before the archive: stop mode shuts a
// running VM down (qm shutdown --skiplock, the restart due after the
// copy); suspend mode logs the suspend (the emulator does not pause a
// guest: docs/emulator.md); snapshot mode has nothing to do here.
func (b *vmBackup) quiesce() error {
	switch {
	case b.mode == "stop" && b.running:
		b.info("stopping virtual guest")
		b.stoppedAt = b.c.now()
		rt := b.q.vmRuntime()
		err := b.q.stopTask(b.w, b.job.node, b.vmid, func(vmid int) error {
			if rt.Shutdown(vmid, 10*time.Minute) != nil {
				return rt.Stop(vmid)
			}
			return nil
		})
		if err != nil {
			return err
		}
		b.restart = true
		b.running = false
	case b.mode == "suspend":
		b.info("suspending guest")
		b.stoppedAt = b.c.now()
	}
	return nil
}

// assemble writes qemu-server.conf as the plugin's assemble does: the
// config without lock, parent, unusedN and the pending section, then a
// #qmdump#map line per device.
func (b *vmBackup) assemble() error {
	var s strings.Builder
	conf := maps.Clone(b.conf)
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		if strings.HasPrefix(k, "unused") {
			b.info("skip unused drive '%s' (not included into backup)", conf[k])
			delete(conf, k)
		}
	}
	delete(conf, "lock")
	delete(conf, "parent")
	s.WriteString(vmConfigText(&VM{Config: conf}))
	for _, d := range b.devs {
		fmt.Fprintf(&s, "#qmdump#map:%s:%s:%s:%s:\n", d.key, d.name, d.storage, d.format)
	}
	pending := false
	b.w.Do(func(st *State) error {
		if vm := st.VMs[b.vmid]; vm != nil {
			pending = len(vm.Pending) > 0 || len(vm.PendingDelete) > 0
		}
		return nil
	})
	if pending {
		b.info("pending configuration changes found (not included into backup)")
	}
	b.config = s.String()
	for i := range b.devs {
		fi, err := os.Stat(b.devs[i].path)
		if err != nil {
			return Failf("cannot determine size of volume '%s' - %s\n", b.devs[i].volid, err)
		}
		b.devs[i].fileSize = fi.Size()
	}
	return nil
}

// guestNodeLocked is the node of guest vmid, CT or VM, as pmxcfs's
// vmlist answers it.
func guestNodeLocked(st *State, vmid int) (string, bool) {
	if g := st.Guests[vmid]; g != nil {
		return g.Node, true
	}
	if vm := st.VMs[vmid]; vm != nil {
		return vm.Node, true
	}
	return "", false
}

// poolGuestMembersLocked is get_resource_pool_guest_members: the pool's
// guests that exist.
func poolGuestMembersLocked(st *State, pool string) ([]int, error) {
	p := st.Access.Pools[pool]
	if p == nil {
		return nil, Failf("pool '%s' does not exist\n", pool)
	}
	var out []int
	for _, vmid := range p.VMs {
		if _, ok := guestNodeLocked(st, vmid); ok {
			out = append(out, vmid)
		}
	}
	return out, nil
}

// isVM reports whether vmid is a VM (vzdump's plugin choice).
func (vz *vzdump) isVM(vmid int) bool {
	vz.stateMu.RLock()
	defer vz.stateMu.RUnlock()
	return vz.state().VMs[vmid] != nil
}

// backupIsVM reports whether a backup volume's name is a VM's archive.
func backupIsVM(name string) bool {
	return strings.Contains(name, "vzdump-qemu-")
}

// vzdumpGuestType is the plugin's type (lxc, qemu): prune_backups keeps
// a guest's backups of its own type only.
func vzdumpGuestType(st *State, vmid int) string {
	if st.VMs[vmid] != nil {
		return "qemu"
	}
	return "lxc"
}
