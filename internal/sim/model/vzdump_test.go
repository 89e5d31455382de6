package model

import (
	"archive/tar"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/corralhq/corral/internal/testenv"
)

// newBackupKit is an opsKit whose clock moves one second per reading, so
// that every backup gets its own archive name.
func newBackupKit(t *testing.T) *opsKit {
	t.Helper()
	var tick atomic.Int64
	base := time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)
	return newOpsKitWith(t, Options{Now: func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }})
}

// backupCT makes CT vmid with a file in its rootfs, a backed-up volume
// mount point (/data), one excluded with backup=0 (/scratch) and a bind
// mount (/host), and returns the volids of mp0 and mp1.
func backupCT(k *opsKit, vmid int, running bool) (mp0, mp1 string) {
	k.t.Helper()
	k.ct("pve", vmid, map[string]string{"features": "nesting=1,keyctl=1", "hostname": "app"})
	mp0, mp1 = k.vol("pve", vmid, 2*gib), k.vol("pve", vmid, 1*gib)
	k.edit(vmid, func(g *Guest) {
		g.Config["mp0"] = mp0 + ",mp=/data,backup=1,size=2G"
		g.Config["mp1"] = mp1 + ",mp=/scratch,backup=0,size=1G"
		g.Config["mp2"] = "/srv/host,mp=/host"
		if running {
			k.c.markRunningLocked(g)
		}
	})
	g := k.guest(vmid)
	rootfs := volumeOf("rootfs", g.Config["rootfs"])
	k.writeFile("pve", rootfs, "etc/os-release", "ID=debian\n")
	k.writeFile("pve", rootfs, "root/before.txt", "rootfs before\n")
	k.writeFile("pve", mp0, "db/row.txt", "sentinel row\n")
	k.writeFile("pve", mp1, "bulk.bin", "bulk data\n")
	return mp0, mp1
}

// archiveEntries reads a backup archive: entry name → body (directories
// with an empty body).
func archiveEntries(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open archive: %v", err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatalf("archive is not zstd: %v", err)
	}
	defer zr.Close()
	out := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// onlyBackup returns the single backup of vmid on local.
func onlyBackup(k *opsKit, vmid int) ContentEntry {
	k.t.Helper()
	list, err := k.c.Content("pve", "local", "backup", vmid)
	if err != nil {
		k.t.Fatal(err)
	}
	if len(list) != 1 {
		k.t.Fatalf("backups of %d: %d, want 1: %+v", vmid, len(list), list)
	}
	return list[0]
}

func TestCluster_Vzdump_snapshotMode(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	backupCT(k, 101, true)
	pid := k.guest(101).PID
	task := k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{
		"vmid": "101", "storage": "local", "mode": "snapshot", "compress": "zstd",
		"notes-template": `{{guestname}} ({{vmid}})\nby corral`, "remove": "0",
	}))
	if task.ExitStatus != "OK" || task.Type != "vzdump" || task.ID != "101" {
		t.Fatalf("task %s %s = %q\n%s", task.Type, task.ID, task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	for _, line := range []string{
		"INFO: Starting Backup of VM 101 (lxc)",
		"INFO: status = running",
		"INFO: CT Name: app",
		"INFO: including mount point rootfs ('/') in backup",
		"INFO: including mount point mp0 ('/data') in backup",
		"INFO: excluding volume mount point mp1 ('/scratch') from backup (disabled)",
		"INFO: excluding bind mount point mp2 ('/host') from backup (not a volume)",
		"INFO: backup mode: snapshot",
		"INFO: create storage snapshot 'vzdump'",
		`  Logical volume "snap_vm-101-disk-0_vzdump" created.`,
		"INFO: adding notes to backup",
		"INFO: cleanup temporary 'vzdump' snapshot",
		"INFO: Backup job finished successfully",
	} {
		ctTestHasLine(t, task, line)
	}
	b := onlyBackup(k, 101)
	if !regexpMatch(`^local:backup/vzdump-lxc-101-\d{4}_\d\d_\d\d-\d\d_\d\d_\d\d\.tar\.zst$`, b.VolID()) {
		t.Errorf("volid = %s", b.VolID())
	}
	if b.Format != "tar.zst" || b.Owner != 101 || b.Size <= 0 || b.Notes != "app (101)\nby corral" || b.Protected {
		t.Errorf("backup entry = %+v", b.Volume)
	}
	path := k.c.storage.volumePath("pve", "local", b.Name)
	if notes, err := os.ReadFile(path + ".notes"); err != nil || string(notes) != b.Notes {
		t.Errorf("notes file = %q, %v", notes, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != b.Size {
		t.Fatalf("archive on disk: %v (size %d)", err, b.Size)
	}
	entries := archiveEntries(t, path)
	conf := entries["./etc/vzdump/pct.conf"]
	for _, want := range []string{"hostname: app\n", "features: nesting=1,keyctl=1\n", "mp0: ", "hwaddr=BC:24:11:5E:7A:01"} {
		if !strings.Contains(conf, want) {
			t.Errorf("pct.conf lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "lock:") || strings.Contains(conf, "[vzdump]") {
		t.Errorf("pct.conf holds the lock or the vzdump snapshot:\n%s", conf)
	}
	if _, ok := entries["./etc/vzdump/pct.fw"]; !ok {
		t.Error("archive lacks ./etc/vzdump/pct.fw")
	}
	if entries["./root/before.txt"] != "rootfs before\n" || entries["./data/db/row.txt"] != "sentinel row\n" {
		t.Errorf("archive lacks rootfs or mp0 data: %v", slices.Sorted(mapKeys(entries)))
	}
	for name := range entries {
		if strings.HasPrefix(name, "./scratch/") || strings.HasPrefix(name, "./host") {
			t.Errorf("archive holds excluded %s", name)
		}
	}
	// After the backup: unlocked, still running with the same PID, no
	// leftover snapshot.
	g := k.guest(101)
	if g.Lock() != "" || !g.Running || g.PID != pid || len(g.Snapshots) != 0 {
		t.Errorf("after backup: lock %q running %v pid %d→%d snapshots %v", g.Lock(), g.Running, pid, g.PID, g.Snapshots)
	}
	if v := k.volume("pve", volumeOf("rootfs", g.Config["rootfs"])); len(v.Snapshots) != 0 {
		t.Errorf("rootfs keeps snapshots %v", v.Snapshots)
	}
	if conf, err := k.c.ExtractConfig(kitOperator, "pve", b.VolID()); err != nil || conf != entries["./etc/vzdump/pct.conf"] {
		t.Errorf("ExtractConfig = %q, %v", conf, err)
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestCluster_Vzdump_stopMode(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	backupCT(k, 101, true)
	pid := k.guest(101).PID
	task := k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "mode": "stop", "compress": "zstd"}))
	if task.ExitStatus != "OK" {
		t.Fatalf("exit %q\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	for _, line := range []string{"INFO: backup mode: stop", "INFO: stopping virtual guest", "INFO: restarting vm",
		"INFO: prune older backups with retention: keep-all=1", "INFO: pruned 0 backup(s)"} {
		ctTestHasLine(t, task, line)
	}
	// Stop mode prepares (logs the mount points) after it logs the mode.
	if m, n := slices.Index(task.Log, "INFO: backup mode: stop"), slices.Index(task.Log, "INFO: CT Name: app"); m < 0 || n < m {
		t.Errorf("stop mode: mode at line %d, CT Name at %d", m, n)
	}
	if g := k.guest(101); !g.Running || g.PID == pid || g.Lock() != "" {
		t.Errorf("after stop-mode backup: running %v pid %d (was %d) lock %q", g.Running, g.PID, pid, g.Lock())
	}
	b := onlyBackup(k, 101)
	if entries := archiveEntries(t, k.c.storage.volumePath("pve", "local", b.Name)); entries["./data/db/row.txt"] != "sentinel row\n" {
		t.Error("stop-mode archive lacks the mp0 data")
	}
	// A stopped CT is always backed up in stop mode, and stays stopped.
	k.edit(101, k.c.markStoppedLocked)
	task = k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "mode": "snapshot", "compress": "zstd"}))
	ctTestHasLine(t, task, "INFO: backup mode: stop")
	if slices.Contains(task.Log, "INFO: stopping virtual guest") || k.guest(101).Running {
		t.Error("a stopped CT was stopped or started by its backup")
	}
}

func TestCluster_Vzdump_lockWhileRunning(t *testing.T) {
	t.Parallel()
	k := newOpsKitWith(t, Options{TimeScale: 1, HasTimeScale: true, Durations: map[string]time.Duration{"vzdump": 600 * time.Millisecond}})
	backupCT(k, 101, false)
	upid, err := k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "compress": "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the CT's lock 'backup'", func() bool { return k.guest(101).Config["lock"] == "backup" })
	if err := k.c.UpdateCTConfig(kitOperator, "pve", 101, map[string]string{"cores": "2"}); err == nil || !strings.Contains(err.Error(), "CT is locked (backup)") {
		t.Errorf("PUT config during backup: %v", err)
	}
	if task := k.wait("pve", upid); task.ExitStatus != "OK" {
		t.Fatalf("exit %q", task.ExitStatus)
	}
	if l := k.guest(101).Config["lock"]; l != "" {
		t.Errorf("lock after backup = %q", l)
	}
}

// TestCluster_Vzdump_interrupted: a backup stopped by the emulator's
// shutdown still unlocks the CT and drops its 'vzdump' snapshot, as
// vzdump's clean-up does after an interrupt.
func TestCluster_Vzdump_interrupted(t *testing.T) {
	t.Parallel() // waits out real task durations (or 3,000 saves): beside the others
	k := newOpsKitWith(t, Options{TimeScale: 1, HasTimeScale: true, Durations: map[string]time.Duration{"vzdump": time.Minute}})
	backupCT(k, 101, true)
	upid, err := k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "mode": "snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the backup's 'vzdump' snapshot", func() bool { return k.guest(101).Snapshots["vzdump"] != nil })
	k.c.Close()
	task, err := k.c.Task("pve", upid)
	if err != nil || task.Status != "stopped" {
		t.Fatalf("task after Close: %+v %v", task, err)
	}
	g := k.guest(101)
	if l := g.Config["lock"]; l != "" {
		t.Errorf("lock after an interrupted backup = %q", l)
	}
	if g.Snapshots["vzdump"] != nil {
		t.Error("the 'vzdump' snapshot survived an interrupted backup")
	}
}

func TestCluster_Vzdump_failures(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	backupCT(k, 101, false)
	k.ct("pve", 102, nil)
	noBackup := ctTestLimitedUser(k, "nobackup@pve", "VM.Backup")
	noAlloc := ctTestLimitedUser(k, "noalloc@pve", "Datastore.Allocate")
	noSpace := ctTestLimitedUser(k, "nospace@pve", "Datastore.AllocateSpace", "Datastore.Allocate")

	// Synchronous refusals.
	for _, tc := range []struct {
		name   string
		auth   Auth
		params map[string]string
		status int
		msg    string
	}{
		{"root-only", kitOperator, map[string]string{"vmid": "101", "tmpdir": "/tmp"}, http.StatusBadRequest, "Parameter verification failed."},
		{"no guests", kitOperator, map[string]string{"mode": "stop"}, http.StatusBadRequest, "Parameter verification failed."},
		{"all and vmid", kitOperator, map[string]string{"vmid": "101", "all": "1"}, http.StatusBadRequest, "Parameter verification failed."},
		{"prune-backups and maxfiles", kitOperator, map[string]string{"vmid": "101", "prune-backups": "keep-last=1", "maxfiles": "2"}, http.StatusBadRequest, "Parameter verification failed."},
		{"stdout", kitOperator, map[string]string{"vmid": "101", "stdout": "1"}, http.StatusBadRequest, "Parameter verification failed."},
		{"prune needs Datastore.Allocate", noAlloc, map[string]string{"vmid": "101", "prune-backups": "keep-last=1"}, http.StatusForbidden,
			"Permission check failed (/storage/local, Datastore.Allocate)\n"},
		{"storage needs AllocateSpace", noSpace, map[string]string{"vmid": "101", "storage": "local"}, http.StatusForbidden,
			"Permission check failed (/storage/local, Datastore.AllocateSpace)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.c.Vzdump(tc.auth, "pve", tc.params)
			var e *Error
			if !errors.As(err, &e) || e.Kind.Code() != tc.status || strings.TrimSpace(e.Message) != strings.TrimSpace(tc.msg) {
				t.Fatalf("err = %v, want %d %q", err, tc.status, tc.msg)
			}
		})
	}

	// Seed 004 §3.5: HTTP 200 with a UPID, then the task fails with 403
	// and leaves no archive.
	task := k.run(k.c.Vzdump(noBackup, "pve", map[string]string{"vmid": "101", "storage": "local"}))
	if task.ExitStatus != "403 Permission check failed (/vms/101, VM.Backup)" {
		t.Errorf("exit = %q", task.ExitStatus)
	}
	if list, _ := k.c.Content("pve", "local", "backup", 0); len(list) != 0 {
		t.Errorf("a refused backup left %v", list)
	}

	task = k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "storage": "local-lvm"}))
	if want := "could not get storage information for 'local-lvm': can't use storage 'local-lvm' for backups - wrong content type"; task.ExitStatus != want {
		t.Errorf("exit = %q, want %q", task.ExitStatus, want)
	}

	// A locked CT fails its own backup; the others of the job go on.
	k.edit(101, func(g *Guest) { g.Config["lock"] = "snapshot" })
	task = k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101,102", "compress": "zstd"}))
	if task.ExitStatus != "job errors" || task.ID != "" {
		t.Errorf("exit %q id %q", task.ExitStatus, task.ID)
	}
	ctTestHasLine(t, task, "ERROR: Backup of VM 101 failed - CT is locked (snapshot)")
	ctTestHasLine(t, task, "INFO: Backup job finished with errors")
	if k.guest(101).Config["lock"] != "snapshot" {
		t.Error("a failed backup changed another operation's lock")
	}
	onlyBackup(k, 102)
	if list, _ := k.c.Content("pve", "local", "backup", 101); len(list) != 0 {
		t.Errorf("the locked CT got a backup: %v", list)
	}
}

func TestCluster_Vzdump_prune(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	k.ct("pve", 101, nil)
	k.ct("pve", 102, nil)
	k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "102", "compress": "zstd"}))
	var names []string
	for i := 0; i < 3; i++ {
		task := k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "compress": "zstd", "prune-backups": "keep-last=2"}))
		if task.ExitStatus != "OK" {
			t.Fatalf("backup %d: %q", i, task.ExitStatus)
		}
		list, _ := k.c.Content("pve", "local", "backup", 101)
		names = append(names, list[len(list)-1].VolID())
		if i == 2 {
			ctTestHasLine(t, task, "INFO: prune older backups with retention: keep-last=2")
			ctTestHasLine(t, task, "INFO: removing backup '"+names[0]+"'")
			ctTestHasLine(t, task, "INFO: pruned 1 backup(s) not covered by keep-retention policy")
		}
	}
	list, _ := k.c.Content("pve", "local", "backup", 101)
	var got []string
	for _, e := range list {
		got = append(got, e.VolID())
	}
	if !slices.Equal(got, names[1:]) {
		t.Errorf("kept %v, want %v", got, names[1:])
	}
	if _, err := os.Stat(k.c.storage.volumePath("pve", "local", strings.TrimPrefix(names[0], "local:"))); !os.IsNotExist(err) {
		t.Errorf("pruned archive still on disk: %v", err)
	}
	onlyBackup(k, 102) // another guest's backups are never pruned

	// Without remove, a full retention refuses the backup.
	task := k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "prune-backups": "keep-last=2", "remove": "0"}))
	if task.ExitStatus != "job errors" {
		t.Errorf("exit %q", task.ExitStatus)
	}
	ctTestHasLine(t, task, "ERROR: Backup of VM 101 failed - There is a max backup limit of 2 enforced by the target storage or the vzdump parameters. Either increase the limit or delete old backups.")

	// protected marks the archive.
	k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "102", "compress": "zstd", "protected": "1"}))
	var prot int
	list, _ = k.c.Content("pve", "local", "backup", 102)
	for _, e := range list {
		if e.Protected {
			prot++
		}
	}
	if prot != 1 {
		t.Errorf("protected backups of 102: %d", prot)
	}
}

func TestCluster_Vzdump_suspendFallback(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	dirCT(k, 103, true)
	task := k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "103", "mode": "snapshot", "compress": "zstd"}))
	if task.ExitStatus != "OK" {
		t.Fatalf("exit %q\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	for _, line := range []string{"INFO: mode failure - some volumes do not support snapshots", "INFO: trying 'suspend' mode instead",
		"INFO: backup mode: suspend", "INFO: suspending guest", "INFO: resuming guest"} {
		ctTestHasLine(t, task, line)
	}
	// The suspend fallback prepares twice, as PVE does.
	names := 0
	for _, l := range task.Log {
		if l == "INFO: including mount point rootfs ('/') in backup" {
			names++
		}
	}
	if names != 2 {
		t.Errorf("rootfs inclusion logged %d times, want 2", names)
	}
	b := onlyBackup(k, 103)
	if entries := archiveEntries(t, k.c.storage.volumePath("pve", "local", b.Name)); entries["./root/on-dir.txt"] != "dir rootfs\n" {
		t.Errorf("archive of a dir-storage CT lacks its file")
	}
}

// dirCT makes CT vmid whose rootfs is a subvol on a dir storage "vzdir"
// that holds container directories (no snapshots).
func dirCT(k *opsKit, vmid int, running bool) string {
	k.t.Helper()
	k.c.mu.Lock()
	if k.c.st.storage("vzdir") == nil {
		k.c.st.Storages = append(k.c.st.Storages, &Storage{ID: "vzdir", Type: "dir", Content: []string{"rootdir", "images"}, Path: "/mnt/vzdir", Total: 10 * gib})
		k.c.markCore()
	}
	v, err := k.c.storage.allocVolumeLocked("pve", "vzdir", vmid, 0, "rootdir")
	k.c.mu.Unlock()
	if err != nil {
		k.t.Fatal(err)
	}
	k.ct("pve", vmid, nil)
	k.edit(vmid, func(g *Guest) {
		g.Config["rootfs"] = v.VolID() + ",size=0T"
		if running {
			k.c.markRunningLocked(g)
		}
	})
	k.writeFile("pve", v.VolID(), "root/on-dir.txt", "dir rootfs\n")
	return v.VolID()
}

func TestVzdumpFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int64
		want string
	}{{512, "0KB"}, {4096, "4KB"}, {5 * mib, "5MB"}, {934 * mib, "934MB"}, {3 * gib / 2, "1.50GB"}, {2048 * gib, "2.00TB"}} {
		if got := vzdumpFormatSize(tc.n); got != tc.want {
			t.Errorf("vzdumpFormatSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := vzdumpFormatTime(3723 * time.Second); got != "01:02:03" {
		t.Errorf("vzdumpFormatTime = %q", got)
	}
	k := newOpsKit(t)
	if _, err := k.c.vzdumpNotes("{{nope}}", 101, "pve", "x"); err == nil || !strings.Contains(err.Error(), "unknown variable 'nope'") {
		t.Errorf("unknown variable: %v", err)
	}
	if got, _ := k.c.vzdumpNotes(`{{node}}/{{vmid}} a\\b`, 101, "pve", ""); got != `pve/101 a\b` {
		t.Errorf("notes = %q", got)
	}
}

func TestPruneMark(t *testing.T) {
	t.Parallel()
	day := int64(24 * 3600)
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC).Unix()
	var group []*Volume
	for i := int64(0); i < 6; i++ { // two a day for three days, newest first
		group = append(group, &Volume{Storage: "local", Name: filepath.Join("backup", string(rune('a'+i))), Ctime: base - i/2*day - i%2*3600})
	}
	group[1].Protected = true
	marks := pruneMark(group, map[string]int{"keep-last": 1, "keep-daily": 2})
	var got []string
	for _, v := range group {
		got = append(got, marks[v])
	}
	// a: keep-last; b: protected; day 1 is covered by a, so keep-daily=2
	// keeps the newest of days 2 and 3 (c, e) and drops d and f.
	want := []string{"keep", "protected", "keep", "remove", "keep", "remove"}
	if !slices.Equal(got, want) {
		t.Errorf("marks = %v, want %v", got, want)
	}
}

func regexpMatch(pattern, s string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}

func TestCluster_Vzdump_compression(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	k.ct("pve", 101, nil)
	rootfs := volumeOf("rootfs", k.guest(101).Config["rootfs"])
	k.writeFile("pve", rootfs, "root/file.txt", "payload\n")
	for _, tc := range []struct {
		compress, suffix string
		magic            []byte
	}{
		{"gzip", ".tar.gz", []byte{0x1f, 0x8b}},
		{"0", ".tar", nil},
		{"zstd", ".tar.zst", []byte{0x28, 0xb5, 0x2f, 0xfd}},
	} {
		t.Run(tc.compress, func(t *testing.T) {
			task := k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "compress": tc.compress}))
			if task.ExitStatus != "OK" {
				t.Fatalf("exit %q", task.ExitStatus)
			}
			list, _ := k.c.Content("pve", "local", "backup", 101)
			b := list[len(list)-1]
			if !strings.HasSuffix(b.Name, tc.suffix) || b.Format != strings.TrimPrefix(tc.suffix, ".") {
				t.Fatalf("archive %s format %s", b.Name, b.Format)
			}
			data, err := os.ReadFile(k.c.storage.volumePath("pve", "local", b.Name))
			if err != nil || !bytesHasPrefix(data, tc.magic) {
				t.Fatalf("archive starts % x, want % x (%v)", data[:min(4, len(data))], tc.magic, err)
			}
			vmid := 200 + len(list)
			task = ctTestCreate(k, kitOperator, map[string]string{"vmid": strconv.Itoa(vmid), "ostemplate": b.VolID(), "restore": "1", "storage": "local-lvm"})
			if task.ExitStatus != "OK" {
				t.Fatalf("restore: %q", task.ExitStatus)
			}
			if got := readVolFile(k, volumeOf("rootfs", k.guest(vmid).Config["rootfs"]), "root/file.txt"); got != "payload\n" {
				t.Errorf("restored file = %q", got)
			}
		})
	}
	task := k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": "101", "compress": "lzo"}))
	if task.ExitStatus != "job errors" {
		t.Errorf("lzo: %q", task.ExitStatus)
	}
	ctTestHasLine(t, task, "ERROR: Backup of VM 101 failed - lzo compression is not implemented by this emulator - use zstd or gzip")
}

func bytesHasPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == string(prefix)
}

// A guest on another node: PVE exits silently with "OK" and no task;
// with several guests the task says which it skipped.
func TestCluster_Vzdump_otherNode(t *testing.T) {
	t.Parallel()
	k := newOpsKitWith(t, Options{Nodes: 2})
	k.ct("pve1", 101, nil)
	k.ct("pve2", 102, nil)
	if got, err := k.c.Vzdump(kitOperator, "pve1", map[string]string{"vmid": "102"}); got != "OK" || err != nil {
		t.Errorf("Vzdump of a guest on pve2 via pve1 = %q, %v", got, err)
	}
	task := k.run(k.c.Vzdump(kitOperator, "pve1", map[string]string{"vmid": "101,102", "compress": "zstd"}))
	if task.ExitStatus != "OK" || task.ID != "101" {
		t.Errorf("exit %q id %q", task.ExitStatus, task.ID)
	}
	ctTestHasLine(t, task, "INFO: skip external VMs: 102")
}
