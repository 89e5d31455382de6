package guest

import (
	"os"
	"path/filepath"
	"testing"
)

// setAptProxy writes and removes a file as host root in a rootfs its
// users control: a CT whose etc is a link to a host directory never gets
// the emulator to remove or write the host's file there.
func TestSetAptProxy_neverThroughALink(t *testing.T) {
	t.Parallel()
	host := t.TempDir()
	hostConf := filepath.Join(host, aptConfFile[len("etc/"):])
	if err := os.MkdirAll(filepath.Dir(hostConf), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, hostConf, "the host's own\n")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "usr", "bin", "sh"), "") // a system of its own
	if err := os.Symlink(host, filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	for _, proxy := range []string{"", "http://10.0.0.1:3142"} {
		m := &Manager{aptProxy: proxy}
		if err := m.setAptProxy(root); err != nil {
			t.Errorf("proxy %q: %v", proxy, err)
		}
		if b, err := os.ReadFile(hostConf); err != nil || string(b) != "the host's own\n" {
			t.Fatalf("proxy %q: the host's file is now %q, %v", proxy, b, err)
		}
	}
	// A real etc: written, then removed when there is no proxy.
	os.Remove(filepath.Join(root, "etc"))
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(aptConfFile)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := (&Manager{aptProxy: "http://10.0.0.1:3142"}).setAptProxy(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, aptConfFile)); err != nil {
		t.Fatalf("not written: %v", err)
	}
	if err := (&Manager{}).setAptProxy(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, aptConfFile)); !os.IsNotExist(err) {
		t.Fatalf("not removed: %v", err)
	}
}
