package model

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// taskLogVarying are the parts of a task log that change from run to
// run: transfer rates (they divide by the wall-clock time) and the
// fingerprints of random host keys.
var taskLogVarying = regexp.MustCompile(`[0-9.]+ ?[KMGT]?i?B/s\)|SHA256:[A-Za-z0-9+/]+`)

// wantTaskLog compares task's whole log with testdata/tasklogs/name.log
// (rates blanked), so a restructured task runner must log the same
// lines in the same order. -update rewrites the file.
func wantTaskLog(t *testing.T, name string, task Task) {
	t.Helper()
	got := taskLogVarying.ReplaceAllStringFunc(strings.Join(task.Log, "\n"), func(m string) string {
		if strings.HasSuffix(m, ")") {
			return "<varies>)"
		}
		return "<varies>"
	}) + "\nexit: " + task.ExitStatus + "\n"
	path := filepath.Join("testdata", "tasklogs", name+".log")
	testenv.Golden(t, path, []byte(got))
}

// TestTaskLogs_golden pins the whole log of the long tasks (create,
// backup in each mode and failing, restore in both mount modes and
// failing), one golden file each.
func TestTaskLogs_golden(t *testing.T) {
	t.Parallel()
	t.Run("create", func(t *testing.T) {
		k := newBackupKit(t)
		task := ctTestCreate(k, kitOperator, map[string]string{
			"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:8", "hostname": "web",
			"net0": "name=eth0,bridge=vmbr0,ip=dhcp", "start": "1",
		})
		wantTaskLog(t, "create", task)
	})
	t.Run("create-fails", func(t *testing.T) {
		k := newBackupKit(t)
		task := ctTestCreate(k, kitOperator, map[string]string{
			"vmid": "105", "ostemplate": "local:vztmpl/missing.tar.zst", "rootfs": "local-lvm:8",
		})
		wantTaskLog(t, "create-fails", task)
	})
	for _, tc := range []struct {
		name    string
		running bool
		params  map[string]string
	}{
		{"vzdump-snapshot", true, map[string]string{"mode": "snapshot", "compress": "zstd", "notes-template": `{{guestname}} ({{vmid}})`, "protected": "1"}},
		{"vzdump-stop", true, map[string]string{"mode": "stop", "compress": "gzip", "remove": "1", "prune-backups": "keep-last=1"}},
		{"vzdump-suspend", true, map[string]string{"mode": "suspend"}},
		{"vzdump-stopped", false, map[string]string{"mode": "snapshot"}},
		{"vzdump-lzo", true, map[string]string{"mode": "snapshot", "compress": "lzo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newBackupKit(t)
			backupCT(k, 101, tc.running)
			params := map[string]string{"vmid": "101", "storage": "local"}
			for key, v := range tc.params {
				params[key] = v
			}
			wantTaskLog(t, tc.name, k.run(k.c.Vzdump(kitOperator, "pve", params)))
		})
	}
	t.Run("restore", func(t *testing.T) {
		k := newBackupKit(t)
		restoreNoBind(k, 101)
		archive := backupOf(k, 101)
		wantTaskLog(t, "restore-storage", ctTestCreate(k, kitOperator, map[string]string{"vmid": "102", "ostemplate": archive, "restore": "1", "storage": "local-lvm", "start": "1"}))
		wantTaskLog(t, "restore-mounts", ctTestCreate(k, kitOperator, map[string]string{"vmid": "103", "ostemplate": archive, "restore": "1", "storage": "local-lvm", "rootfs": "local-lvm:4"}))
		k.edit(101, func(g *Guest) { k.c.markStoppedLocked(g) })
		wantTaskLog(t, "restore-over", ctTestCreate(k, kitOperator, map[string]string{"vmid": "101", "ostemplate": archive, "restore": "1", "storage": "local-lvm", "force": "1"}))
		// A bind mount point in the backup: only root may restore it.
		backupCT(k, 106, false)
		archive = backupOf(k, 106)
		wantTaskLog(t, "restore-fails", ctTestCreate(k, kitOperator, map[string]string{"vmid": "107", "ostemplate": archive, "restore": "1", "storage": "local-lvm"}))
	})
}
