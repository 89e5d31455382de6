package guest_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/internal/testutil/fstree"
)

// taskEnd runs a task-returning call and returns its exit status and log.
func (a *api) taskEnd(method, path string, form url.Values) (string, string) {
	a.t.Helper()
	upid, status := a.taskWait(method, path, form)
	var lines []struct{ T string }
	json.Unmarshal(a.do("GET", "/nodes/pve/tasks/"+url.PathEscape(upid)+"/log?limit=5000", nil), &lines)
	var log []string
	for _, l := range lines {
		log = append(log, l.T)
	}
	return status, strings.Join(log, "\n")
}

// volDir is the host directory of CT vmid's volume key (rootfs, mp0).
func (a *api) volDir(vmid int, key string) string {
	a.t.Helper()
	var conf map[string]any
	json.Unmarshal(a.do("GET", "/nodes/pve/lxc/"+strconv.Itoa(vmid)+"/config", nil), &conf)
	v, _ := conf[key].(string)
	volid, _, _ := strings.Cut(v, ",")
	dir, err := a.s.Cluster().VolumePath("pve", volid)
	if err != nil {
		a.t.Fatalf("CT %d %s = %q: %v", vmid, key, v, err)
	}
	return dir
}

// guestBuild makes, from inside the CT, files of other users with
// setuid, setgid and sticky modes, a hard link, a FIFO and a symlink in
// /srv/meta (rootfs) and /srv/data (mp0); uid 1000 writes one itself.
const guestBuild = `set -e
for d in /srv/meta /srv/data; do
  mkdir -p $d/shared && chown 1000:1000 $d/shared && chmod 2775 $d/shared
  echo hi > $d/shared/notes.txt && chown 1000:1000 $d/shared/notes.txt
  mkdir $d/tmp && chmod 1777 $d/tmp
  printf x > $d/suid && chmod 4755 $d/suid
  printf x > $d/sgid && chown 0:50 $d/sgid && chmod 2755 $d/sgid
  printf s > $d/private && chown 1000:1000 $d/private && chmod 600 $d/private
  printf h > $d/hard-a && chown 1000:100 $d/hard-a && ln $d/hard-a $d/hard-b
  mkfifo -m 620 $d/fifo && chown 1000:5 $d/fifo
  ln -s private $d/link && chown -h 1000:1000 $d/link
  setpriv --reuid 1000 --regid 1000 --clear-groups sh -c "echo mine > $d/tmp/by-1000"
done
echo built`

// guestList is what the CT itself sees of those files: type, mode and
// owner (hard links by their link count).
const guestList = `cd /srv && find meta data -printf '%p %y %m %U:%G %n\n' | LC_ALL=C sort`

// TestDataPlane_unprivilegedIDs: an unprivileged CT's files are shifted
// on disk (container root = host 100000) and keep their owners, modes,
// sticky bits, links and FIFOs, as the CT sees them and as they are on
// disk, through snapshot -> change -> rollback (ids unchanged on disk),
// vzdump (the archive holds container ids, a host id outside the map
// is 65534) -> restore into an unprivileged CT (shifted again) and into
// a privileged one (container ids on disk). A privileged CT's archive
// restored as unprivileged fails as on PVE (tar cannot make device
// nodes or owners outside the map) unless ignore-unpack-errors is set.
// All over the API, with the CTs' own shells over SSH.
func TestDataPlane_unprivilegedIDs(t *testing.T) {
	t.Parallel()
	zero := 0.0
	s, err := sim.New(sim.Options{Dir: t.TempDir(), Listener: sim.ListenNone, TimeScale: &zero, GuestSSHPort: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ok, why := s.Guests().UserNamespace(); !ok {
		testenv.Lackf(t, testenv.LXC, "unprivileged CTs get no user namespace here: %v", why)
	}
	a := &api{t: t, s: s, hc: s.HTTPClient(), token: s.Credentials().RootToken}
	signer, pub, err := client.NewKey("corral")
	if err != nil {
		t.Fatal(err)
	}
	dial := func(vmid int) *client.Client {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, a.endpoint(vmid), client.Config{User: "root", Signer: signer,
			HostKey: client.HostKeyPolicy{VMID: vmid, TrustOnFirstUse: true}, RetryMin: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	inGuest := func(vmid int, script string) string {
		t.Helper()
		out, err := run(t, dial(vmid), script)
		if err != nil {
			t.Fatalf("CT %d: %q: %v\n%s", vmid, script, err, out)
		}
		return out
	}
	ct := func(vmid string) string { return "/nodes/pve/lxc/" + vmid }
	a.task("POST", "/nodes/pve/lxc", url.Values{
		"vmid": {"150"}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:1"}, "mp0": {"local-lvm:1,mp=/srv/data,backup=1"},
		"net0": {"name=eth0,bridge=vmbr0,ip=dhcp"}, "ssh-public-keys": {pub}, "start": {"1"}, "features": {"nesting=1"},
	})
	if out := inGuest(150, guestBuild); out != "stdout: built" {
		t.Fatalf("build: %q", out)
	}
	root150, data150 := a.volDir(150, "rootfs"), a.volDir(150, "mp0")
	// A file the host gave an id outside the map (host root): nobody's
	// in the CT.
	if err := os.WriteFile(filepath.Join(data150, "outside"), []byte("o"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantGuest := inGuest(150, guestList)
	for _, must := range []string{"data/shared d 2775 1000:1000", "data/tmp d 1777 0:0", "data/suid f 4755 0:0", "data/sgid f 2755 0:50",
		"data/fifo p 620 1000:5", "data/hard-a f 644 1000:100 2", "data/link l 777 1000:1000", "data/tmp/by-1000 f 644 1000:1000", "data/outside f 644 65534:65534",
		"meta/shared/notes.txt f 644 1000:1000"} {
		if !strings.Contains(wantGuest, must) {
			t.Fatalf("the CT's listing lacks %q:\n%s", must, wantGuest)
		}
	}
	for p, want := range map[string]string{"shared": "101000:101000", "tmp": "100000:100000", "fifo": "101000:100005", "tmp/by-1000": "101000:101000", "sgid": "100000:100050", ".": "100000:100000"} {
		if got := owner(t, filepath.Join(data150, p)); got != want {
			t.Errorf("mp0 %s on disk: %s, want %s", p, got, want)
		}
		if got := owner(t, filepath.Join(root150, "srv", "meta", p)); got != want && p != "." {
			t.Errorf("rootfs srv/meta/%s on disk: %s, want %s", p, got, want)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(data150, "suid"), &st); err != nil || st.Mode&0o7777 != 0o4755 {
		t.Errorf("suid on disk: mode %o, %v", st.Mode&0o7777, err)
	}
	list := func(dir string) string {
		l, err := fstree.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(l, "\n")
	}
	wantMeta, wantData := list(filepath.Join(root150, "srv", "meta")), list(data150)

	// snapshot -> change -> rollback: block level, ids as they were.
	a.task("POST", ct("150")+"/snapshot", url.Values{"snapname": {"before"}})
	inGuest(150, "rm /srv/data/fifo /srv/meta/fifo && chmod 755 /srv/data/tmp && chown 0:0 /srv/meta/private && echo changed")
	a.task("POST", ct("150")+"/status/stop", nil)
	a.task("POST", ct("150")+"/snapshot/before/rollback", nil)
	if got := list(data150); got != wantData {
		t.Errorf("mp0 on disk after rollback:\n%s\nwant:\n%s", got, wantData)
	}
	if got := list(filepath.Join(root150, "srv", "meta")); got != wantMeta {
		t.Errorf("rootfs on disk after rollback:\n%s\nwant:\n%s", got, wantMeta)
	}
	a.task("POST", ct("150")+"/status/start", nil)
	if got := inGuest(150, guestList); got != wantGuest {
		t.Errorf("the CT's view after rollback:\n%s\nwant:\n%s", got, wantGuest)
	}

	// vzdump: the archive holds the CT's own ids.
	a.task("POST", "/nodes/pve/vzdump", url.Values{"vmid": {"150"}, "storage": {"local"}, "mode": {"stop"}, "compress": {"zstd"}})
	var content []struct{ Volid string }
	json.Unmarshal(a.do("GET", "/nodes/pve/storage/local/content?content=backup", nil), &content)
	if len(content) != 1 {
		t.Fatalf("backups: %+v", content)
	}
	backup := content[0].Volid
	archive, err := s.Cluster().VolumePath("pve", backup)
	if err != nil {
		t.Fatal(err)
	}
	owners := archiveOwners(t, archive)
	for name, want := range map[string]string{"./srv/data/shared/": "1000:1000", "./srv/data/fifo": "1000:5", "./srv/data/outside": "65534:65534",
		"./srv/meta/tmp/": "0:0", "./srv/data/sgid": "0:50", "./root/.ssh/authorized_keys": "0:0"} {
		if got := owners[name]; got != want {
			t.Errorf("archive %s: owner %q, want %q", name, got, want)
		}
	}

	// restore into an unprivileged CT: shifted again; the CT sees the
	// same; the file from outside the map is now nobody's on disk too.
	a.task("POST", "/nodes/pve/lxc", url.Values{"vmid": {"151"}, "ostemplate": {backup}, "restore": {"1"}, "storage": {"local-lvm"}, "start": {"1"}})
	if got := inGuest(151, guestList); got != wantGuest {
		t.Errorf("the unprivileged restore's view:\n%s\nwant:\n%s", got, wantGuest)
	}
	data151 := a.volDir(151, "mp0")
	if got, want := list(data151), strings.Replace(wantData, "outside file 0644 0:0", "outside file 0644 165534:165534", 1); got != want {
		t.Errorf("the unprivileged restore's mp0 on disk:\n%s\nwant:\n%s", got, want)
	}

	// restore into a privileged CT: container ids on disk, the same view.
	a.task("POST", "/nodes/pve/lxc", url.Values{"vmid": {"152"}, "ostemplate": {backup}, "restore": {"1"}, "storage": {"local-lvm"}, "unprivileged": {"0"}, "start": {"1"}})
	if got := inGuest(152, guestList); got != wantGuest {
		t.Errorf("the privileged restore's view:\n%s\nwant:\n%s", got, wantGuest)
	}
	data152 := a.volDir(152, "mp0")
	for p, want := range map[string]string{"shared": "1000:1000", "tmp": "0:0", "fifo": "1000:5", "outside": "65534:65534"} {
		if got := owner(t, filepath.Join(data152, p)); got != want {
			t.Errorf("the privileged restore's mp0 %s on disk: %s, want %s", p, got, want)
		}
	}

	// A privileged CT's archive with a device node and an owner outside
	// the map, restored as unprivileged.
	a.task("POST", ct("152")+"/status/stop", nil)
	if err := unix.Mknod(filepath.Join(data152, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(data152, "private"), 70000, 70000); err != nil {
		t.Fatal(err)
	}
	a.task("POST", "/nodes/pve/vzdump", url.Values{"vmid": {"152"}, "storage": {"local"}, "mode": {"stop"}, "compress": {"zstd"}})
	json.Unmarshal(a.do("GET", "/nodes/pve/storage/local/content?content=backup&vmid=152", nil), &content)
	if len(content) != 1 {
		t.Fatalf("backups of 152: %+v", content)
	}
	status, log := a.taskEnd("POST", "/nodes/pve/lxc", url.Values{"vmid": {"153"}, "ostemplate": {content[0].Volid}, "restore": {"1"}, "storage": {"local-lvm"}, "unprivileged": {"1"}})
	for _, want := range []string{"tar: ./srv/data/null: Cannot mknod: Operation not permitted",
		"tar: ./srv/data/private: Cannot change ownership to uid 70000, gid 70000: Invalid argument", "tar: Exiting with failure status due to previous errors"} {
		if !strings.Contains(log, want) {
			t.Errorf("restore of a privileged archive as unprivileged: log lacks %q:\n%s", want, log)
		}
	}
	if !strings.HasPrefix(status, "unable to restore CT 153 - command 'lxc-usernsexec -m u:0:100000:65536 -m g:0:100000:65536 -- tar xpf - --zstd") || !strings.HasSuffix(status, "failed: exit code 2") {
		t.Errorf("restore of a privileged archive as unprivileged: %q, want tar's exit code 2", status)
	}
	a.task("POST", "/nodes/pve/lxc", url.Values{"vmid": {"153"}, "ostemplate": {content[0].Volid}, "restore": {"1"}, "storage": {"local-lvm"}, "unprivileged": {"1"}, "ignore-unpack-errors": {"1"}})
	data153 := a.volDir(153, "mp0")
	if _, err := os.Lstat(filepath.Join(data153, "null")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the device node: %v, want none (tar in the user namespace cannot make it)", err)
	}
	for p, want := range map[string]string{"private": "100000:100000", "shared": "101000:101000", "outside": "165534:165534"} {
		if got := owner(t, filepath.Join(data153, p)); got != want {
			t.Errorf("ignore-unpack-errors restore: mp0 %s on disk: %s, want %s", p, got, want)
		}
	}
}

// archiveOwners maps each entry of a .tar.zst to its uid:gid.
func archiveOwners(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = strconv.Itoa(h.Uid) + ":" + strconv.Itoa(h.Gid)
	}
}
