package model

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// The volumes of a VM's snapshot: whether their storages can snapshot,
// and the copies the emulator keeps as the storage's snapshots
// (docs/emulator.md "Virtual machines"); which drives have one, and
// where a snapshot's copy lives, are vmParts' lookups (qemu_vm.go).

// vmVolumeCanSnapshot is volume_has_feature('snapshot'): LVM-thin and
// RBD volumes can, on a dir or NFS storage only qcow2 files can.
func vmVolumeCanSnapshot(s *Storage, v *Volume) bool {
	if s == nil {
		return false
	}
	return s.CanSnapshot() || s.DirLike() && v.Format == "qcow2"
}

// vmSnapshotFeatureLocked is has_feature('snapshot') over conf's drives.
func (q *vmSnapshots) vmSnapshotFeatureLocked(node string, conf map[string]string) bool {
	for _, d := range q.vmVolumeDrivesLocked(node, conf) {
		if !vmVolumeCanSnapshot(q.state().storage(d.vol.Storage), d.vol) {
			return false
		}
	}
	return true
}

// vmCopyJob is one copy of a volume's data, which a task runs outside
// the State's lock: a disk may hold gigabytes, and the emulator keeps
// answering meanwhile (the VM's lock and config flock keep its volumes).
type vmCopyJob struct {
	what     string // the operation and volume, for the error
	dst, src string
	size     int64
}

func (j vmCopyJob) run() error {
	if err := os.MkdirAll(filepath.Dir(j.dst), 0o755); err != nil {
		return fmt.Errorf("%s: %w", j.what, err)
	}
	if err := vmWriteVolume(j.dst, j.src, j.size); err != nil {
		return fmt.Errorf("%s: %w", j.what, err)
	}
	return nil
}

// takeVolSnapshotLocked records snapshot snap of v and returns the copy
// that makes its data.
func (q *vmSnapshots) takeVolSnapshotLocked(node string, v *Volume, snap string) vmCopyJob {
	v.Snapshots = append(v.Snapshots, snap)
	q.journal.markVolume(node, v.VolID())
	return vmCopyJob{what: "snapshot " + v.VolID(), dst: q.vmSnapPath(node, v, snap),
		src: q.storage.volumePath(node, v.Storage, v.Name), size: v.Size}
}

// rollbackVolLocked gives v the size it had at snapshot snap and returns
// the copy that makes the snapshot its data again.
func (q *vmSnapshots) rollbackVolLocked(node string, v *Volume, snap string) (vmCopyJob, error) {
	src := q.vmSnapPath(node, v, snap)
	fi, err := os.Stat(src)
	if err != nil {
		return vmCopyJob{}, fmt.Errorf("rollback %s: %w", v.VolID(), err)
	}
	v.Size = fi.Size()
	q.journal.markVolume(node, v.VolID())
	return vmCopyJob{what: "rollback " + v.VolID(), dst: q.storage.volumePath(node, v.Storage, v.Name), src: src, size: fi.Size()}, nil
}

// dropVolSnapshotLocked deletes snapshot snap of v.
func (q *vmSnapshots) dropVolSnapshotLocked(node string, v *Volume, snap string) {
	os.Remove(q.vmSnapPath(node, v, snap))
	v.Snapshots = slices.DeleteFunc(v.Snapshots, func(s string) bool { return s == snap })
	q.journal.markVolume(node, v.VolID())
}

// Whence values of lseek(2) on Linux: the next data extent, the next hole.
const (
	seekData = 3
	seekHole = 4
)

// copyExtents copies each data extent of in to the same offset of out.
func copyExtents(out, in *os.File) error {
	var off int64
	for {
		start, err := in.Seek(off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			return nil // no data after off
		}
		if err != nil {
			return err
		}
		end, err := in.Seek(start, seekHole)
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, start), io.NewSectionReader(in, start, end-start)); err != nil {
			return err
		}
		off = end
	}
}
