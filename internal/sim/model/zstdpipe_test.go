package model

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdSample is data that compresses some: random blocks repeated.
func zstdSample(t *testing.T) []byte {
	t.Helper()
	block := make([]byte, 64<<10)
	if _, err := rand.Read(block); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(block, 32)
}

// TestZstdPipeRoundTrip: what newZstdWriter writes (through the zstd
// binary where this machine has one) newZstdReader and the in-process
// decoder both read back, and the reader reads what the in-process
// encoder wrote: archives move between the two freely.
func TestZstdPipeRoundTrip(t *testing.T) {
	t.Parallel()
	t.Logf("zstd binary: %q", zstdBin())
	data := zstdSample(t)
	var packed bytes.Buffer
	zw, err := newZstdWriter(&packed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if packed.Len() >= len(data)/2 {
		t.Errorf("packed %d bytes into %d: not compressed", len(data), packed.Len())
	}
	zr, done, err := newZstdReader(bytes.NewReader(packed.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	done()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	dec, err := zstd.NewReader(bytes.NewReader(packed.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(dec); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the in-process decoder read %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	dec.Close()
	inproc, _ := zstd.NewWriter(nil)
	zr, done, err = newZstdReader(bytes.NewReader(inproc.EncodeAll(data, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read %d bytes (%v) of the in-process encoder's stream, want %d", len(got), err, len(data))
	}
}

// TestZstdPipeCutStreamIsAnError: a stream cut short ends in an error,
// never a clean EOF that a tar reader would take for a shorter archive;
// done after a partial read ends the decompressor.
func TestZstdPipeCutStreamIsAnError(t *testing.T) {
	t.Parallel()
	data := zstdSample(t)
	enc, _ := zstd.NewWriter(nil)
	packed := enc.EncodeAll(data, nil)
	zr, done, err := newZstdReader(bytes.NewReader(packed[:len(packed)/2]))
	if err == nil {
		_, err = io.ReadAll(zr)
		done()
	}
	if err == nil {
		t.Fatal("a cut stream read to its end without an error")
	}
	zr, done, err = newZstdReader(bytes.NewReader(packed))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(zr, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	done()
	if _, err := zr.Read(make([]byte, 1)); err == nil {
		t.Error("read after done succeeded")
	}
}

// TestZstdSmallFile: a file of up to smallZstd bytes is decoded in this
// process, from where it is read on, whoever packed it; one cut short is
// an error, as through the binary.
func TestZstdSmallFile(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("corral small archive\n"), 3000)
	var viaBin bytes.Buffer
	zw, err := newZstdWriter(&viaBin)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	enc, _ := zstd.NewWriter(nil)
	for _, tc := range []struct {
		name   string
		file   []byte
		skip   int64 // read position when the reader is made
		wantOK bool
	}{
		{"packed by newZstdWriter", viaBin.Bytes(), 0, true},
		{"packed in process", enc.EncodeAll(data, nil), 0, true},
		{"after a header already read", append([]byte("HEAD"), viaBin.Bytes()...), 4, true},
		{"cut short", viaBin.Bytes()[:viaBin.Len()/2], 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.file) > smallZstd {
				t.Fatalf("%d bytes: not a small file", len(tc.file))
			}
			p := filepath.Join(t.TempDir(), "a.tar.zst")
			if err := os.WriteFile(p, tc.file, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Seek(tc.skip, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			var got []byte
			zr, done, err := newZstdReader(f)
			if err == nil {
				got, err = io.ReadAll(zr)
				done()
			}
			if !tc.wantOK {
				if err == nil {
					t.Fatalf("read %d bytes of a cut file without an error", len(got))
				}
				return
			}
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes (%v), want the %d packed", len(got), err, len(data))
			}
		})
	}
}
