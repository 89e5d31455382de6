package guest

import (
	"os"
	"path/filepath"
	"testing"
)

// shellIn reads the CT's etc/passwd as host root: a link there (to a
// host file naming another shell for root) is never followed.
func TestShellIn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		passwd func(t *testing.T, etc string)
		want   string
	}{
		{"root's shell", func(t *testing.T, etc string) {
			write(t, filepath.Join(etc, "passwd"), "daemon:x:1:1::/:/usr/sbin/nologin\nroot:x:0:0:root:/root:/bin/bash\n")
		}, "/bin/bash"},
		{"no passwd", func(t *testing.T, etc string) {}, "/bin/sh"},
		{"passwd a link out of the CT", func(t *testing.T, etc string) {
			host := filepath.Join(t.TempDir(), "passwd")
			write(t, host, "root:x:0:0:root:/root:/host/only/shell\n")
			if err := os.Symlink(host, filepath.Join(etc, "passwd")); err != nil {
				t.Fatal(err)
			}
		}, "/bin/sh"},
		{"etc a link out of the CT", func(t *testing.T, etc string) {
			host := t.TempDir()
			write(t, filepath.Join(host, "passwd"), "root:x:0:0:root:/root:/host/only/shell\n")
			if err := os.Remove(etc); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(host, etc); err != nil {
				t.Fatal(err)
			}
		}, "/bin/sh"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			etc := filepath.Join(root, "etc")
			if err := os.Mkdir(etc, 0o755); err != nil {
				t.Fatal(err)
			}
			tt.passwd(t, etc)
			if got := shellIn(root); got != tt.want {
				t.Errorf("shellIn = %q, want %q", got, tt.want)
			}
		})
	}
}

func write(t *testing.T, p, text string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
