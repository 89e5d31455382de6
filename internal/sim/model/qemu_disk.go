package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/corralhq/corral/internal/pvesize"
)

// A VM volume's allocation and data: a new sparse disk, a copy of an
// import source, the cloud-init drive.

// vmFill writes a new volume's data (a copy, or a sparse file), logging
// to logf; it runs without the State's lock.
type vmFill func(logf func(format string, args ...any)) error

// makeDriveLocked allocates d's volume (new, imported or cloud-init)
// and points d's file at it; it returns the new volid ("" for none) and
// what writes its data.
func (q *vmCreator) makeDriveLocked(logf func(format string, args ...any), node string, vmid int, d vmDrive) (string, vmFill, error) {
	if d.sid == "" && d.importFrom == "" {
		return "", nil, nil
	}
	sid := d.sid
	if sid == "" {
		sid, _, _ = ParseVolID(d.props["file"])
	}
	s, err := q.storage.storageCheckEnabledLocked(sid, node)
	if err != nil {
		return "", nil, err
	}
	size, format, src := int64(d.gib*float64(gib)), "raw", ""
	if f := d.props["format"]; f != "" && s.DirLike() {
		format = f // a dir storage's file may be qcow2 (snapshots) or vmdk
	}
	delete(d.props, "format") // create_disks: "no longer needed"
	var lines []string
	if vmStateDisk(d.key) && d.importFrom == "" {
		size = vmStateDiskSize(s, d.key, d.props)
		if s.Type == "lvmthin" && d.key == "efidisk0" { // the vars are under one extent
			lines = append(lines, "  Rounding up size to full physical extent 4.00 MiB")
		}
	}
	if d.importFrom != "" {
		st := q.state()
		v := st.Volumes[st.volKey(node, d.importFrom)]
		srcSID, srcName, _ := ParseVolID(d.importFrom)
		src = q.storage.volumePath(node, srcSID, srcName)
		size, format = v.Size, v.Format
		if s.LVMLike() {
			format = "raw" // the volume holds the source's bytes (docs/emulator.md)
		}
	}
	name := ""
	if d.cloudinit {
		name, size = fmt.Sprintf("vm-%d-cloudinit", vmid), 4*mib
		if s.DirLike() {
			name += ".qcow2"
			format = "qcow2"
		}
	} else if s.DirLike() && format != "raw" {
		name = fmt.Sprintf("vm-%d-disk-%d.%s", vmid, q.storage.freeDiskNumberLocked(node, sid, vmid), format)
	}
	v, created, err := q.storage.allocImageLocked(node, s, vmid, name, format, size)
	if err != nil {
		return "", nil, err
	}
	for _, l := range append(lines, created...) {
		logf("%s", l)
	}
	path, from := q.storage.volumePath(node, sid, v.Name), d.importFrom
	fill := func(logf func(format string, args ...any)) error {
		if from != "" {
			logf("importing disk '%s' to VM %d ...", from, vmid)
		}
		if err := vmWriteVolume(path, src, size); err != nil {
			return err
		}
		if from != "" {
			logf("transferred %s of %s (100.00%%)", pvesize.Format(size), pvesize.Format(size))
		}
		return nil
	}
	d.props["file"] = v.VolID()
	vmStateDiskAllocated(d.key, d.props)
	if d.cloudinit {
		d.props["media"] = "cdrom"
	} else {
		d.props["size"] = pvesize.Format(size)
	}
	return v.VolID(), fill, nil
}

// vmWriteVolume makes a VM volume's data a file (allocImageLocked made
// a directory, as a CT's volume is): a copy of src, or sparse of size.
func vmWriteVolume(path, src string, size int64) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("allocate %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("allocate %s: %w", path, err)
	}
	if src != "" {
		err = sparseCopy(f, src)
	}
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// sparseCopy copies src into f, leaving holes where src has them (an
// imported empty disk stays sparse, as qemu-img convert keeps it): only
// src's data extents are read (SEEK_DATA/SEEK_HOLE), so a 2 GiB image
// that holds a few MB copies in a few MB. Where the file system has no
// extents it reads src through and leaves out blocks of zeros. The
// caller truncates f to its size.
func sparseCopy(f *os.File, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("import %s: %w", src, err)
	}
	defer in.Close()
	if _, err := in.Seek(0, seekData); err == nil || errors.Is(err, syscall.ENXIO) {
		return copyExtents(f, in)
	}
	buf, zero := make([]byte, 1<<20), make([]byte, 1<<20)
	var off int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return err
			}
		}
		off += int64(n)
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("import %s: %w", src, rerr)
		}
	}
}
