package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/testenv"
)

// The emulator writes a CT's settings as host root into a rootfs its
// users control: a link they made, anywhere on the way, is never followed.
func TestCTFileNeverFollowsLinks(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestCTDetect_linksStayInRoot: the OS type and systemd version are read
// from a rootfs whose links a template or backup brought; a link is
// resolved inside the rootfs, as the CT sees it (Debian's
// etc/os-release -> ../usr/lib/os-release works), never out to the
// host's files, absolute or through "..".
func TestCTDetect_linksStayInRoot(t *testing.T) {
	t.Parallel()
	host := t.TempDir() // stands for the host's /etc and /usr/lib
	os.WriteFile(filepath.Join(host, "os-release"), []byte("ID=alpine\n"), 0o600)
	os.MkdirAll(filepath.Join(host, "systemd"), 0o755)
	os.WriteFile(filepath.Join(host, "systemd", "systemd.version"), []byte("257\n"), 0o600)
	os.WriteFile(filepath.Join(host, "systemd", "libsystemd-shared-257.so"), nil, 0o600)
	up := func(root string) string { // "../" enough to climb out of root to /
		return strings.Repeat("../", strings.Count(root, "/")+2)
	}
	write := func(root, rel, data string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755)
		os.WriteFile(filepath.Join(root, rel), []byte(data), 0o644)
	}
	link := func(root, rel, target string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755)
		if err := os.Symlink(target, filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		setup       func(root string)
		wantOS      string // "" : detection fails
		wantSystemd int
	}{
		{"Debian's relative link inside the rootfs", func(root string) {
			write(root, "usr/lib/os-release", "ID=debian\n")
			link(root, "etc/os-release", "../usr/lib/os-release")
			write(root, "usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so", "")
		}, "debian", 252},
		{"an absolute link is the rootfs's path", func(root string) {
			write(root, "usr/lib/os-release", "ID=ubuntu\n")
			link(root, "etc/os-release", "/usr/lib/os-release")
		}, "ubuntu", 0},
		{"an absolute link to the host's file", func(root string) {
			link(root, "etc/os-release", filepath.Join(host, "os-release"))
			link(root, "usr/lib/systemd", filepath.Join(host, "systemd"))
		}, "", 0},
		{"a relative link climbing out", func(root string) {
			link(root, "etc/os-release", up(root)+strings.TrimPrefix(filepath.Join(host, "os-release"), "/"))
			link(root, "usr/lib/systemd", up(root)+strings.TrimPrefix(filepath.Join(host, "systemd"), "/"))
		}, "", 0},
		{"etc and usr are links to the host's", func(root string) {
			link(root, "etc", host)
			link(root, "usr", host)
		}, "", 0},
	}
	for _, tt := range tests {
		root := t.TempDir()
		tt.setup(root)
		got, err := ctDetectOSType(root)
		if got != tt.wantOS || (tt.wantOS == "") != (err != nil) {
			t.Errorf("%s: ctDetectOSType = %q, %v; want %q", tt.name, got, err, tt.wantOS)
		}
		if got := systemdVersion(root); got != tt.wantSystemd {
			t.Errorf("%s: systemdVersion = %d, want %d", tt.name, got, tt.wantSystemd)
		}
	}
}

// The emulator reads CT files as root, from rootfs that users' backups
// made: a device node or a FIFO where a file is expected is never opened
// (opening a watchdog arms it; a tty can become the controlling
// terminal). inotify reports every open of the node.
func TestCTFileNeverOpensSpecialFiles(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "making a device node")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		mode uint32
	}{
		{"char device (1:3, a null device)", unix.S_IFCHR | 0o644},
		{"fifo", unix.S_IFIFO | 0o644},
	} {
		p := filepath.Join(root, "etc", "os-release")
		os.Remove(p)
		if err := unix.Mknod(p, tt.mode, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
		in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.InotifyAddWatch(in, p, unix.IN_OPEN); err != nil {
			t.Fatal(err)
		}
		for _, read := range []struct {
			how string
			fn  func() (string, error)
		}{
			{"ReadCTFile", func() (string, error) { return ReadCTFile(root, "etc/os-release") }},
			{"readCTFileInRoot", func() (string, error) { return readCTFileInRoot(root, "etc/os-release") }},
		} {
			got, err := read.fn()
			if got != "" || err != nil {
				t.Errorf("%s: %s = %q, %v; want nothing", tt.name, read.how, got, err)
			}
			buf := make([]byte, 4096)
			if n, _ := unix.Read(in, buf); n > 0 {
				t.Errorf("%s: %s opened it (inotify IN_OPEN)", tt.name, read.how)
			}
		}
		unix.Close(in)
	}
}
