package model

import (
	"os"
	"path/filepath"
	"testing"
)

// The emulator writes a CT's settings as host root into a rootfs its
// users control: a link they made, anywhere on the way, is never followed.
func TestCTFileNeverFollowsLinks(t *testing.T) {
	host := t.TempDir() // stands for the host's /etc
	secret := filepath.Join(host, "resolv.conf")
	os.WriteFile(secret, []byte("host data\n"), 0o600)
	os.MkdirAll(filepath.Join(host, "network"), 0o755)
	os.WriteFile(filepath.Join(host, "network", "interfaces"), []byte("host data\n"), 0o600)

	tests := []struct {
		name  string
		setup func(root string)
		rel   string
	}{
		{"etc is a link", func(root string) { os.Symlink(host, filepath.Join(root, "etc")) }, "etc/resolv.conf"},
		{"etc/network is a link", func(root string) {
			os.Mkdir(filepath.Join(root, "etc"), 0o755)
			os.Symlink(filepath.Join(host, "network"), filepath.Join(root, "etc", "network"))
		}, "etc/network/interfaces"},
		{"the file is a link", func(root string) {
			os.Mkdir(filepath.Join(root, "etc"), 0o755)
			os.Symlink(secret, filepath.Join(root, "etc", "resolv.conf"))
		}, "etc/resolv.conf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tt.setup(root)
			if got, _ := ReadCTFile(root, tt.rel); got != "" {
				t.Errorf("ReadCTFile read %q through a link", got)
			}
			WriteCTFile(root, tt.rel, "guest data\n")
			for _, p := range []string{secret, filepath.Join(host, "network", "interfaces")} {
				if b, _ := os.ReadFile(p); string(b) != "host data\n" {
					t.Fatalf("%s became %q", p, b)
				}
			}
		})
	}
	// Where nothing is a link, the file is written and read back.
	root := t.TempDir()
	if err := WriteCTFile(root, "etc/network/interfaces", "auto lo\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCTFile(root, "etc/network/interfaces"); err != nil || got != "auto lo\n" {
		t.Errorf("read back %q, %v", got, err)
	}
}

// A restored rootfs comes from a backup its users made: create's setup
// of hostname, /etc/hosts and root's keys writes nothing through its
// links.
func TestCTPostCreateNeverFollowsLinks(t *testing.T) {
	host := t.TempDir()
	for _, f := range []string{"hostname", "hosts", "authorized_keys"} {
		os.WriteFile(filepath.Join(host, f), []byte("host data\n"), 0o600)
	}
	root := t.TempDir()
	os.Symlink(host, filepath.Join(root, "etc"))
	os.Mkdir(filepath.Join(root, "root"), 0o700)
	os.Symlink(host, filepath.Join(root, "root", ".ssh"))
	ctPostCreate(root, "web", "ssh-ed25519 AAAA test")
	for _, f := range []string{"hostname", "hosts", "authorized_keys"} {
		if b, _ := os.ReadFile(filepath.Join(host, f)); string(b) != "host data\n" {
			t.Errorf("host %s became %q", f, b)
		}
	}
}
