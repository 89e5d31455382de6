package plan

// Backups and snapshots of kind: vm apps (issue 34), in the plan's words.

// VMImageOf is the image a VM's Notes say it was imported from, "" when
// they name none (a restore keeps it in the restored VM's Notes).
func VMImageOf(desc string) string { return vmImageOf(desc) }

// VMBackupConsistency says how consistent a backup of VM app a will be:
// in snapshot mode app-consistent when the guest agent is on (vzdump
// freezes the guest's filesystems through it while the copy starts),
// crash-consistent without it; stop mode copies a VM that is off. It is what the config promises; whether
// the agent answers is known only when the backup runs, and corral
// backup says so then.
func VMBackupConsistency(a *App) string {
	if a.VM == nil {
		return ""
	}
	if a.BackupMode == "stop" {
		return "consistent: stop mode shuts the VM down for the copy"
	}
	if a.BackupMode == "suspend" {
		return "crash-consistent: suspend mode pauses the VM, whose agent cannot freeze its filesystems then (backup.mode: snapshot with the agent is app-consistent)"
	}
	if !a.VM.Agent {
		return "crash-consistent: vm.agent is off, so nothing freezes the guest's filesystems (set vm.agent: true, or backup.mode: stop)"
	}
	return "app-consistent: the guest agent freezes the filesystems (fs-freeze) for the copy; crash-consistent if the agent does not answer"
}

// VMSnapshotNote says what snapshotBeforeChange does for a VM app's change.
const VMSnapshotNote = "snapshotBeforeChange: a snapshot of the VM first (disks and config, without the RAM state, as PVE's default), " +
	"rolled back to (the VM boots afresh) if the change fails, removed once it succeeds"
