package cli

import (
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
)

// commands is every corral command, in one place: a new command is
// added here (and nowhere else), so this list is the whole CLI.
func commands(st *streams) []*cobra.Command {
	return []*cobra.Command{
		// Deploy: validate, plan, apply, destroy.
		newInitCmd(st),
		newValidateCmd(st),
		newSchemaCmd(st),
		newFmtCmd(st),
		newPlanCmd(st),
		newApplyCmd(st),
		newDestroyCmd(st),
		newMoveCmd(st),
		newDrainCmd(st),
		newUnlockCmd(st),

		// Look at and operate running apps.
		newStatusCmd(st),
		newOutputCmd(st),
		newVolumesCmd(st),
		newExecCmd(st),
		newLogsCmd(st),
		newCpCmd(st),
		newRescueCmd(st),
		powerCmd("start", "Start an app's container", (*apply.Power).Start)(st),
		powerCmd("stop", "Shut an app's container down (the next apply starts it again)", (*apply.Power).Stop)(st),
		powerCmd("restart", "Shut an app's container down and start it again", (*apply.Power).Restart)(st),

		// Data: backups and snapshots.
		newBackupCmd(st),
		newBackupsCmd(st),
		newRestoreCmd(st),
		newSnapshotCmd(st),
		newSnapshotsCmd(st),
		newRollbackCmd(st),

		// Unattended operation, setup and tooling.
		newAgentCmd(st),
		newDoctorCmd(st),
		newSimCmd(st),
		newBenchCmd(st),
		newVersionCmd(st),
	}
}
