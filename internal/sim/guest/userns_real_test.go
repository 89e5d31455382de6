package guest_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/sim/model"
)

// newRealKit is newKit with the real Debian 12 template (built once and
// cached); it skips unless CORRAL_TEST_REAL_TEMPLATES=1.
func newRealKit(t *testing.T) *kit {
	t.Helper()
	if os.Getenv("CORRAL_TEST_REAL_TEMPLATES") != "1" {
		t.Skip("real-template test: set CORRAL_TEST_REAL_TEMPLATES=1 (as root, with lxc, mmdebstrap and zstd installed) to run it")
	}
	tpl, err := model.EnsureRealTemplate(context.Background(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := model.Open(model.Options{Dir: t.TempDir(), HasTimeScale: true, TimeScale: 0, RealTemplate: tpl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, err := guest.Start(c, guest.Options{Port: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	key, pub, err := client.NewKey("corral@test")
	if err != nil {
		t.Fatal(err)
	}
	return &kit{t: t, c: c, m: m, key: key, pub: pub}
}

// capRoot is the rootid of a v3 security.capability xattr, -1 for a v2
// one, -2 for none.
func capRoot(t *testing.T, p string) int {
	t.Helper()
	b := make([]byte, 64)
	n, err := unix.Lgetxattr(p, "security.capability", b)
	if err != nil {
		return -2
	}
	if n == 24 {
		return int(binary.LittleEndian.Uint32(b[20:24]))
	}
	return -1
}

// TestGuest_realTemplateUnprivileged: a real Debian 12 CT, unprivileged,
// boots systemd in PVE's user namespace from a rootfs extracted with
// shifted owners (setuid and setgid programs, group shadow, file
// capabilities as v3 owned by host 100000), a user it adds writes
// shifted files, and vzdump -> restore into a privileged CT gives the
// same view with the container's own ids (and v2 capabilities) on disk.
func TestGuest_realTemplateUnprivileged(t *testing.T) {
	t.Parallel()
	k := newRealKit(t)
	k.needUserns()
	k.create(160, nil)
	c, err := k.dial(160, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	view := "cat /proc/1/comm; stat -c '%n %u:%g %a' /usr/bin/passwd /usr/bin/chage /etc/shadow /home/bob/f"
	if out, err := run(t, c, "useradd -m -u 1001 bob && su bob -c 'touch /home/bob/f' && awk '{print $2}' /proc/self/uid_map"); err != nil || out != "stdout: 100000" {
		t.Fatalf("add a user: %q, %v", out, err)
	}
	want, err := run(t, c, view)
	if err != nil || want != "stdout: systemd\nstdout: /usr/bin/passwd 0:0 4755\nstdout: /usr/bin/chage 0:42 2755\nstdout: /etc/shadow 0:42 640\nstdout: /home/bob/f 1001:1001 644" {
		t.Fatalf("the CT's view: %q, %v", want, err)
	}
	rootfs := k.rootDir(160)
	ping := ""
	for _, p := range []string{"usr/bin/ping", "bin/ping"} {
		if capRoot(t, filepath.Join(rootfs, p)) != -2 {
			ping = p
		}
	}
	if ping == "" {
		t.Error("ping has no file capability in the rootfs: the template has one (iputils-ping's cap_net_raw)")
	}
	onDisk := func(root string, wantOwners map[string]string, wantCap int) {
		t.Helper()
		for p, want := range wantOwners {
			if got := owner(t, filepath.Join(root, p)); got != want {
				t.Errorf("%s on disk: %s, want %s", p, got, want)
			}
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, "usr/bin/passwd"), &st); err != nil || st.Mode&0o7777 != 0o4755 {
			t.Errorf("passwd's mode on disk: %o, %v", st.Mode&0o7777, err)
		}
		if ping != "" {
			if got := capRoot(t, filepath.Join(root, ping)); got != wantCap {
				t.Errorf("%s's capability: root %d, want %d (-1: v2)", ping, got, wantCap)
			}
		}
	}
	onDisk(rootfs, map[string]string{"usr/bin/passwd": "100000:100000", "etc/shadow": "100000:100042", "home/bob/f": "101001:101001", ".": "100000:100000"}, 100000)

	upid, err := k.c.Vzdump(root, "pve", map[string]string{"vmid": "160", "storage": "local", "mode": "stop", "compress": "zstd"})
	k.task(upid, err)
	backups, err := k.c.Content("pve", "local", "backup", 160)
	if err != nil || len(backups) != 1 {
		t.Fatalf("backups: %v %v", backups, err)
	}
	k.task(k.c.CreateCT(root, "pve", map[string]string{"vmid": "161", "ostemplate": backups[0].VolID(), "restore": "1", "storage": "local-lvm", "unprivileged": "0"}))
	k.task(k.c.StartCT(root, "pve", 161, nil))
	onDisk(k.rootDir(161), map[string]string{"usr/bin/passwd": "0:0", "etc/shadow": "0:42", "home/bob/f": "1001:1001"}, -1)
	c2, err := k.dial(161, client.HostKeyPolicy{TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := run(t, c2, view); err != nil || got != want {
		t.Errorf("the privileged restore's view: %q, %v; want %q", got, err, want)
	}
}
