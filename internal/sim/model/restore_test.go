package model

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// backupOf backs CT vmid up to local and returns the archive's volid.
func backupOf(k *opsKit, vmid int) string {
	k.t.Helper()
	task := k.run(k.c.Vzdump(kitOperator, "pve", map[string]string{"vmid": strconv.Itoa(vmid), "mode": "stop", "compress": "zstd", "storage": "local"}))
	if task.ExitStatus != "OK" {
		k.t.Fatalf("backup of %d: %q\n%s", vmid, task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	list, _ := k.c.Content("pve", "local", "backup", vmid)
	return list[len(list)-1].VolID()
}

// restoreNoBind is backupCT without the bind mount, which only root may
// restore.
func restoreNoBind(k *opsKit, vmid int) (mp0, mp1 string) {
	mp0, mp1 = backupCT(k, vmid, true)
	k.edit(vmid, func(g *Guest) { delete(g.Config, "mp2") })
	return mp0, mp1
}

func TestCluster_Restore_newVMID(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	restoreNoBind(k, 101)
	orig := k.guest(101)
	archive := backupOf(k, 101)

	task := ctTestCreate(k, kitOperator, map[string]string{"vmid": "102", "ostemplate": archive, "restore": "1", "storage": "local-lvm"})
	if task.ExitStatus != "OK" || task.Type != "vzrestore" || task.ID != "102" {
		t.Fatalf("restore: %s %q\n%s", task.Type, task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	for _, line := range []string{
		"recovering backed-up configuration from '" + archive + "'",
		"restoring '" + archive + "' now..",
		"merging backed-up and given configuration..",
	} {
		ctTestHasLine(t, task, line)
	}
	g := k.guest(102)
	for _, key := range []string{"hostname", "net0", "features", "unprivileged", "memory", "ostype"} {
		if g.Config[key] != orig.Config[key] {
			t.Errorf("%s = %q, want the backed-up %q", key, g.Config[key], orig.Config[key])
		}
	}
	if g.Running || g.Config["lock"] != "" {
		t.Errorf("restored CT running %v lock %q", g.Running, g.Config["lock"])
	}
	want := map[string]string{
		"rootfs": "local-lvm:vm-102-disk-0,size=8G",
		"mp0":    "local-lvm:vm-102-disk-1,mp=/data,backup=1,size=2G",
		"mp1":    "local-lvm:vm-102-disk-2,mp=/scratch,backup=0,size=1G",
	}
	for key, v := range want {
		if g.Config[key] != v {
			t.Errorf("%s = %q, want %q", key, g.Config[key], v)
		}
	}
	if got := readVolFile(k, "local-lvm:vm-102-disk-0", "root/before.txt"); got != "rootfs before\n" {
		t.Errorf("rootfs file = %q", got)
	}
	if got := readVolFile(k, "local-lvm:vm-102-disk-1", "db/row.txt"); got != "sentinel row\n" {
		t.Errorf("backup=1 volume file = %q", got)
	}
	if got := readVolFile(k, "local-lvm:vm-102-disk-2", "bulk.bin"); got != "" {
		t.Errorf("the backup=0 volume came back with data: %q", got)
	}
	if dir, _ := k.c.VolumePath("pve", "local-lvm:vm-102-disk-0"); dirExists(filepath.Join(dir, "etc", "vzdump")) {
		t.Error("etc/vzdump stayed in the restored rootfs")
	}
	// The original is untouched.
	if o := k.guest(101); !o.Running || o.Config["net0"] != orig.Config["net0"] {
		t.Errorf("original changed: %v", o.Config)
	}

	// unique=1: a new MAC, the rest kept.
	task = ctTestCreate(k, kitOperator, map[string]string{"vmid": "103", "ostemplate": archive, "restore": "1", "unique": "1", "storage": "local-lvm", "start": "1"})
	if task.ExitStatus != "OK" {
		t.Fatalf("unique restore: %q", task.ExitStatus)
	}
	u := k.guest(103)
	if u.Config["net0"] == orig.Config["net0"] || !ctTestMACRE.MatchString(u.Config["net0"]) || u.Config["hostname"] != "app" || !u.Running {
		t.Errorf("unique restore: net0 %q hostname %q running %v", u.Config["net0"], u.Config["hostname"], u.Running)
	}
	// A parameter overrides the backed-up value.
	task = ctTestCreate(k, kitOperator, map[string]string{"vmid": "104", "ostemplate": archive, "restore": "1", "storage": "local-lvm", "hostname": "app-copy"})
	if task.ExitStatus != "OK" || k.guest(104).Config["hostname"] != "app-copy" {
		t.Errorf("hostname override: %q %q", task.ExitStatus, k.guest(104).Config["hostname"])
	}
	if got := readVolFile(k, volumeOf("rootfs", k.guest(104).Config["rootfs"]), "etc/hostname"); got != "app-copy\n" {
		t.Errorf("etc/hostname = %q", got)
	}
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func TestCluster_Restore_overExisting(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	mp0, _ := restoreNoBind(k, 101)
	archive := backupOf(k, 101)
	oldRoot := volumeOf("rootfs", k.guest(101).Config["rootfs"])
	k.writeFile("pve", mp0, "db/row.txt", "corrupted\n")

	params := map[string]string{"vmid": "101", "ostemplate": archive, "restore": "1", "storage": "local-lvm"}
	_, err := k.c.CreateCT(kitOperator, "pve", params)
	wantError(t, err, http.StatusInternalServerError, "CT 101 already exists on node 'pve'\n")

	params["force"] = "1"
	_, err = k.c.CreateCT(kitOperator, "pve", params)
	wantError(t, err, http.StatusInternalServerError, "can't overwrite running container\n")

	k.edit(101, func(g *Guest) { k.c.markStoppedLocked(g); g.Config["protection"] = "1" })
	_, err = k.c.CreateCT(kitOperator, "pve", params)
	wantError(t, err, http.StatusInternalServerError, "unable to restore CT 101 - protection mode enabled\n")
	k.edit(101, func(g *Guest) { delete(g.Config, "protection") })

	// A user with VM.Backup but not VM.Allocate may restore over the CT,
	// but not into a new VMID.
	backupOnly := ctTestLimitedUser(k, "backup@pve", "VM.Allocate")
	_, err = k.c.CreateCT(backupOnly, "pve", map[string]string{"vmid": "150", "ostemplate": archive, "restore": "1", "storage": "local-lvm"})
	wantError(t, err, http.StatusForbidden, "Permission check failed\n")

	task := ctTestCreate(k, backupOnly, params)
	if task.ExitStatus != "OK" {
		t.Fatalf("forced restore: %q\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	g := k.guest(101)
	newMP0 := volumeOf("mp0", g.Config["mp0"])
	if newMP0 == mp0 || volumeOf("rootfs", g.Config["rootfs"]) == oldRoot {
		t.Errorf("volumes were not recreated: %v", g.Config)
	}
	if k.volume("pve", mp0) != nil || k.volume("pve", oldRoot) != nil {
		t.Error("the old volumes were not destroyed")
	}
	if got := readVolFile(k, newMP0, "db/row.txt"); got != "sentinel row\n" {
		t.Errorf("mp0 after restore = %q", got)
	}
}

func TestCluster_Restore_errors(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	backupCT(k, 101, false) // with a bind mount
	archive := backupOf(k, 101)

	task := ctTestCreate(k, kitOperator, map[string]string{"vmid": "102", "ostemplate": archive, "restore": "1", "storage": "local-lvm"})
	if want := "unable to restore CT 102 - restoring 'mp2' to bind mount is only possible for root"; task.ExitStatus != want {
		t.Errorf("exit = %q, want %q", task.ExitStatus, want)
	}
	if _, ok := k.c.GuestExtra(102); ok || k.c.st.Guests[102] != nil {
		t.Error("a failed restore left its CT")
	}
	if list, _ := k.c.Content("pve", "local-lvm", "", 102); len(list) != 0 {
		t.Errorf("a failed restore left volumes %v", list)
	}

	// root@pam restores the bind mount after extraction.
	task = ctTestCreate(k, Auth{UserID: "root@pam"}, map[string]string{"vmid": "102", "ostemplate": archive, "restore": "1", "storage": "local-lvm"})
	if task.ExitStatus != "OK" || k.guest(102).Config["mp2"] != "/srv/host,mp=/host" {
		t.Errorf("root restore: %q mp2 %q", task.ExitStatus, k.guest(102).Config["mp2"])
	}

	// The archive must be a backup; a template is refused.
	_, err := k.c.CreateCT(kitOperator, "pve", map[string]string{"vmid": "103", "ostemplate": DefaultTemplate, "restore": "1", "storage": "local-lvm"})
	wantError(t, err, http.StatusInternalServerError, "unable to use volume "+DefaultTemplate+" - content type needs to be 'backup'\n")
	// The target storage must hold container directories.
	_, err = k.c.CreateCT(kitOperator, "pve", map[string]string{"vmid": "103", "ostemplate": archive, "restore": "1"})
	if e, ok := err.(*Error); !ok || e.Kind.Code() != http.StatusBadRequest || e.Params["storage"] != "storage 'local' does not support container directories" {
		t.Errorf("default storage local: %v", err)
	}
}
