package doctor

import (
	"fmt"

	"github.com/corralhq/corral/internal/manifest"
)

// vmBackup adds what backing up, restoring and (with
// snapshotBeforeChange) snapshotting a kind: vm app's VM at placement p
// needs (issue 34). apply itself never backs up, so the backup's
// privileges are for later (corral backup, restore and the agent's
// schedule); the snapshot and its rollback protect apply's own change.
func (rs *reqSet) vmBackup(a manifest.App, p Placement) {
	vp, prop := vmPath(p.VMID)
	what := "vm of app " + a.Name
	if a.SnapshotBeforeChange {
		rs.add(Requirement{Path: vp, Priv: "VM.Snapshot", Propagate: prop, Operation: "snapshot the " + what + " before a change", Why: "snapshotBeforeChange takes a snapshot before each in-place change and removes it after", App: a.Name})
		rs.add(Requirement{Path: vp, Priv: "VM.Snapshot.Rollback", Alt: []string{"VM.Snapshot"}, Propagate: prop, Operation: "roll the " + what + " back after a failed change", Why: "rolling back to a snapshot needs VM.Snapshot.Rollback (or VM.Snapshot)", App: a.Name})
	}
	later := a.Backup.Schedule == ""
	rs.add(Requirement{Path: vp, Priv: "VM.Backup", Propagate: prop, Operation: "back up the " + what, Why: "vzdump checks VM.Backup per guest inside its task", App: a.Name, Later: later})
	bs := a.Backup.Storage
	if bs == "" {
		return
	}
	rs.add(Requirement{Path: "/storage/" + bs, Priv: "Datastore.AllocateSpace", Operation: "write backups of the " + what + " to " + bs, Why: "vzdump needs Datastore.AllocateSpace on the backup storage", App: a.Name, Later: later})
	if a.Backup.Keep > 0 {
		rs.add(Requirement{Path: "/storage/" + bs, Priv: "Datastore.Allocate", Operation: fmt.Sprintf("prune backups of app %s beyond keep: %d", a.Name, a.Backup.Keep), Why: "vzdump's prune-backups needs Datastore.Allocate on the backup storage", App: a.Name, Later: later})
	}
}
