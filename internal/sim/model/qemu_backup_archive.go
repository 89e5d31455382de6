package model

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// The archive step of a VM's backup (VZDump/QemuServer.pm archive_vma):
// the guest agent's freeze around the start of the copy, the copy, the
// thaw, and the lines PVE's backup status loop prints.

// archiveVMA writes the archive and logs what archive_vma logs. The
// filesystems stay frozen for the whole copy: the emulator has no
// copy-before-write backup job that would let the guest go on at once,
// so the thaw is logged (and done) when the data is read.
func (b *vmBackup) archiveVMA() (string, int64, error) {
	b.info("creating vzdump archive '%s'", b.dumpdir+"/"+b.archive)
	dst := b.c.storage.volumePath(b.job.node, b.job.storage, "backup/"+b.archive)
	frozen := false
	if len(b.devs) == 0 {
		b.info("backup contains no disks")
		b.info("starting diskless backup")
		b.info("/usr/bin/vma create -v -c %s/qemu-server.conf exec:%s > %s", b.dumpdir+"/"+b.basename+".tmp", vmaCompressor(b.job.compress), b.dumpdir+"/"+b.archive+".dat")
	} else {
		if !b.running {
			b.info("starting kvm to execute backup task")
		}
		frozen = b.qgaFreeze()
		b.info("starting backup via QMP command")
	}
	start := time.Now()
	st, err := writeVMArchive(dst, b.config, b.devs, b.job.compress)
	if frozen {
		b.qgaThaw()
	}
	if err != nil {
		os.Remove(dst)
		return "", 0, fmt.Errorf("backup archive: %w", err)
	}
	if len(b.devs) > 0 {
		b.info("started backup task '%s'", vmUUID())
		if err := b.resumeAfterJobStart(); err != nil {
			os.Remove(dst)
			return "", 0, err
		}
		b.logStatus(st, time.Since(start))
		if !b.wasRunning {
			b.info("stopping kvm after backup task")
		}
	}
	if err := b.w.Phase("vzdump", 0.85); err != nil {
		os.Remove(dst)
		return "", 0, err
	}
	b.info("archive file size: %s", vzdumpFormatSize(st.size))
	return dst, st.size, nil
}

// vmaCompressor is the compressor command vzdump pipes vma into.
func vmaCompressor(compress string) string {
	switch compress {
	case "zstd":
		return "zstd --threads=1"
	case "gzip":
		return "gzip"
	}
	return "cat"
}

// qgaFreeze is qga_fs_freeze: only for a VM that ran before the backup,
// outside stop mode; guest_fs_freeze_applicable's checks (the agent's
// freeze-fs option, a ping, the freeze status) each log why they skip.
// It reports whether a thaw is due (also after a failed freeze).
func (b *vmBackup) qgaFreeze() bool {
	if b.mode == "stop" || !b.wasRunning {
		return false
	}
	if !vmShouldFreeze(b.agent) {
		b.info("skipping guest filesystem freeze - disabled in VM options")
		return false
	}
	rt := b.q.vmRuntime()
	if _, err := rt.Agent(b.vmid, "ping"); err != nil {
		b.info("skipping guest filesystem freeze - agent configured but not running?")
		return false
	}
	status, err := rt.Agent(b.vmid, "fsfreeze-status")
	if err != nil {
		b.w.Log("WARN: unable to check guest fs freeze status - %s", strings.TrimRight(errText(err), "\n"))
	}
	if status == "frozen" {
		b.info("skipping guest filesystem freeze - already frozen")
		return false
	}
	b.info("issuing guest-agent 'fs-freeze' command")
	if _, err := rt.Agent(b.vmid, "fsfreeze-freeze"); err != nil {
		b.w.Log("ERROR: unable to freeze guest fs - %s", strings.TrimRight(errText(err), "\n"))
	}
	return true
}

// qgaThaw is qga_fs_thaw: a failure is logged, the backup goes on.
func (b *vmBackup) qgaThaw() {
	b.info("issuing guest-agent 'fs-thaw' command")
	if _, err := b.q.vmRuntime().Agent(b.vmid, "fsfreeze-thaw"); err != nil {
		b.w.Log("ERROR: %s", strings.TrimRight(errText(err), "\n"))
	}
}

// vmShouldFreeze is should_fs_freeze: the agent enabled and its
// freeze-fs option (alias freeze-fs-on-backup, guest-fsfreeze) not 0.
func vmShouldFreeze(agent string) bool {
	p, err := ParseProp(agent, "enabled")
	if err != nil || !isTrue(p["enabled"]) {
		return false
	}
	for _, k := range []string{"freeze-fs", "freeze-fs-on-backup", "guest-fsfreeze"} {
		if v, ok := p[k]; ok {
			return isTrue(v)
		}
	}
	return true
}

// resumeAfterJobStart is resume_vm_after_job_start for a VM that ran:
// stop mode starts the VM it shut down (qm start), the other modes let
// it go on; the line says how long it was away.
func (b *vmBackup) resumeAfterJobStart() error {
	if !b.wasRunning {
		return nil
	}
	if b.restart {
		if err := b.q.startTask(b.w, b.job.node, b.vmid); err != nil {
			return err
		}
		b.restart, b.running = false, true
	}
	if !b.stoppedAt.IsZero() {
		b.info("resuming VM again after %d seconds", int(b.c.now().Sub(b.stoppedAt).Seconds()))
		b.stoppedAt = time.Time{}
		return nil
	}
	b.info("resuming VM again")
	return nil
}

// logStatus logs the backup status loop's last line and its summary.
func (b *vmBackup) logStatus(st vmaStats, took time.Duration) {
	secs := int64(took.Seconds())
	delta := float64(max(secs, 1))
	b.info("%3d%% (%s of %s) in %s, read: %s, write: %s", 100, renderBytes(float64(st.total), 1), renderBytes(float64(st.total), 1),
		renderDuration(secs), renderRate(float64(st.total), delta), renderRate(float64(st.total-st.zero), delta))
	if st.zero > 0 {
		b.info("backup is sparse: %s (%d%%) total zero data", renderBytes(float64(st.zero), 2), st.zero*100/max(st.total, 1))
	}
	if secs > 0 {
		b.info("transferred %s in %d seconds (%s)", renderBytes(float64(st.total), 2), secs, renderRate(float64(st.total), delta))
	} else {
		b.info("transferred %s in <1 seconds", renderBytes(float64(st.total), 2))
	}
}

// finish is exec_backup_task's clean-up for a VM: the unlock, the
// restart of a VM stop mode left stopped, and the last phase.
func (b *vmBackup) finish(err error) error {
	if b.locked {
		b.w.cleanup(func(st *State) {
			if vm := st.VMs[b.vmid]; vm != nil && vm.Config["lock"] == "backup" {
				delete(vm.Config, "lock")
				b.q.journal.markCore()
			}
		})
	}
	if b.mode == "suspend" {
		// cleanup->{resume}: qm resume of the guest suspend mode paused
		// (the emulator never paused it).
		b.info("resume vm")
	}
	if b.restart {
		b.info("restarting vm")
		if serr := b.q.startTask(b.w, b.job.node, b.vmid); serr != nil {
			b.w.Log("%s", strings.TrimRight(errText(serr), "\n"))
		} else if !b.stoppedAt.IsZero() {
			b.info("guest is online again after %d seconds", int(b.c.now().Sub(b.stoppedAt).Seconds()))
		}
	}
	if err == nil {
		err = b.w.Phase("vzdump", 1-0.05-0.85)
	}
	return err
}

// renderBytes is PVE::Format render_bytes.
func renderBytes(v float64, precision int) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	u := 0
	if v > 1023 {
		u = min(int(math.Log(v)/math.Log(1024)), len(units)-1)
		v /= math.Pow(1024, float64(u))
	}
	return fmt.Sprintf("%.*f %s", precision, v, units[u])
}

// renderRate is the status loop's get_mbps: bytes over seconds.
func renderRate(n, secs float64) string {
	if n <= 0 {
		return "0 B/s"
	}
	return renderBytes(math.Trunc(n/secs), 1) + "/s"
}

// renderDuration is PVE::Format render_duration: "1h 2m 3s", "0s".
func renderDuration(secs int64) string {
	if secs <= 0 {
		return "0s"
	}
	var parts []string
	for _, u := range []struct {
		unit string
		len  int64
	}{{"w", 7 * 86400}, {"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}} {
		if v := secs / u.len; v > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", v, u.unit))
			secs -= v * u.len
		}
	}
	return strings.Join(parts, " ")
}
