package doctor_test

import (
	"testing"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/manifest"
)

// A kind: vm app's backups and snapshots (issue 34): snapshotBeforeChange
// needs VM.Snapshot and its rollback now; VM.Backup and the backup
// storage are needed now with a backup.schedule (the agent backs up),
// else later (corral backup by hand).
func TestRequirements_vmBackup(t *testing.T) {
	vmApp := func(mod func(*manifest.App)) manifest.App {
		return app("web", func(a *manifest.App) {
			a.Kind = manifest.KindVM
			a.VM = &manifest.VM{Image: manifest.DefaultVMImage, DiskStorage: "local-lvm", Agent: true}
			if mod != nil {
				mod(a)
			}
		})
	}
	cases := []struct {
		name      string
		app       manifest.App
		snapshot  bool
		backupNow bool
	}{
		{"plain", vmApp(nil), false, false},
		{"snapshotBeforeChange", vmApp(func(a *manifest.App) { a.SnapshotBeforeChange = true }), true, false},
		{"scheduled", vmApp(func(a *manifest.App) { a.Backup.Schedule = "@daily"; a.Backup.Keep = 3 }), false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]doctor.Requirement{}
			for _, r := range doctor.Requirements(file(tc.app), doctor.Targets{DefaultNode: "pve"}) {
				if r.Operation == "" || r.Why == "" {
					t.Errorf("requirement %+v lacks operation or why", r)
				}
				got[r.Path+" "+r.Priv] = r
			}
			_, snap := got["/vms VM.Snapshot"]
			_, rb := got["/vms VM.Snapshot.Rollback"]
			if snap != tc.snapshot || rb != tc.snapshot {
				t.Errorf("VM.Snapshot %v, VM.Snapshot.Rollback %v; want %v", snap, rb, tc.snapshot)
			}
			b, ok := got["/vms VM.Backup"]
			s, sok := got["/storage/local Datastore.AllocateSpace"]
			if !ok || !sok || b.Later == tc.backupNow || s.Later == tc.backupNow {
				t.Errorf("VM.Backup %+v, backup storage %+v: want them needed now %v", b, s, tc.backupNow)
			}
			if _, prune := got["/storage/local Datastore.Allocate"]; prune != tc.backupNow {
				t.Errorf("prune privilege listed %v, want %v (keep only in the scheduled case)", prune, tc.backupNow)
			}
		})
	}
}
