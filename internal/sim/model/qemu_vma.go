package model

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// The emulator's VM backup archive, a documented stand-in for VMA
// (docs/emulator.md "Virtual machines"): PVE's vma-writer streams its
// own extent format out of a running QEMU's backup job, which the
// emulator has no QEMU for. The stand-in keeps what a user and the API
// see of a VMA archive: the name vzdump-qemu-<vmid>-<time>.vma[.zst|.gz],
// the compression, the config "vma config" prints (qemu-server.conf with
// its #qmdump#map lines) and the sparseness (only the 64 KiB clusters
// holding data are stored). Inside the compression it is a tar:
//
//	qemu-server.conf        the config as assemble writes it
//	drive-<key>             one per disk: records of a big-endian u64
//	                        offset and the cluster at it (64 KiB, the
//	                        last one shorter); PAX records give the
//	                        device's size and its file's length.

// vmaCluster is VMA's cluster size: a cluster of zeros is not stored.
const vmaCluster = 64 << 10

// PAX record keys of a drive entry.
const (
	vmaPAXDevSize  = "CORRAL.vma.devsize"  // the volume's size (VMA's dev_info size)
	vmaPAXFileSize = "CORRAL.vma.filesize" // its file's length (a qcow2 file is shorter)
)

// vmaDevice is one disk a VM archive holds or will hold.
type vmaDevice struct {
	name     string // drive-<key>
	key      string // the config key (scsi0)
	volid    string
	storage  string // the volume's storage and format, for #qmdump#map
	format   string
	path     string // the volume's file
	devSize  int64
	fileSize int64
}

// vmaStats is what the archive writer measured: every byte of the
// devices (total), the zero clusters it left out (zero), the tar stream
// written before compression and the file's size.
type vmaStats struct {
	total, zero, written, size int64
}

// writeVMArchive writes the archive at dst, compressed as compress says
// ("zstd", "gzip", or plain for "0" and "").
func writeVMArchive(dst, conf string, devs []vmaDevice, compress string) (vmaStats, error) {
	var st vmaStats
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return st, err
	}
	f, err := os.Create(dst)
	if err != nil {
		return st, err
	}
	defer f.Close()
	var out io.Writer = f
	var zw io.WriteCloser
	switch compress {
	case "zstd":
		if zw, err = zstd.NewWriter(f); err != nil {
			return st, err
		}
		out = zw
	case "gzip":
		zw = gzip.NewWriter(f)
		out = zw
	}
	cw := &countingWriter{w: out}
	tw := tar.NewWriter(cw)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "qemu-server.conf", Mode: 0o644, Size: int64(len(conf)), ModTime: now}); err != nil {
		return st, err
	}
	if _, err := io.WriteString(tw, conf); err != nil {
		return st, err
	}
	for _, d := range devs {
		zero, err := writeVMADevice(tw, d, now)
		if err != nil {
			return st, fmt.Errorf("%s: %w", d.name, err)
		}
		st.total += d.devSize
		st.zero += zero + max(d.devSize-d.fileSize, 0)
	}
	if err := tw.Close(); err != nil {
		return st, err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return st, err
		}
	}
	if err := f.Close(); err != nil {
		return st, err
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return st, err
	}
	st.written, st.size = cw.n, fi.Size()
	return st, nil
}

// writeVMADevice writes one drive entry: its data clusters are found
// first (a tar header carries the entry's length), skipping the file's
// holes with SEEK_DATA; it returns the zero bytes left out.
func writeVMADevice(tw *tar.Writer, d vmaDevice, now time.Time) (int64, error) {
	f, err := os.Open(d.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	clusters, err := vmaDataClusters(f, d.fileSize)
	if err != nil {
		return 0, err
	}
	var length int64
	for _, off := range clusters {
		length += 8 + min(vmaCluster, d.fileSize-off)
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: d.name, Mode: 0o600, Size: length, ModTime: now, Format: tar.FormatPAX,
		PAXRecords: map[string]string{vmaPAXDevSize: strconv.FormatInt(d.devSize, 10), vmaPAXFileSize: strconv.FormatInt(d.fileSize, 10)}}
	if err := tw.WriteHeader(h); err != nil {
		return 0, err
	}
	buf := make([]byte, vmaCluster)
	var stored int64
	for _, off := range clusters {
		n := min(vmaCluster, d.fileSize-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		var rec [8]byte
		binary.BigEndian.PutUint64(rec[:], uint64(off))
		if _, err := tw.Write(rec[:]); err != nil {
			return 0, err
		}
		if _, err := tw.Write(buf[:n]); err != nil {
			return 0, err
		}
		stored += n
	}
	return d.fileSize - stored, nil
}

// vmaDataClusters lists the offsets of f's clusters that hold a non-zero
// byte, reading only the file's data segments.
func vmaDataClusters(f *os.File, size int64) ([]int64, error) {
	var out []int64
	buf := make([]byte, vmaCluster)
	zero := make([]byte, vmaCluster)
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			data = off // no SEEK_DATA: read everything
		}
		start := data / vmaCluster * vmaCluster
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		for c := start; c < min(hole, size); c += vmaCluster {
			n := min(vmaCluster, size-c)
			if _, err := f.ReadAt(buf[:n], c); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			if !bytes.Equal(buf[:n], zero[:n]) && (len(out) == 0 || out[len(out)-1] != c) {
				out = append(out, c)
			}
		}
		off = max(hole, start+vmaCluster)
	}
	return out, nil
}

// vmaEntry is one drive entry of an archive as read back.
type vmaEntry struct {
	name              string
	devSize, fileSize int64
}

// readVMArchive reads the archive at p: the config, then each drive
// entry, handing its records to extract (nil: the records are skipped).
func readVMArchive(p string, extract func(e vmaEntry, r io.Reader) error) (string, error) {
	tr, closeFn, err := openBackupTar(p)
	if err != nil {
		return "", err
	}
	defer closeFn()
	conf := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if conf == "" {
				return "", errors.New("unable to extract configuration - no config file in archive")
			}
			return conf, nil
		}
		if err != nil {
			return "", err
		}
		switch name := path.Clean(h.Name); {
		case name == "qemu-server.conf":
			b, err := io.ReadAll(io.LimitReader(tr, maxArchiveConfig+1))
			if err != nil {
				return "", err
			}
			if len(b) > maxArchiveConfig {
				return "", fmt.Errorf("the config in the archive is more than %d bytes, more than a guest config can be", maxArchiveConfig)
			}
			conf = string(b)
			if extract == nil {
				return conf, nil
			}
		case extract != nil:
			e := vmaEntry{name: name}
			e.devSize, _ = strconv.ParseInt(h.PAXRecords[vmaPAXDevSize], 10, 64)
			e.fileSize, _ = strconv.ParseInt(h.PAXRecords[vmaPAXFileSize], 10, 64)
			if err := extract(e, tr); err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
		}
	}
}

// extractVMADevice writes a drive entry's records into the file at dst,
// which ends up e.fileSize long: the clusters not stored stay holes. It
// returns the bytes it wrote.
func extractVMADevice(e vmaEntry, r io.Reader, dst string) (int64, error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	var written int64
	buf := make([]byte, vmaCluster)
	for err == nil {
		var rec [8]byte
		if _, rerr := io.ReadFull(r, rec[:]); errors.Is(rerr, io.EOF) {
			break
		} else if rerr != nil {
			err = rerr
			break
		}
		off := int64(binary.BigEndian.Uint64(rec[:]))
		if off < 0 || off >= e.fileSize {
			err = fmt.Errorf("cluster at %d is beyond the device's %d bytes", off, e.fileSize)
			break
		}
		n := min(vmaCluster, e.fileSize-off)
		if _, err = io.ReadFull(r, buf[:n]); err == nil {
			_, err = f.WriteAt(buf[:n], off)
			written += n
		}
	}
	if err == nil {
		err = f.Truncate(e.fileSize)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return written, err
}
