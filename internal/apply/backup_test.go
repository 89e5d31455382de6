package apply_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
)

func TestArchiveApp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, notes string
		app         string
		ours        bool
	}{
		{"corral backup", "corral app notes", "notes", true},
		{"trailing newline", "corral app notes\n", "notes", true},
		{"BackupNotes round trip", apply.BackupNotes("web-1"), "web-1", true},
		{"snapshotBeforeChange fallback", "corral: notes before an in-place change", "notes", false},
		{"PVE default guestname", "notes", "", false},
		{"someone else's words", "corral app is nice, says bob", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app, ours := apply.ArchiveApp(tt.notes)
			if app != tt.app || ours != tt.ours {
				t.Fatalf("ArchiveApp(%q) = %q, %v; want %q, %v", tt.notes, app, ours, tt.app, tt.ours)
			}
		})
	}
}

func TestBackupExclusions(t *testing.T) {
	t.Parallel()
	conf := map[string]string{
		"rootfs":  "local-lvm:vm-101-disk-0,size=4G",
		"mp0":     "local-lvm:vm-100-disk-1,mp=/srv/data,backup=1",
		"mp1":     "local-lvm:vm-100-disk-2,mp=/var/cache/notes,backup=0",
		"mp10":    "/mnt/media,mp=/media",
		"mp2":     "/dev/sdb1,mp=/mnt/usb,backup=1",
		"unused0": "local-lvm:vm-101-disk-9",
	}
	names := map[string]plan.VolumeKey{"local-lvm:vm-100-disk-2": {App: "notes", Name: "cache"}}
	got := apply.BackupExclusions(conf, names)
	want := []apply.Excluded{
		{Key: "mp1", Name: "cache", Mount: "/var/cache/notes", Kind: "volume", Source: "local-lvm:vm-100-disk-2"},
		{Key: "mp2", Mount: "/mnt/usb", Kind: "device", Source: "/dev/sdb1"},
		{Key: "mp10", Mount: "/media", Kind: "bind", Source: "/mnt/media"},
	}
	for i := range got {
		if got[i].Reason == "" {
			t.Errorf("%s has no reason", got[i].Key)
		}
		got[i].Reason = ""
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("BackupExclusions (-want +got):\n%s", d)
	}
}

func TestCanSnapshot(t *testing.T) {
	t.Parallel()
	obs := &plan.Observed{StorageTypes: map[string]string{"local-lvm": "lvmthin", "tank": "zfspool", "vzdir": "dir", "local": "dir"}}
	tests := []struct {
		name   string
		conf   map[string]string
		ok     bool
		reason string
	}{
		{"lvm-thin with a keeper volume", map[string]string{"rootfs": "local-lvm:vm-101-disk-0,size=4G", "mp0": "local-lvm:vm-100-disk-1,mp=/data"}, true, ""},
		{"zfs", map[string]string{"rootfs": "tank:subvol-101-disk-0,size=4G"}, true, ""},
		{"rootfs on dir", map[string]string{"rootfs": "vzdir:101/vm-101-disk-0.raw,size=4G"},
			false, `rootfs (vzdir:101/vm-101-disk-0.raw) is on storage vzdir of type dir; PVE snapshots container volumes only on lvmthin, zfspool, rbd, btrfs storage ("snapshot feature is not available")`},
		{"a volume on dir", map[string]string{"rootfs": "local-lvm:vm-101-disk-0", "mp0": "vzdir:101/vm-101-disk-1.raw,mp=/data"},
			false, `mp0 (vzdir:101/vm-101-disk-1.raw) is on storage vzdir of type dir; PVE snapshots container volumes only on lvmthin, zfspool, rbd, btrfs storage ("snapshot feature is not available")`},
		{"bind mount", map[string]string{"rootfs": "local-lvm:vm-101-disk-0", "mp0": "/srv/host,mp=/data"}, false, "mp0 is a bind mount (/srv/host), which PVE cannot snapshot"},
		{"unknown storage", map[string]string{"rootfs": "gone:vm-101-disk-0"}, false, "rootfs is on storage gone, which no node lists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := apply.CanSnapshot(obs, &plan.CT{VMID: 101, Config: tt.conf})
			if ok != tt.ok || reason != tt.reason {
				t.Fatalf("CanSnapshot = %v, %q\nwant %v, %q", ok, reason, tt.ok, tt.reason)
			}
		})
	}
}

func TestSnapshotName(t *testing.T) {
	t.Parallel()
	got := apply.SnapshotName(time.Date(2026, 6, 7, 10, 4, 5, 0, time.FixedZone("CEST", 2*3600)))
	if want := "corral-20260607-080405"; got != want {
		t.Fatalf("SnapshotName = %q, want %q", got, want)
	}
}
