package sim

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/corralhq/corral/internal/sim/model"
)

// bkKit is the end-to-end kit (e2e_kit_test.go) with the backup tests'
// helpers.
type bkKit struct{ *e2e }

func newBkKit(t *testing.T) *bkKit { return &bkKit{newE2E(t)} }

// volFile reads a file inside a volume on node pve ("" when absent).
func (k *bkKit) volFile(volid, name string) string {
	k.t.Helper()
	b, err := os.ReadFile(filepath.Join(k.volumeDir(volid), name))
	if err != nil {
		return ""
	}
	return string(b)
}

func (k *bkKit) writeVolFile(volid, name, body string) {
	k.t.Helper()
	dir := k.volumeDir(volid)
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
		k.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// config is GET config of CT vmid.
func (k *bkKit) config(vmid int) map[string]any {
	k.t.Helper()
	var conf map[string]any
	k.ok(k.op(), http.MethodGet, fmt.Sprintf("/nodes/pve/lxc/%d/config", vmid), nil, &conf)
	return conf
}

func volOf(v any) string {
	s, _ := v.(string)
	vol, _, _ := strings.Cut(s, ",")
	return vol
}

// makeApp creates CT vmid from the template with a backed-up volume at
// /data and a backup=0 volume at /scratch, and puts a file in each.
func (k *bkKit) makeApp(vmid int) (rootfs, data, scratch string) {
	k.t.Helper()
	id := fmt.Sprint(vmid)
	task := k.task(k.op(), http.MethodPost, "/nodes/pve/lxc", url.Values{
		"vmid": {id}, "ostemplate": {model.DefaultTemplate}, "rootfs": {"local-lvm:4"}, "hostname": {"app"},
		"net0": {"name=eth0,bridge=vmbr0,ip=dhcp"}, "features": {"nesting=1"},
		"mp0": {"local-lvm:1,mp=/data,backup=1"}, "mp1": {"local-lvm:1,mp=/scratch,backup=0"},
	})
	if !strings.HasPrefix(task.ExitStatus, "OK") && !strings.HasPrefix(task.ExitStatus, "WARNINGS") {
		k.t.Fatalf("create: %q", task.ExitStatus)
	}
	conf := k.config(vmid)
	rootfs, data, scratch = volOf(conf["rootfs"]), volOf(conf["mp0"]), volOf(conf["mp1"])
	k.writeVolFile(rootfs, "root/notes.txt", "in the rootfs\n")
	k.writeVolFile(data, "pg/row", "sentinel\n")
	k.writeVolFile(scratch, "cache.bin", "bulk\n")
	return rootfs, data, scratch
}

func TestBackup_roundTrip(t *testing.T) {
	t.Parallel()
	k := newBkKit(t)
	_, _, _ = k.makeApp(101)
	orig := k.config(101)

	task := k.task(k.op(), http.MethodPost, "/nodes/pve/vzdump", url.Values{
		"vmid": {"101"}, "storage": {"local"}, "mode": {"snapshot"}, "compress": {"zstd"},
		"notes-template": {"{{guestname}}"},
	})
	if task.ExitStatus != "OK" || task.Type != "vzdump" || task.ID != "101" {
		t.Fatalf("vzdump: %s %s %q\n%s", task.Type, task.ID, task.ExitStatus, strings.Join(task.log, "\n"))
	}
	for _, line := range []string{"INFO: Starting Backup of VM 101 (lxc)", "INFO: excluding volume mount point mp1 ('/scratch') from backup (disabled)",
		"INFO: including mount point mp0 ('/data') in backup", "INFO: Backup job finished successfully"} {
		if !task.has(line) {
			t.Errorf("task log lacks %q", line)
		}
	}

	// The archive in the storage listing, with PVE's fields.
	var content []map[string]any
	k.ok(k.op(), http.MethodGet, "/nodes/pve/storage/local/content", url.Values{"content": {"backup"}}, &content)
	if len(content) != 1 {
		t.Fatalf("backups: %v", content)
	}
	b := content[0]
	volid, _ := b["volid"].(string)
	if !strings.HasPrefix(volid, "local:backup/vzdump-lxc-101-") || !strings.HasSuffix(volid, ".tar.zst") ||
		b["subtype"] != "lxc" || b["vmid"] != float64(101) || b["notes"] != "app" || b["format"] != "tar.zst" || b["content"] != "backup" {
		t.Errorf("content entry = %v", b)
	}
	if _, ok := b["ctime"].(float64); !ok {
		t.Errorf("ctime = %#v, want a number", b["ctime"])
	}
	size, _ := b["size"].(float64)

	// The archive on disk: the config and what vzdump includes.
	path, err := k.srv.Cluster().VolumePath("pve", volid)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || float64(fi.Size()) != size {
		t.Fatalf("archive file: %v, size %v", err, size)
	}
	names := bkArchiveNames(t, path)
	for _, want := range []string{"./etc/vzdump/pct.conf", "./root/notes.txt", "./data/pg/row", "./etc/os-release"} {
		if !slices.Contains(names, want) {
			t.Errorf("archive lacks %s", want)
		}
	}
	for _, n := range names {
		if strings.HasPrefix(n, "./scratch/") {
			t.Errorf("archive holds the backup=0 volume's %s", n)
		}
	}
	var conf string
	k.ok(k.op(), http.MethodGet, "/nodes/pve/vzdump/extractconfig", url.Values{"volume": {volid}}, &conf)
	if !strings.Contains(conf, "hostname: app\n") || !strings.Contains(conf, "mp0: ") {
		t.Errorf("extractconfig = %q", conf)
	}

	// Destroy the app, then restore it under its old VMID.
	if task := k.task(k.op(), http.MethodDelete, "/nodes/pve/lxc/101", nil); task.ExitStatus != "OK" {
		t.Fatalf("destroy: %q", task.ExitStatus)
	}
	task = k.task(k.op(), http.MethodPost, "/nodes/pve/lxc", url.Values{
		"vmid": {"101"}, "ostemplate": {volid}, "restore": {"1"}, "storage": {"local-lvm"}, "unique": {"1"},
	})
	if task.ExitStatus != "OK" || task.Type != "vzrestore" {
		t.Fatalf("restore: %q\n%s", task.ExitStatus, strings.Join(task.log, "\n"))
	}
	got := k.config(101)
	if got["hostname"] != "app" || got["features"] != orig["features"] || got["unprivileged"] != orig["unprivileged"] {
		t.Errorf("restored config %v, want the original's hostname/features", got)
	}
	if got["net0"] == orig["net0"] {
		t.Errorf("unique=1 kept the MAC: %v", got["net0"])
	}
	if k.volFile(volOf(got["rootfs"]), "root/notes.txt") != "in the rootfs\n" {
		t.Error("rootfs file not restored")
	}
	if k.volFile(volOf(got["mp0"]), "pg/row") != "sentinel\n" {
		t.Error("backup=1 volume file not restored")
	}
	if k.volFile(volOf(got["mp1"]), "cache.bin") != "" {
		t.Error("backup=0 volume came back with data")
	}
}

func bkArchiveNames(t *testing.T, path string) []string {
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
	var names []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// limitedToken makes user id with a privsep=0 token holding privs on /
// and returns a caller with that token.
func (k *bkKit) limitedToken(id string, privs ...string) e2eCaller {
	k.t.Helper()
	role := "Role" + strings.NewReplacer("@", "", ".", "").Replace(id)
	k.ok(k.root(), http.MethodPost, "/access/roles", url.Values{"roleid": {role}, "privs": {strings.Join(privs, ",")}}, nil)
	_, who := k.newUserToken(id, "tok", false)
	k.ok(k.root(), http.MethodPut, "/access/acl", url.Values{"path": {"/"}, "roles": {role}, "users": {id}}, nil)
	return who
}

func TestBackup_permissions(t *testing.T) {
	t.Parallel()
	k := newBkKit(t)
	k.makeApp(101)
	// Seed 004 §3.4: the minimal self-backup role, scoped to all guests here.
	self := k.limitedToken("self@pve", "VM.Audit", "VM.Snapshot", "VM.Backup", "Datastore.AllocateSpace", "Datastore.Audit")
	audit := k.limitedToken("audit@pve", "VM.Audit", "Datastore.AllocateSpace", "Datastore.Audit")

	if task := k.task(self, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"101"}, "storage": {"local"}, "mode": {"stop"}, "compress": {"zstd"}}); task.ExitStatus != "OK" {
		t.Errorf("self-backup with the minimal role: %q", task.ExitStatus)
	}
	// Seed 004 §3.5: HTTP 200 and a UPID, then the task fails with 403.
	task := k.task(audit, http.MethodPost, "/nodes/pve/vzdump", url.Values{"vmid": {"101"}, "storage": {"local"}, "compress": {"zstd"}})
	if task.ExitStatus != "403 Permission check failed (/vms/101, VM.Backup)" {
		t.Errorf("backup without VM.Backup: %q", task.ExitStatus)
	}
	var content []map[string]any
	k.ok(k.op(), http.MethodGet, "/nodes/pve/storage/local/content", url.Values{"content": {"backup"}}, &content)
	if len(content) != 1 {
		t.Errorf("backups after one good and one refused backup: %d", len(content))
	}
	volid, _ := content[0]["volid"].(string)

	for _, tc := range []struct {
		name   string
		token  e2eCaller
		params url.Values
		status int
		want   string
	}{
		{"root-only tmpdir", k.op(), url.Values{"vmid": {"101"}, "tmpdir": {"/tmp"}}, 400, "Only root may set this option."},
		{"prune needs Datastore.Allocate", self, url.Values{"vmid": {"101"}, "prune-backups": {"keep-last=1"}}, 403,
			"Permission check failed (/storage/local, Datastore.Allocate)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.do(tc.token, http.MethodPost, "/nodes/pve/vzdump", tc.params)
			if r.status != tc.status || !strings.Contains(r.msg+fmt.Sprint(r.errs), tc.want) {
				t.Errorf("got %d %q %v, want %d %q", r.status, r.msg, r.errs, tc.status, tc.want)
			}
		})
	}

	// Restoring needs VM.Allocate (a new VMID), or VM.Backup to overwrite
	// an existing CT with force.
	r := k.do(self, http.MethodPost, "/nodes/pve/lxc", url.Values{"vmid": {"150"}, "ostemplate": {volid}, "restore": {"1"}, "storage": {"local-lvm"}})
	if r.status != http.StatusForbidden {
		t.Errorf("restore into a new VMID without VM.Allocate: %d %q", r.status, r.msg)
	}
	restore := url.Values{"vmid": {"101"}, "ostemplate": {volid}, "restore": {"1"}, "force": {"1"}, "storage": {"local-lvm"}}
	// The backed-up NIC needs its bridge: the backup-only role cannot
	// restore, the task says why.
	if task := k.task(self, http.MethodPost, "/nodes/pve/lxc", restore); task.ExitStatus != "unable to restore CT 101 - 403 Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)" {
		t.Errorf("forced restore without SDN.Use: %q", task.ExitStatus)
	}
	if conf := k.config(101); conf["lock"] != nil || conf["hostname"] != "app" {
		t.Errorf("a refused restore changed the CT: %v", conf)
	}
	restorer := k.limitedToken("restorer@pve", "VM.Audit", "VM.Backup", "Datastore.AllocateSpace", "Datastore.Audit", "SDN.Use")
	if task := k.task(restorer, http.MethodPost, "/nodes/pve/lxc", restore); task.ExitStatus != "OK" {
		t.Errorf("forced restore with VM.Backup: %q", task.ExitStatus)
	}
}

func TestSnapshot_http(t *testing.T) {
	t.Parallel()
	k := newBkKit(t)
	rootfs, data, _ := k.makeApp(101)
	if task := k.task(k.op(), http.MethodPost, "/nodes/pve/lxc/101/status/start", nil); task.ExitStatus != "OK" {
		t.Fatalf("start: %q", task.ExitStatus)
	}
	// mp1 is backup=0 but a snapshot covers every volume.
	task := k.task(k.op(), http.MethodPost, "/nodes/pve/lxc/101/snapshot", url.Values{"snapname": {"pre"}, "description": {"before upgrade"}})
	if task.ExitStatus != "OK" || task.Type != "vzsnapshot" {
		t.Fatalf("snapshot of a running CT: %q", task.ExitStatus)
	}
	var list []map[string]any
	k.ok(k.op(), http.MethodGet, "/nodes/pve/lxc/101/snapshot", nil, &list)
	if len(list) != 2 || list[0]["name"] != "pre" || list[0]["description"] != "before upgrade\n" || list[1]["name"] != "current" ||
		list[1]["parent"] != "pre" || list[1]["running"] != float64(1) {
		t.Errorf("snapshot list = %v", list)
	}
	if _, ok := list[0]["snaptime"].(float64); !ok {
		t.Errorf("snaptime = %#v", list[0]["snaptime"])
	}
	var sconf map[string]any
	k.ok(k.op(), http.MethodGet, "/nodes/pve/lxc/101/snapshot/pre/config", nil, &sconf)
	// parse_pct_config ends every description line in a newline (issue 14, item 4).
	if sconf["hostname"] != "app" || sconf["description"] != "before upgrade\n" {
		t.Errorf("snapshot config = %v", sconf)
	}
	k.ok(k.op(), http.MethodPut, "/nodes/pve/lxc/101/snapshot/pre/config", url.Values{"description": {"renamed"}}, nil)
	var idx []map[string]string
	k.ok(k.op(), http.MethodGet, "/nodes/pve/lxc/101/snapshot/pre", nil, &idx)
	if len(idx) != 2 {
		t.Errorf("snapshot index = %v", idx)
	}
	r := k.do(k.op(), http.MethodPost, "/nodes/pve/lxc/101/snapshot", url.Values{"snapname": {"vzdump"}})
	if r.status != http.StatusInternalServerError || r.msg != "unable to use snapshot name 'vzdump' (reserved name)\n" {
		t.Errorf("reserved name: %d %q", r.status, r.msg)
	}

	k.writeVolFile(rootfs, "root/notes.txt", "broken by the change\n")
	k.writeVolFile(data, "pg/row", "migrated\n")
	task = k.task(k.op(), http.MethodPost, "/nodes/pve/lxc/101/snapshot/pre/rollback", url.Values{"start": {"1"}})
	if task.ExitStatus != "OK" || task.Type != "vzrollback" {
		t.Fatalf("rollback: %q", task.ExitStatus)
	}
	if k.volFile(rootfs, "root/notes.txt") != "in the rootfs\n" || k.volFile(data, "pg/row") != "sentinel\n" {
		t.Error("rollback did not bring the files back")
	}
	var status map[string]any
	k.ok(k.op(), http.MethodGet, "/nodes/pve/lxc/101/status/current", nil, &status)
	if status["status"] != "running" {
		t.Errorf("after rollback with start=1: %v", status["status"])
	}

	// A volume with snapshots cannot be moved away.
	if task := k.task(k.op(), http.MethodPost, "/nodes/pve/lxc/101/status/stop", nil); task.ExitStatus != "OK" {
		t.Fatalf("stop: %q", task.ExitStatus)
	}
	r = k.do(k.op(), http.MethodPost, "/nodes/pve/lxc/101/move_volume", url.Values{"volume": {"mp0"}, "storage": {"local-lvm"}, "delete": {"1"}})
	if r.status != http.StatusInternalServerError || r.msg != "you can't move a volume with snapshots and delete the source\n" {
		t.Errorf("move with snapshots: %d %q", r.status, r.msg)
	}

	if task := k.task(k.op(), http.MethodDelete, "/nodes/pve/lxc/101/snapshot/pre", nil); task.ExitStatus != "OK" || task.Type != "vzdelsnapshot" {
		t.Errorf("delete snapshot: %q", task.ExitStatus)
	}
	k.ok(k.op(), http.MethodGet, "/nodes/pve/lxc/101/snapshot", nil, &list)
	if len(list) != 1 || list[0]["name"] != "current" {
		t.Errorf("after delete: %v", list)
	}
}
