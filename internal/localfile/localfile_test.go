package localfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("hello"), 0o600)
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 2048), 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{small, ""},
		{big, "is 2 KiB, more than the 1 KiB"},
		{fifo, "not a regular file (a FIFO)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{dir, "not a regular file (a directory)"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		data, err := Read(tc.path, 1024)
		if tc.want == "" {
			if err != nil || string(data) != "hello" {
				t.Errorf("Read(%s) = %q, %v", tc.path, data, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%s): %v, want %q", tc.path, err, tc.want)
		}
	}
}

// ReadIn reads only what lies inside its root: a path outside, a .. out,
// a link out (also one swapped in for a file), a link into an excluded
// directory are refused; a file and a link that stay inside are read.
func TestReadIn(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	outside := filepath.Join(filepath.Dir(root), "secret")
	os.MkdirAll(filepath.Join(root, "sub"), 0o700)
	os.MkdirAll(filepath.Join(root, ".git"), 0o700)
	os.WriteFile(outside, []byte("secret"), 0o600)
	os.WriteFile(filepath.Join(root, "sub", "ok"), []byte("hello"), 0o600)
	os.WriteFile(filepath.Join(root, ".git", "config"), []byte("url"), 0o600)
	os.Symlink("sub/ok", filepath.Join(root, "inner"))
	os.Symlink(outside, filepath.Join(root, "abs-out"))
	os.Symlink("../secret", filepath.Join(root, "rel-out"))
	os.Symlink("/etc", filepath.Join(root, "etc"))
	os.Symlink(".git/config", filepath.Join(root, "to-git"))
	os.Symlink("missing", filepath.Join(root, "dangling"))
	fifo := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{filepath.Join(root, "sub", "ok"), ""},
		{filepath.Join(root, "inner"), ""},
		{filepath.Join(root, "sub", "..", "inner"), ""},
		{outside, "is outside"},
		{filepath.Join(root, "..", "secret"), "is outside"},
		{filepath.Join(root, "abs-out"), "leads outside " + root + " through a symbolic link"},
		{filepath.Join(root, "rel-out"), "through a symbolic link"},
		{filepath.Join(root, "etc", "passwd"), "through a symbolic link"},
		{filepath.Join(root, ".git", "config"), "is in .git, which is not readable"},
		{filepath.Join(root, "to-git"), "is in .git, which is not readable"},
		{filepath.Join(root, "dangling"), "no such file"},
		{fifo, "not a regular file (a FIFO)"},
		{filepath.Join(root, "sub"), "not a regular file (a directory)"},
	} {
		data, err := ReadIn(root, []string{".git"}, tc.path, 1024)
		if tc.want == "" {
			if err != nil || string(data) != "hello" {
				t.Errorf("ReadIn(%s) = %q, %v", tc.path, data, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadIn(%s) = %q, %v; want %q", tc.path, data, err, tc.want)
		}
		if strings.Contains(string(data), "secret") {
			t.Errorf("ReadIn(%s) read the file outside", tc.path)
		}
	}
}

// TestTail: the end of a file, never more than max bytes of it, and
// nothing from a FIFO or a device (which would block or never end).
func TestTail(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	os.WriteFile(log, []byte(strings.Repeat("x", 5000)+"last line\n"), 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := Tail(log, 64)
	if err != nil || len(data) != 64 || !strings.HasSuffix(string(data), "last line\n") {
		t.Errorf("Tail(log, 64) = %q, %v", data, err)
	}
	if data, err := Tail(log, 1<<20); err != nil || len(data) != 5010 {
		t.Errorf("Tail(log, 1 MiB) = %d bytes, %v", len(data), err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		if _, err := Tail(p, 64); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Tail(%s): %v, want a refusal", p, err)
		}
	}
}

// TestReadAtMost: the size fits saw is only where the buffer starts: a
// file that grew or shrank since is read to its real end, and one that
// grew past the limit is refused.
func TestReadAtMost(t *testing.T) {
	content := strings.Repeat("0123456789", 300) // 3,000 bytes
	for _, tc := range []struct {
		name      string
		size, max int64
		want      string // "" for refused
	}{
		{"as stat said", 3000, 4000, content},
		{"grew since", 100, 4000, content},
		{"shrank since", 9000, 10000, content},
		{"no size known", 0, 4000, content},
		{"exactly the limit", 3000, 3000, content},
		{"grew past the limit", 2000, 2999, ""},
		{"grew past the limit, no size", 0, 1000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAtMost("f", iotest.HalfReader(strings.NewReader(content)), tc.size, tc.max)
			if tc.want == "" {
				var tl *TooLargeError
				if !errors.As(err, &tl) || tl.Max != tc.max {
					t.Fatalf("readAtMost = %d bytes, %v; want a TooLargeError at %d", len(got), err, tc.max)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("readAtMost = %d bytes, %v; want %d bytes", len(got), err, len(tc.want))
			}
		})
	}
}
