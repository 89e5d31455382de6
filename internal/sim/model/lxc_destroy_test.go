package model

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
)

func TestCluster_DestroyCT_syncErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		conf   map[string]string
		run    bool
		params map[string]string
		vmid   int
		status int
		msg    string
	}{
		{name: "missing", vmid: 106, status: 500, msg: "Configuration file 'nodes/pve/lxc/106.conf' does not exist\n"},
		{name: "protected", conf: map[string]string{"protection": "1", "lock": "backup"}, status: 500, msg: "can't remove CT 105 - protection mode enabled\n"},
		{name: "locked", conf: map[string]string{"lock": "backup"}, run: true, status: 500, msg: "CT is locked (backup)\n"},
		{name: "running", run: true, status: 500, msg: "unable to destroy CT 105 - container is running\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", 105, tt.conf)
			if tt.run {
				k.edit(105, func(g *Guest) { g.Running, g.PID = true, 4242 })
			}
			vmid := tt.vmid
			if vmid == 0 {
				vmid = 105
			}
			upid, err := k.c.DestroyCT(kitOperator, "pve", vmid, tt.params)
			if upid != "" {
				t.Fatalf("got UPID %s, want a synchronous error", upid)
			}
			wantError(t, err, tt.status, tt.msg)
			k.guest(105) // still there
		})
	}
}

func TestCluster_DestroyCT_volumes(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	foreign := k.vol("pve", 999, gib) // vm-999-disk-0
	k.ct("pve", 105, nil)             // rootfs vm-105-disk-0
	mp := k.vol("pve", 105, gib)      // vm-105-disk-1
	unused := k.vol("pve", 105, gib)  // vm-105-disk-2
	pending := k.vol("pve", 105, gib) // vm-105-disk-3
	orphan := k.vol("pve", 105, gib)  // vm-105-disk-4, referenced nowhere
	k.edit(105, func(g *Guest) {
		g.Config["mp0"] = mp + ",mp=/data"
		g.Config["mp1"] = foreign + ",mp=/pet"
		g.Config["unused0"] = unused
		g.Pending = map[string]string{"mp2": pending + ",mp=/new"}
		g.Running, g.PID = true, 4242
	})
	k.writeFile("pve", foreign, "pet.txt", "keep")
	k.writeFile("pve", mp, "data.txt", "gone")
	snapDir := ""
	k.c.mu.Lock()
	v := k.c.st.Volumes[volumeKey("pve", mp)]
	v.Snapshots = []string{"before"}
	snapDir = k.c.storage.snapshotPath("pve", v, "before")
	k.c.mu.Unlock()
	if err := os.MkdirAll(snapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	k.c.mu.Lock()
	err := k.c.st.Access.SetACL("/vms/105", []string{"PVEAuditor"}, []string{OperatorUser}, nil, nil, true, false)
	k.c.markCore()
	k.c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	task := k.run(k.c.DestroyCT(kitOperator, "pve", 105, map[string]string{"force": "1", "purge": "1"}))
	if task.ExitStatus != "OK" {
		t.Fatalf("exitstatus = %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	want := []string{
		"forced to stop CT 105 before destroying!",
		`  Logical volume "vm-105-disk-0" successfully removed.`,
		`  Logical volume "snap_vm-105-disk-1_before" successfully removed.`,
		`  Logical volume "vm-105-disk-1" successfully removed.`,
		"ignore deletion of 'local-lvm:vm-999-disk-0', CT 105 isn't the owner!",
		`  Logical volume "vm-105-disk-2" successfully removed.`,
		`  Logical volume "vm-105-disk-3" successfully removed.`,
		"purging CT 105 from related configurations..",
		"TASK OK",
	}
	if !slices.Equal(task.Log, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(task.Log, "\n"), strings.Join(want, "\n"))
	}
	for _, volid := range []string{"local-lvm:vm-105-disk-0", mp, unused, pending} {
		if k.volume("pve", volid) != nil {
			t.Errorf("%s survived the destroy", volid)
		}
	}
	if k.volume("pve", orphan) == nil {
		t.Error("an unreferenced volume was freed without destroy-unreferenced-disks")
	}
	if body, err := os.ReadFile(filepath.Join(k.c.storage.volumePath("pve", "local-lvm", "vm-999-disk-0"), "pet.txt")); err != nil || string(body) != "keep" {
		t.Errorf("pet data = %q, %v", body, err)
	}
	if _, err := os.Stat(k.c.storage.volumePath("pve", "local-lvm", "vm-105-disk-1")); !os.IsNotExist(err) {
		t.Errorf("freed volume data still on disk: %v", err)
	}
	if _, err := os.Stat(snapDir); !os.IsNotExist(err) {
		t.Errorf("snapshot data still on disk: %v", err)
	}
	if _, _, err := k.c.CTConfig(kitRoot, "pve", 105, false, ""); err == nil {
		t.Error("CT 105 still exists")
	}
	k.c.mu.Lock()
	for _, e := range k.c.st.Access.ACL {
		if e.Path == "/vms/105" {
			t.Errorf("ACL entry on /vms/105 survived: %+v", e)
		}
	}
	k.c.mu.Unlock()
}

func TestCluster_DestroyCT_unreferenced(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.ct("pve", 105, nil)
	orphan := k.vol("pve", 105, gib)
	other := k.vol("pve", 106, gib)
	task := k.run(k.c.DestroyCT(kitRoot, "pve", 105, map[string]string{"destroy-unreferenced-disks": "1"}))
	if task.ExitStatus != "OK" {
		t.Fatalf("exitstatus = %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	ctTestHasLine(t, task, `  Logical volume "vm-105-disk-1" successfully removed.`)
	if k.volume("pve", orphan) != nil {
		t.Errorf("%s survived destroy-unreferenced-disks", orphan)
	}
	if k.volume("pve", other) == nil {
		t.Errorf("%s, another CT's, was freed", other)
	}
}

func TestCluster_DestroyCT_createdCT(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	ctTestCreate(k, kitOperator, map[string]string{
		"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:1", "password": "hunter22",
	})
	if _, ok := k.c.GuestExtra(105); !ok {
		t.Fatal("no GuestExtra after create")
	}
	task := k.run(k.c.DestroyCT(kitOperator, "pve", 105, nil))
	if task.ExitStatus != "OK" {
		t.Fatalf("exitstatus = %q", task.ExitStatus)
	}
	if _, ok := k.c.GuestExtra(105); ok {
		t.Error("GuestExtra survived the destroy")
	}
	// The VMID is free again.
	task = ctTestCreate(k, kitOperator, map[string]string{"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:1", "features": "nesting=1"})
	if task.ExitStatus != "OK" {
		t.Fatalf("re-create exitstatus = %q", task.ExitStatus)
	}
}

// pct unlock clears a lock no API call may clear, so root can then
// destroy a dead create's placeholder.
func TestUnlockThenDestroyPlaceholder(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.ct("pve", 105, map[string]string{"lock": "create"})
	if _, err := k.c.DestroyCT(kitOperator, "pve", 105, nil); err == nil || !strings.Contains(err.Error(), "CT is locked (create)") {
		t.Fatalf("destroy of a locked CT: %v", err)
	}
	if err := k.c.Unlock(105); err != nil {
		t.Fatal(err)
	}
	if _, err := k.c.DestroyCT(kitOperator, "pve", 105, nil); err != nil {
		t.Fatalf("destroy after unlock: %v", err)
	}
}

// TestCluster_DestroyCT_workWithinTheDuration: a vzdestroy frees the
// volumes and drops the config in the last quarter of its duration, and
// ends when its duration does, not that work's time after it, as on PVE,
// where freeing the volumes is what a destroy's time is spent on (issue
// 30: every vzdestroy ended 0.05 to 0.15 s late, a read more for its
// waiter).
func TestCluster_DestroyCT_workWithinTheDuration(t *testing.T) {
	t.Parallel() // waits out real task durations (or 3,000 saves): beside the others
	const d = 4 * time.Second
	k := newOpsKitWith(t, Options{TimeScale: 1, HasTimeScale: true, Durations: map[string]time.Duration{"vzdestroy": d}})
	k.ct("pve", 105, nil)
	began := time.Now()
	upid, err := k.c.DestroyCT(kitOperator, "pve", 105, nil)
	if err != nil {
		t.Fatal(err)
	}
	var goneAt time.Duration
	testenv.WaitFor(t, "CT 105's config to be gone", func() bool {
		k.c.mu.Lock()
		defer k.c.mu.Unlock()
		goneAt = time.Since(began)
		return k.c.st.Guests[105] == nil
	})
	task := k.wait("pve", upid)
	// Gone 3 s in: only timers a whole second late reach d.
	if goneAt >= d {
		t.Errorf("CT 105 was gone %s after the destroy began, want within its duration %s", goneAt, d)
	}
	if task.ExitStatus != "OK" {
		t.Fatalf("destroy: %s %q", task.ExitStatus, task.Log)
	}
	if took := time.Since(began); took < d {
		t.Errorf("the destroy ended %s after it began, before its duration %s", took, d)
	}
}

// TestCTVolumeKeys: a config's volume keys in PVE's foreach_volume order
// (rootfs, mp0..mp255, unused0..unused255), and no other key.
func TestCTVolumeKeys(t *testing.T) {
	conf := map[string]string{}
	for _, k := range []string{"unused3", "mp10", "hostname", "net0", "mp2", "rootfs", "unused0", "mp255", "mp256", "mp01", "mp+1", "mp", "unused", "mpx", "dev0", "unused255"} {
		conf[k] = "x"
	}
	want := []string{"rootfs", "mp2", "mp10", "mp255", "unused0", "unused3", "unused255"}
	if got := ctVolumeKeys(conf); !slices.Equal(got, want) {
		t.Errorf("ctVolumeKeys = %q, want %q", got, want)
	}
	if got := ctVolumeKeys(map[string]string{"hostname": "a"}); got != nil {
		t.Errorf("ctVolumeKeys of a config without volumes = %q", got)
	}
}
