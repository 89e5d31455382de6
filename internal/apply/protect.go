package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// RolledBackError is an in-place change that failed (the app was
// unhealthy, or a step failed) and was undone by rolling the container
// back to the snapshot taken before it.
type RolledBackError struct {
	App      string
	Snapshot string
	Err      error // what failed
}

func (e *RolledBackError) Error() string {
	return fmt.Sprintf("%s: the change failed and was rolled back to snapshot %s (the container runs as before the apply): %v", e.App, e.Snapshot, e.Err)
}

func (e *RolledBackError) Unwrap() error { return e.Err }

// protected runs change, an in-place change of c's container, under
// snapshotBeforeChange: a snapshot first, a rollback when change fails,
// the snapshot dropped when it succeeds. Where the container's storage
// cannot snapshot, a backup is taken instead and a failure names the
// archive to restore from; if neither is possible nothing is changed.
func (sn *Snapshots) protected(ctx context.Context, c plan.Change, obs *plan.Observed, change func() error) error {
	cts := obs.Apps[c.App]
	if len(cts) != 1 {
		return change() // planned as an update, so exactly one; be safe
	}
	ct := cts[0]
	if ok, why := CanSnapshot(obs, ct); !ok {
		sn.r.obs().Warn(c.App, "cannot snapshot before the change ("+why+"); taking a backup instead, to restore from if the change fails")
		return sn.protectedByBackup(ctx, c, change)
	}
	name := "corral_pre_" + time.Now().UTC().Format("20060102_150405")
	// Take, RollbackStart and Delete are steps themselves.
	if err := sn.Take(ctx, ct, name); err != nil {
		return fmt.Errorf("%w; nothing was changed (snapshotBeforeChange could not protect the change)", err)
	}
	drop := func() error { return sn.Delete(ctx, ct, name) }
	err := change()
	if err == nil {
		return drop()
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w; interrupted: snapshot %s of ct %d is kept, roll back with `corral rollback %s %s`", err, name, ct.VMID, c.App, name)
	}
	sn.r.obs().Warn(c.App, fmt.Sprintf("the change failed (%v); rolling back to snapshot %s", err, name))
	if rbErr := sn.RollbackStart(ctx, ct, name, true); rbErr != nil {
		return fmt.Errorf("%s: the change failed: %w; and the rollback to snapshot %s failed too: %w; roll back by hand with `corral rollback %s %s`",
			c.App, err, name, rbErr, c.App, name)
	}
	// The snapshot did its job; keep none behind (a snapshot pins the
	// volumes it covers).
	if derr := drop(); derr != nil {
		sn.r.obs().Warn(c.App, fmt.Sprintf("snapshot %s could not be removed after the rollback: %v", name, derr))
	}
	return &RolledBackError{App: c.App, Snapshot: name, Err: err}
}

// protectedByBackup is the fallback where the container's storage cannot
// snapshot (a dir storage, say): a vzdump archive before the change, and
// on failure the archive to restore from. The caller has warned why.
func (sn *Snapshots) protectedByBackup(ctx context.Context, c plan.Change, change func() error) error {
	storage := ""
	if c.Desired != nil {
		storage = c.Desired.BackupStorage
	}
	var archive string
	err := sn.r.step(c.App, "backup", "before the change", func() error {
		upid, err := sn.r.client.Backup(ctx, c.Node, c.VMID, pve.BackupOptions{Mode: "snapshot", Storage: storage, Compress: "zstd",
			NotesTemplate: "corral: " + c.App + " before an in-place change"}) // listed by corral backups, never pruned (ArchiveApp)
		if err != nil {
			return err
		}
		if err := sn.r.wait(ctx, c.App, upid); err != nil {
			return err
		}
		archive, err = latestBackup(ctx, sn.r.client, c.Node, storage, c.VMID)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w; nothing was changed: snapshotBeforeChange could neither snapshot nor back up the container", err)
	}
	if err := change(); err != nil {
		return fmt.Errorf("%w\nthe container's storage cannot snapshot, so corral cannot roll back by itself; the backup taken before the change is %s: "+
			"`corral restore %s --archive %s --replace` brings the app back to it", err, archive, c.App, archive)
	}
	return nil
}

// latestBackup is the newest vzdump archive of vmid on storage.
func latestBackup(ctx context.Context, c *pve.Client, node, storage string, vmid int) (string, error) {
	if storage == "" {
		storage = "local"
	}
	vols, err := c.StorageContent(ctx, node, storage, "backup", vmid)
	if err != nil {
		return "", err
	}
	var best pve.Volume
	for _, v := range vols {
		if v.CTime >= best.CTime {
			best = v
		}
	}
	if best.VolID == "" {
		return "", errors.New("the backup task ended OK but no archive is listed")
	}
	return best.VolID, nil
}
