package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The archives a real template's CT moves through are hundreds of MB: its
// create unpacks the template's tar.zst, a backup packs the root file
// system and volumes into one, a restore unpacks that. PVE pipes them
// through the zstd binary (vzdump, pct create's tar --zstd), and so does
// the emulator where the machine has one; the in-process codec is the
// fallback. Under the race detector that codec takes some 30 times the
// binary's CPU (200 MB of a template's tar at level 3: about 50 CPU-s,
// 3.5 without -race, 1.5 for the binary), which made a backup in
// TestComposeLocalExample run past CI's 30-minute limit on a loaded
// machine and a real template's keeper create outlast its lock's lease.

// zstdBin is the zstd binary on PATH, or "" for the in-process codec.
var zstdBin = sync.OnceValue(func() string {
	p, err := exec.LookPath("zstd")
	if err != nil {
		return ""
	}
	return p
})

// newZstdWriter compresses into w at zstd's default level (3, as vzdump's
// zstd); Close flushes and reports the compressor's failure.
func newZstdWriter(w io.Writer) (io.WriteCloser, error) {
	if zstdBin() == "" {
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault))
	}
	cmd := exec.Command(zstdBin(), "-q", "-3", "-c")
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start zstd: %w", err)
	}
	return &zstdPipeWriter{in: in, cmd: cmd, stderr: &stderr}, nil
}

type zstdPipeWriter struct {
	in     io.WriteCloser
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

func (z *zstdPipeWriter) Write(p []byte) (int, error) { return z.in.Write(p) }

func (z *zstdPipeWriter) Close() error {
	cerr := z.in.Close()
	if err := z.cmd.Wait(); err != nil {
		return fmt.Errorf("zstd: %w: %s", err, strings.TrimSpace(z.stderr.String()))
	}
	return cerr
}

// newZstdReader decompresses r. A stream the binary cannot decode ends in
// its error, never in a clean EOF (a tar reader would take a cut stream
// for a shorter archive); done ends the process if the caller stopped
// reading early.
func newZstdReader(r io.Reader) (io.Reader, func(), error) {
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size()-offset(f) <= smallZstd {
			return decodeSmallZstd(f)
		}
	}
	if zstdBin() == "" {
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	cmd := exec.Command(zstdBin(), "-q", "-d", "-c")
	cmd.Stdin = r
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start zstd: %w", err)
	}
	zr := &zstdPipeReader{out: out, cmd: cmd, stderr: &stderr}
	return zr, zr.done, nil
}

// smallZstd is the largest file decoded in this process whatever the
// machine has: the tests' stand-in template is 805 bytes and its CTs'
// backups a few KB, and a zstd process for each (two per CT create) cost
// more than the decoding, 2% of internal/cli's test CPU in a profile.
const smallZstd = 256 << 10

// smallDecoder decodes small files whole; DecodeAll may run
// concurrently. Its output is bounded as a template's tar is (64 MiB a
// file in extractTemplate), so that a small file cannot expand without
// bound.
var smallDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(256<<20))
})

// offset is f's read position (0 when it cannot say).
func offset(f *os.File) int64 {
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0
	}
	return off
}

// decodeSmallZstd decodes the rest of a small file in one piece.
func decodeSmallZstd(f *os.File) (io.Reader, func(), error) {
	data, err := io.ReadAll(io.LimitReader(f, smallZstd+1))
	if err != nil {
		return nil, nil, err
	}
	dec, err := smallDecoder()
	if err != nil {
		return nil, nil, err
	}
	out, err := dec.DecodeAll(data, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("zstd: %w", err)
	}
	return bytes.NewReader(out), func() {}, nil
}

type zstdPipeReader struct {
	out    io.ReadCloser
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	waited bool
	err    error
}

func (z *zstdPipeReader) Read(p []byte) (int, error) {
	if z.waited {
		return 0, z.eof()
	}
	n, err := z.out.Read(p)
	if errors.Is(err, io.EOF) {
		z.waited, z.err = true, z.cmd.Wait()
		return n, z.eof()
	}
	return n, err
}

// eof is io.EOF after a clean exit, else the binary's error.
func (z *zstdPipeReader) eof() error {
	if z.err != nil {
		return fmt.Errorf("zstd: %w: %s", z.err, strings.TrimSpace(z.stderr.String()))
	}
	return io.EOF
}

func (z *zstdPipeReader) done() {
	if z.waited {
		return
	}
	z.waited = true
	_ = z.cmd.Process.Kill()
	z.err = z.cmd.Wait()
}
