package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
