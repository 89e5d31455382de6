package model

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testutil/fstree"
)

// sameTree fails unless trees a and b (roots included) list the same.
func sameTree(t *testing.T, a, b string, skip ...string) {
	t.Helper()
	la, err := fstree.List(a, skip...)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := fstree.List(b, skip...)
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := fstree.Describe(a, ".")
	rb, _ := fstree.Describe(b, ".")
	la, lb = append(la, ra), append(lb, rb)
	if strings.Join(la, "\n") != strings.Join(lb, "\n") {
		t.Errorf("trees differ\nwant:\n  %s\ngot:\n  %s", strings.Join(la, "\n  "), strings.Join(lb, "\n  "))
	}
}

// sampleRoot makes a volume-like root directory (mode 0755, root's) with
// the rows in it.
func sampleRoot(t *testing.T, rows []fstree.Entry) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	fstree.Build(t, src, rows)
	return src
}

// TestCopyTree_keepsMetadata: snapshot, rollback and move_volume copy a
// volume with everything a file system keeps, row by row and all at once.
func TestCopyTree_keepsMetadata(t *testing.T) {
	t.Parallel()
	rows := fstree.Sample()
	rows = append(rows, fstree.Entry{Name: "all rows together", Build: func(d string) error {
		for _, r := range fstree.Sample() {
			if err := r.Build(d); err != nil {
				return err
			}
		}
		return nil
	}})
	for _, row := range rows {
		t.Run(row.Name, func(t *testing.T) {
			src := sampleRoot(t, []fstree.Entry{row})
			// The target exists already, as snapshot and rollback make it.
			dst := filepath.Join(t.TempDir(), "dst")
			if err := os.MkdirAll(dst, 0o700); err != nil {
				t.Fatal(err)
			}
			if _, err := copyTree(src, dst); err != nil {
				t.Fatal(err)
			}
			sameTree(t, src, dst)
		})
	}
}

// TestBackupArchive_roundTrip: what vzdump's tar writes, restore's
// extraction gives back, row by row.
func TestBackupArchive_roundTrip(t *testing.T) {
	t.Parallel()
	for _, row := range fstree.Sample() {
		t.Run(row.Name, func(t *testing.T) {
			src := sampleRoot(t, []fstree.Entry{row})
			archive := filepath.Join(t.TempDir(), "vzdump-lxc-100-2026_11_26-07_00_00.tar.zst")
			if _, _, err := writeBackupArchive(archive, "arch: amd64\n", []vzdumpDisk{{mp: "/", dir: src}}, "zstd"); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "dst")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			_, skipped, err := extractBackup(archive, []restoreMount{{path: "/", dir: dst}})
			if err != nil || len(skipped) > 0 {
				t.Fatalf("extract: skipped %v, %v", skipped, err)
			}
			// pct.conf came along, as in PVE before restore removes it.
			if err := os.RemoveAll(filepath.Join(dst, "etc")); err != nil {
				t.Fatal(err)
			}
			if err := fstree.Touch(dst, fstree.MTime); err != nil { // etc's removal changed the root's mtime
				t.Fatal(err)
			}
			sameTree(t, src, dst)
		})
	}
}

// TestTarTree_headers: the archive itself has GNU tar's shapes for
// vzdump's flags: numeric owners only, link entries for second names,
// special files as their types, xattrs and ACLs as SCHILY records.
func TestTarTree_headers(t *testing.T) {
	t.Parallel()
	src := sampleRoot(t, fstree.Sample())
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tarTree(tw, src, ".", idMap{}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner names %q/%q, want numeric only", h.Name, h.Uname, h.Gname)
		}
		got[h.Name] = h
	}
	tests := []struct {
		name     string
		typ      byte
		mode     int64
		uid, gid int
		check    func(h *tar.Header) string
	}{
		{"./", tar.TypeDir, 0o755, 0, 0, nil},
		{"./shared/", tar.TypeDir, 0o2775, 1000, 1000, nil},
		{"./tmp/", tar.TypeDir, 0o1777, 0, 0, nil},
		{"./suid", tar.TypeReg, 0o4755, 0, 0, nil},
		{"./high", tar.TypeReg, 0o640, 100000, 100033, nil},
		{"./hard-a", tar.TypeReg, 0o644, 1000, 100, nil},
		{"./hard-b", tar.TypeLink, 0o644, 1000, 100, func(h *tar.Header) string {
			if h.Linkname != "./hard-a" {
				return "links to " + h.Linkname
			}
			return ""
		}},
		{"./link", tar.TypeSymlink, 0o777, 1000, 1000, nil},
		{"./fifo", tar.TypeFifo, 0o620, 1000, 5, nil},
		{"./null", tar.TypeChar, 0o666, 0, 0, func(h *tar.Header) string {
			if h.Devmajor != 1 || h.Devminor != 3 {
				return "wrong device numbers"
			}
			return ""
		}},
		{"./loop9", tar.TypeBlock, 0o660, 0, 6, nil},
		{"./xattr", tar.TypeReg, 0o644, 0, 0, func(h *tar.Header) string {
			if h.PAXRecords["SCHILY.xattr.user.note"] != "hello" || h.PAXRecords["SCHILY.xattr.user.bin"] != "\x00\x01\x02\xff" {
				return "xattrs missing"
			}
			return ""
		}},
		{"./acl", tar.TypeReg, 0o660, 0, 0, func(h *tar.Header) string {
			if a := h.PAXRecords["SCHILY.acl.access"]; a != "user::rw-,user:1000:rw-,group::r--,mask::rw-,other::---" {
				return "access ACL " + a
			}
			return ""
		}},
		{"./acldir/", tar.TypeDir, 0o755, 0, 0, func(h *tar.Header) string {
			if a := h.PAXRecords["SCHILY.acl.default"]; a != "user::rwx,group::r-x,group:100:rwx,mask::rwx,other::r-x" {
				return "default ACL " + a
			}
			return ""
		}},
	}
	for _, tt := range tests {
		h := got[tt.name]
		if h == nil {
			t.Errorf("%s: not in the archive", tt.name)
			continue
		}
		if h.Typeflag != tt.typ || h.Mode != tt.mode || h.Uid != tt.uid || h.Gid != tt.gid {
			t.Errorf("%s: type %c mode %04o owner %d:%d, want %c %04o %d:%d", tt.name, h.Typeflag, h.Mode, h.Uid, h.Gid, tt.typ, tt.mode, tt.uid, tt.gid)
		}
		if !h.ModTime.Equal(fstree.MTime) {
			t.Errorf("%s: mtime %v, want %v", tt.name, h.ModTime, fstree.MTime)
		}
		if tt.check != nil {
			if msg := tt.check(h); msg != "" {
				t.Errorf("%s: %s", tt.name, msg)
			}
		}
	}
}

// TestExtractBackup_staysInside: a crafted archive cannot write outside
// the volume it restores into, neither by ".." nor through a symlink it
// planted, nor by a hard link to a file outside.
func TestExtractBackup_staysInside(t *testing.T) {
	t.Parallel()
	type entry struct {
		typ        byte
		name, link string
	}
	tests := []struct {
		name    string
		entries []entry
		wantErr string // "" when the archive extracts (harmlessly)
		inside  string // a file that must exist inside afterwards
	}{
		{"dot-dot names stay inside", []entry{{tar.TypeReg, "../../escape", ""}}, "", "escape"},
		{"symlink to outside, then a file through it", []entry{{tar.TypeSymlink, "./out", "OUTSIDE"}, {tar.TypeReg, "./out/pwned", ""}}, "is a symlink", ""},
		{"relative symlink up, then a directory through it", []entry{{tar.TypeSymlink, "./up", "../.."}, {tar.TypeDir, "./up/x/", ""}}, "is a symlink", ""},
		{"hard link to a file outside", []entry{{tar.TypeLink, "./hl", "OUTSIDE/victim"}}, "no such file", ""},
		{"symlink replaced by a file writes the link, not its target", []entry{{tar.TypeSymlink, "./s", "OUTSIDE/victim"}, {tar.TypeReg, "./s", ""}}, "", "s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			vol := filepath.Join(base, "a", "b", "vol")
			for _, d := range []string{outside, vol} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("original"), 0o644); err != nil {
				t.Fatal(err)
			}
			archive := filepath.Join(base, "crafted.tar")
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, e := range tt.entries {
				link := strings.ReplaceAll(e.link, "OUTSIDE", outside)
				h := &tar.Header{Typeflag: e.typ, Name: e.name, Linkname: link, Mode: 0o644}
				body := ""
				if e.typ == tar.TypeReg {
					body = "pwned"
					h.Size = int64(len(body))
				}
				if err := tw.WriteHeader(h); err != nil {
					t.Fatal(err)
				}
				tw.Write([]byte(body))
			}
			tw.Close()
			if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := extractBackup(archive, []restoreMount{{path: "/", dir: vol}})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("extract: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("extract: %v, want an error with %q", err, tt.wantErr)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "original" {
				t.Errorf("the file outside was changed: %q", b)
			}
			ents, _ := os.ReadDir(outside)
			if len(ents) != 1 {
				t.Errorf("outside holds %d entries, want only victim", len(ents))
			}
			for _, p := range []string{filepath.Join(base, "escape"), filepath.Join(base, "a", "escape"), filepath.Join(base, "a", "b", "escape")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
			if tt.inside != "" {
				if fi, err := os.Lstat(filepath.Join(vol, tt.inside)); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s inside the volume: %v, %v", tt.inside, fi, err)
				}
			}
		})
	}
}

// TestACLText: the binary ACL xattr and tar's numeric text form convert
// both ways, in the kernel's entry order.
func TestACLText(t *testing.T) {
	t.Parallel()
	tests := []struct{ text, canonical string }{
		{"user::rw-,group::r--,other::---", "user::rw-,group::r--,other::---"},
		{"user::rwx,user:1000:r-x,group::r-x,mask::r-x,other::r-x", "user::rwx,user:1000:r-x,group::r-x,mask::r-x,other::r-x"},
		// Out of order, with newlines and an effective-rights comment, as
		// getfacl prints: the kernel order comes back.
		{"other::r--\ngroup:100:rw-\t#effective:r--\nmask::r--\nuser:7:rwx\nuser::rw-\ngroup::r--", "user::rw-,user:7:rwx,group::r--,group:100:rw-,mask::r--,other::r--"},
	}
	for _, tt := range tests {
		b, err := aclFromText(tt.text)
		if err != nil {
			t.Fatalf("%q: %v", tt.text, err)
		}
		got, err := aclToText(b)
		if err != nil || got != tt.canonical {
			t.Errorf("%q: %q, %v; want %q", tt.text, got, err, tt.canonical)
		}
	}
	for _, bad := range []string{"user", "mask:1:rwx", "user:bob:rwx", "user::rwz", "weird::r--"} {
		if _, err := aclFromText(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestVolumeWalk_runningGuest: a snapshot or backup of a running CT's
// volume leaves out the guest runtime's scratch directory and whatever
// the guest removes while the walk is under way (CI once failed a
// snapshot on an overlay work file that was gone by its llistxattr).
func TestVolumeWalk_runningGuest(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src")
	for _, d := range []string{"etc", scratchDir + "/boot-1/work/#d044", "opt/scratch"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"etc/hostname", "opt/a", "opt/b", "opt/scratch/c"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The guest removes opt/b and opt/scratch after the directory read
	// of opt, before the walk reaches them.
	var seen []string
	err := walkVolume(src, func(p, rel string) error {
		seen = append(seen, rel)
		if rel == "opt/a" {
			os.Remove(filepath.Join(src, "opt/b"))
			os.RemoveAll(filepath.Join(src, "opt/scratch"))
		}
		_, err := lstatMeta(p)
		return err
	})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	if got, want := strings.Join(seen, " "), ". etc etc/hostname opt opt/a opt/b opt/scratch"; got != want {
		t.Errorf("walked %q, want %q (scratch skipped, vanished entries tried once and left out)", got, want)
	}

	// copyTree and the tar writer leave the scratch directory out.
	dst := t.TempDir()
	if _, err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dst, scratchDir)); !os.IsNotExist(err) {
		t.Errorf("copy has %s (err %v)", scratchDir, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "etc/hostname")); err != nil {
		t.Errorf("copy lost etc/hostname: %v", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tarTree(tw, src, ".", idMap{}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if strings.Contains(h.Name, scratchDir) {
			t.Errorf("archive has %s", h.Name)
		}
	}

	// A missing root is still an error.
	if err := walkVolume(filepath.Join(src, "nope"), func(string, string) error { return nil }); err == nil {
		t.Error("walk of a missing root succeeded")
	}
}
