package sim

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/testutil/fstree"
)

// listTree is fstree.List of dir, failing the test on error.
func listTree(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	l, err := fstree.List(dir, skip...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(l, "\n")
}

func sameListing(t *testing.T, what, want, got string) {
	t.Helper()
	if want != got {
		t.Errorf("%s differs\nwant:\n%s\ngot:\n%s", what, want, got)
	}
}

// TestDataPlane_keepsMetadata_e2e: files with other owners, setuid,
// setgid and sticky modes, hard links, FIFOs, device nodes, xattrs and
// ACLs, written into a privileged CT's rootfs and mount point volume
// on disk, survive snapshot -> change -> rollback, and vzdump -> restore
// to a new VMID, over the API (HTTPS). (An unprivileged CT's ids are
// shifted on disk: guest.TestDataPlane_unprivilegedIDs.)
func TestDataPlane_keepsMetadata_e2e(t *testing.T) {
	t.Parallel()
	k := newBkKit(t)
	k.create(k.root(), "301", url.Values{"rootfs": {"local-lvm:4"}, "mp0": {"local-lvm:1,mp=/srv/data,backup=1"}, "unprivileged": {"0"}})
	conf := k.config(301)
	rootVol, dataVol := volOf(conf["rootfs"]), volOf(conf["mp0"])
	rootDir, dataDir := k.volumeDir(rootVol), k.volumeDir(dataVol)
	meta := filepath.Join(rootDir, "meta")
	if err := os.Mkdir(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	fstree.Build(t, meta, fstree.Sample())
	fstree.Build(t, dataDir, fstree.Sample())
	wantRoot, wantData := listTree(t, rootDir), listTree(t, dataDir)
	for _, must := range []string{"meta/suid file 4755 0:0", "meta/tmp dir 1777 0:0", "meta/hard-b file 0644 1000:100", "same-as=meta/hard-a",
		"meta/fifo fifo 0620 1000:5", "meta/null char 0666 0:0", "dev=1:3", "user.note=68656c6c6f", "system.posix_acl_access="} {
		if !strings.Contains(wantRoot, must) {
			t.Fatalf("the sample tree lacks %q:\n%s", must, wantRoot)
		}
	}

	// snapshot -> change -> rollback
	k.mustOK(k.op(), http.MethodPost, "/nodes/pve/lxc/301/snapshot", url.Values{"snapname": {"before"}})
	for _, p := range []string{meta, dataDir} {
		if err := os.Remove(filepath.Join(p, "fifo")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(p, "private"), 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := unix.Chmod(filepath.Join(p, "tmp"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "new"), []byte("after the snapshot"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if listTree(t, rootDir) == wantRoot {
		t.Fatal("the change did not change the listing")
	}
	k.mustOK(k.op(), http.MethodPost, "/nodes/pve/lxc/301/snapshot/before/rollback", nil)
	sameListing(t, "rootfs after rollback", wantRoot, listTree(t, rootDir))
	sameListing(t, "mount point after rollback", wantData, listTree(t, dataDir))

	// vzdump -> restore to a new VMID
	k.mustOK(k.op(), http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"301"}, "storage": {"local"}, "mode": {"stop"}, "compress": {"zstd"}})
	var content []map[string]any
	k.ok(k.op(), http.MethodGet, "/nodes/pve/storage/local/content", url.Values{"content": {"backup"}}, &content)
	if len(content) != 1 {
		t.Fatalf("backups: %v", content)
	}
	backup, _ := content[0]["volid"].(string)
	k.mustOK(k.root(), http.MethodPost, "/nodes/pve/lxc", url.Values{"vmid": {"302"}, "ostemplate": {backup}, "restore": {"1"},
		"storage": {"local-lvm"}, "unprivileged": {"0"}})
	conf2 := k.config(302)
	rootDir2, dataDir2 := k.volumeDir(volOf(conf2["rootfs"])), k.volumeDir(volOf(conf2["mp0"]))
	// etc/ changed with restore's removal of etc/vzdump, as on PVE.
	sameListing(t, "restored rootfs", listTree(t, rootDir, "etc"), listTree(t, rootDir2, "etc"))
	sameListing(t, "restored mount point", wantData, listTree(t, dataDir2))
}
