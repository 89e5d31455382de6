package model

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readVolFile reads a file from a volume's data directory ("" if absent).
func readVolFile(k *opsKit, volid, name string) string {
	k.t.Helper()
	dir, err := k.c.VolumePath("pve", volid)
	if err != nil {
		k.t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return string(b)
}

func TestCluster_Snapshot_rollback(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	k.ct("pve", 101, map[string]string{"description": "my app"})
	mp0 := k.vol("pve", 101, gib)
	k.edit(101, func(g *Guest) {
		g.Config["mp0"] = mp0 + ",mp=/data,size=1G"
		k.c.markRunningLocked(g)
	})
	rootfs := volumeOf("rootfs", k.guest(101).Config["rootfs"])
	k.writeFile("pve", rootfs, "etc/app.conf", "version 1\n")
	k.writeFile("pve", mp0, "state.db", "good state\n")

	// A running, unprivileged CT on LVM-thin snapshots without a stop.
	task := k.run(k.c.SnapshotCT(kitOperator, "pve", 101, map[string]string{"snapname": "before", "description": "pre-change"}))
	if task.ExitStatus != "OK" || task.Type != "vzsnapshot" || task.ID != "101" {
		t.Fatalf("snapshot: %s %s %q\n%s", task.Type, task.ID, task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	ctTestHasLine(t, task, `  Logical volume "snap_vm-101-disk-0_before" created.`)
	ctTestHasLine(t, task, `  Logical volume "snap_vm-101-disk-1_before" created.`)
	g := k.guest(101)
	if !g.Running || g.Config["parent"] != "before" || g.Config["lock"] != "" {
		t.Errorf("after snapshot: running %v parent %q lock %q", g.Running, g.Config["parent"], g.Config["lock"])
	}
	conf, err := k.c.SnapshotConfig("pve", 101, "before")
	if err != nil || conf["description"] != "pre-change\n" || conf["snaptime"] == "" || conf["mp0"] == "" || conf["snapstate"] != "" {
		t.Errorf("snapshot config = %v, %v", conf, err)
	}
	if v := k.volume("pve", mp0); !slices.Equal(v.Snapshots, []string{"before"}) {
		t.Errorf("mp0 snapshots = %v", v.Snapshots)
	}
	text, _ := k.c.ConfigText(101)
	if !strings.Contains(text, "\n[before]\n") || !strings.Contains(text, "parent: before\n") {
		t.Errorf("config file:\n%s", text)
	}

	// The change: files and config.
	k.writeFile("pve", rootfs, "etc/app.conf", "version 2 (broken)\n")
	k.writeFile("pve", mp0, "state.db", "migrated\n")
	k.writeFile("pve", mp0, "new.txt", "created after the snapshot\n")
	mp1 := k.vol("pve", 101, gib)
	ctTestPut(k, kitOperator, 101, map[string]string{"cores": "4"})
	k.edit(101, func(g *Guest) { g.Config["mp1"] = mp1 + ",mp=/extra,size=1G" })

	task = k.run(k.c.RollbackSnapshot(kitOperator, "pve", 101, "before", nil))
	if task.ExitStatus != "OK" || task.Type != "vzrollback" {
		t.Fatalf("rollback: %q\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	if got := readVolFile(k, rootfs, "etc/app.conf"); got != "version 1\n" {
		t.Errorf("rootfs file after rollback = %q", got)
	}
	if got := readVolFile(k, mp0, "state.db"); got != "good state\n" {
		t.Errorf("mp0 file after rollback = %q", got)
	}
	if got := readVolFile(k, mp0, "new.txt"); got != "" {
		t.Errorf("a file made after the snapshot survived: %q", got)
	}
	g = k.guest(101)
	if g.Running {
		t.Error("rollback left the CT running (it stops it hard)")
	}
	if g.Config["cores"] != "" || g.Config["parent"] != "before" || g.Config["description"] != "my app" || g.Config["unused0"] != mp1 || g.Config["mp1"] != "" {
		t.Errorf("config after rollback: %v", g.Config)
	}

	// start=1 starts it again.
	task = k.run(k.c.RollbackSnapshot(kitOperator, "pve", 101, "before", map[string]string{"start": "1"}))
	if task.ExitStatus != "OK" || !k.guest(101).Running {
		t.Errorf("rollback with start: %q running %v", task.ExitStatus, k.guest(101).Running)
	}

	// Snapshots list, description update, delete.
	snaps, err := k.c.Snapshots("pve", 101)
	if err != nil || len(snaps) != 2 || snaps[0].Name != "before" || snaps[0].Description != "pre-change\n" ||
		!snaps[1].Current || snaps[1].Parent != "before" || !snaps[1].Running || snaps[1].Description != "You are here!" {
		t.Errorf("Snapshots = %+v, %v", snaps, err)
	}
	if err := k.c.UpdateSnapshotConfig(kitOperator, "pve", 101, "before", map[string]string{"description": "renamed"}); err != nil {
		t.Fatal(err)
	}
	if conf, _ := k.c.SnapshotConfig("pve", 101, "before"); conf["description"] != "renamed\n" {
		t.Errorf("description = %q", conf["description"])
	}
	task = k.run(k.c.DeleteSnapshot(kitOperator, "pve", 101, "before", nil))
	if task.ExitStatus != "OK" || task.Type != "vzdelsnapshot" {
		t.Fatalf("delete: %q", task.ExitStatus)
	}
	ctTestHasLine(t, task, `  Logical volume "snap_vm-101-disk-1_before" successfully removed.`)
	g = k.guest(101)
	if len(g.Snapshots) != 0 || g.Config["parent"] != "" {
		t.Errorf("after delete: snapshots %v parent %q", g.Snapshots, g.Config["parent"])
	}
	v := k.volume("pve", mp0)
	if len(v.Snapshots) != 0 {
		t.Errorf("mp0 keeps snapshots %v", v.Snapshots)
	}
	if _, err := os.Stat(k.c.storage.snapshotPath("pve", v, "before")); !os.IsNotExist(err) {
		t.Errorf("snapshot data left: %v", err)
	}
}

func TestCluster_Snapshot_errors(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	k.ct("pve", 101, nil)
	dirCT(k, 103, false)
	k.ct("pve", 104, map[string]string{"mp0": "/srv/x,mp=/x"})

	for _, name := range []string{"current", "vzdump"} {
		_, err := k.c.SnapshotCT(kitOperator, "pve", 101, map[string]string{"snapname": name})
		wantError(t, err, http.StatusInternalServerError, "unable to use snapshot name '"+name+"' (reserved name)\n")
	}
	for _, tc := range []struct {
		name string
		vmid int
		want string
	}{
		{"dir storage", 103, "snapshot feature is not available"},
		{"bind mount", 104, "snapshot feature is not available"},
		{"no such CT", 150, "Configuration file 'nodes/pve/lxc/150.conf' does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := k.run(k.c.SnapshotCT(kitOperator, "pve", tc.vmid, map[string]string{"snapname": "s1"}))
			if task.ExitStatus != tc.want {
				t.Errorf("exit = %q, want %q", task.ExitStatus, tc.want)
			}
		})
	}
	if len(k.guest(103).Snapshots) != 0 {
		t.Error("a refused snapshot left a section")
	}

	k.run(k.c.SnapshotCT(kitOperator, "pve", 101, map[string]string{"snapname": "s1"}))
	for _, tc := range []struct {
		name string
		do   func() (string, error)
		want string
	}{
		{"name used", func() (string, error) {
			return k.c.SnapshotCT(kitOperator, "pve", 101, map[string]string{"snapname": "s1"})
		}, "snapshot name 's1' already used"},
		{"rollback missing", func() (string, error) { return k.c.RollbackSnapshot(kitOperator, "pve", 101, "nope", nil) }, "snapshot 'nope' does not exist"},
		{"delete missing", func() (string, error) { return k.c.DeleteSnapshot(kitOperator, "pve", 101, "nope", nil) }, "snapshot 'nope' does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if task := k.run(tc.do()); task.ExitStatus != tc.want {
				t.Errorf("exit = %q, want %q", task.ExitStatus, tc.want)
			}
		})
	}

	k.edit(101, func(g *Guest) { g.Config["lock"] = "backup" })
	if task := k.run(k.c.SnapshotCT(kitOperator, "pve", 101, map[string]string{"snapname": "s2"})); task.ExitStatus != "CT is locked (backup)" {
		t.Errorf("locked: %q", task.ExitStatus)
	}
	k.edit(101, func(g *Guest) { delete(g.Config, "lock"); g.Snapshots["s1"].SnapState = "prepare" })
	if task := k.run(k.c.RollbackSnapshot(kitOperator, "pve", 101, "s1", nil)); task.ExitStatus != "unable to rollback to incomplete snapshot (snapstate = prepare)" {
		t.Errorf("incomplete: %q", task.ExitStatus)
	}
}

func TestCluster_Snapshot_restrictsVolumes(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	k.ct("pve", 101, nil)
	k.ct("pve", 900, nil)
	mp0 := k.vol("pve", 101, gib)
	k.edit(101, func(g *Guest) { g.Config["mp0"] = mp0 + ",mp=/data,size=1G" })
	k.run(k.c.SnapshotCT(kitOperator, "pve", 101, map[string]string{"snapname": "s1"}))

	_, err := k.c.MoveVolume(kitOperator, "pve", 101, map[string]string{"volume": "mp0", "target-vmid": "900", "target-volume": "unused0"})
	wantError(t, err, http.StatusInternalServerError, "Cannot move volume used by a snapshot to another container\n")
	_, err = k.c.MoveVolume(kitOperator, "pve", 101, map[string]string{"volume": "mp0", "storage": "local-lvm", "delete": "1"})
	wantError(t, err, http.StatusInternalServerError, "you can't move a volume with snapshots and delete the source\n")

	// Snapshots do not block a destroy; the volumes leave with them.
	v := k.volume("pve", mp0)
	task := k.run(k.c.DestroyCT(kitOperator, "pve", 101, nil))
	if task.ExitStatus != "OK" {
		t.Fatalf("destroy: %q", task.ExitStatus)
	}
	ctTestHasLine(t, task, `  Logical volume "snap_vm-101-disk-1_s1" successfully removed.`)
	if _, err := os.Stat(k.c.storage.snapshotPath("pve", v, "s1")); !os.IsNotExist(err) {
		t.Errorf("snapshot data left after destroy: %v", err)
	}
}
