package localfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
