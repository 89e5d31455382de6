package guest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Issue 27: the emulated sshd reads the CT's authorized_keys, which the
// CT's root controls, never through a link and never from a FIFO: a FIFO
// would block the login forever, a link could make the emulator (root on
// the host) read a host file.
func TestAuthorized_bounded(t *testing.T) {
	t.Parallel()
	signer, err := hostKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key := signer.PublicKey()
	line := ssh.MarshalAuthorizedKey(key)
	outside := filepath.Join(t.TempDir(), "authorized_keys")
	os.WriteFile(outside, line, 0o600)
	for _, tc := range []struct {
		name string
		make func(path string) error
		want bool
	}{
		{"a regular file", func(p string) error { return os.WriteFile(p, line, 0o600) }, true},
		{"a link out of the CT", func(p string) error { return os.Symlink(outside, p) }, false},
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, false},
		{"missing", func(string) error { return nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "root", ".ssh")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(filepath.Join(dir, "authorized_keys")); err != nil {
				t.Fatal(err)
			}
			done := make(chan bool, 1)
			go func() { done <- authorized(root, key) }()
			select {
			case got := <-done:
				if got != tc.want {
					t.Fatalf("authorized() = %v, want %v", got, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("authorized() blocked")
			}
		})
	}
}

// TestBootFinished: what systemctl is-system-running --wait prints
// before systemd's bus is up ("offline", as it prints with no /run of
// systemd's) is not a finished boot, or sessions race the boot's jobs.
func TestBootFinished(t *testing.T) {
	t.Parallel()
	for state, want := range map[string]bool{
		"running": true, "degraded": true, "maintenance": true, "stopping": true,
		"offline": false, "": false, "unknown": false, "starting": false, "initializing": false,
	} {
		if got := bootFinished(state); got != want {
			t.Errorf("bootFinished(%q) = %v, want %v", state, got, want)
		}
	}
}
