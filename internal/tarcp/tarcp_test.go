package tarcp

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// entry is one crafted archive entry.
type entry struct {
	name, link, body string
	typ              byte
	mode             int64
}

func archive(t *testing.T, es ...entry) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return &b
}

// TestUnpackRefusesUnsafeEntries: every entry that could write outside
// the destination (or plant a way out of it) is refused, and nothing
// lands outside the destination directory.
func TestUnpackRefusesUnsafeEntries(t *testing.T) {
	for _, tc := range []struct {
		name string
		es   []entry
	}{
		{"dot-dot", []entry{{name: "top/", typ: tar.TypeDir, mode: 0o755}, {name: "top/../evil", typ: tar.TypeReg, body: "x", mode: 0o644}}},
		{"absolute name", []entry{{name: "/tmp/evil", typ: tar.TypeReg, body: "x", mode: 0o644}}},
		{"outside the top entry", []entry{{name: "other/evil", typ: tar.TypeReg, body: "x", mode: 0o644}}},
		{"absolute symlink", []entry{{name: "top/", typ: tar.TypeDir, mode: 0o755}, {name: "top/passwd", typ: tar.TypeSymlink, link: "/etc/passwd"}}},
		{"symlink out of the copy", []entry{{name: "top/", typ: tar.TypeDir, mode: 0o755}, {name: "top/up", typ: tar.TypeSymlink, link: "../.."}}},
		{"write through a symlink out", []entry{{name: "top/", typ: tar.TypeDir, mode: 0o755}, {name: "top/up", typ: tar.TypeSymlink, link: ".."}, {name: "top/up/evil", typ: tar.TypeReg, body: "x", mode: 0o644}}},
		{"hard link", []entry{{name: "top/", typ: tar.TypeDir, mode: 0o755}, {name: "top/h", typ: tar.TypeLink, link: "/etc/shadow"}}},
		{"device", []entry{{name: "top/", typ: tar.TypeDir, mode: 0o755}, {name: "top/sda", typ: tar.TypeBlock}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dest := filepath.Join(base, "dest")
			os.Mkdir(dest, 0o755)
			err := Unpack(archive(t, tc.es...), "top", dest, "copy")
			var ue *UnsafeError
			if !errors.As(err, &ue) {
				t.Fatalf("Unpack: %v, want an UnsafeError", err)
			}
			for _, p := range []string{filepath.Join(base, "evil"), filepath.Join(dest, "evil"), filepath.Join(dest, "copy", "passwd"), filepath.Join(dest, "copy", "up")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}

// TestPackUnpackRoundTrip: a tree with modes, an empty directory and a
// relative symlink comes back as it was, under the new name.
func TestPackUnpackRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "site")
	os.MkdirAll(filepath.Join(src, "sub", "empty"), 0o750)
	os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "secret"), []byte("s"), 0o600)
	os.Symlink("sub/secret", filepath.Join(src, "link"))
	os.Chmod(filepath.Join(src, "sub"), 0o700)
	var b bytes.Buffer
	if err := Pack(&b, src, "site", nil); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	if err := Unpack(&b, "site", dest, "copy"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{{"copy/run.sh", 0o755}, {"copy/sub", os.ModeDir | 0o700}, {"copy/sub/secret", 0o600}, {"copy/sub/empty", os.ModeDir | 0o750}, {"copy/link", os.ModeSymlink | 0o777}} {
		fi, err := os.Lstat(filepath.Join(dest, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tc.mode {
			t.Errorf("%s: mode %v, want %v", tc.path, fi.Mode(), tc.mode)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "copy", "link")); string(got) != "s" {
		t.Errorf("link reads %q", got)
	}
}
