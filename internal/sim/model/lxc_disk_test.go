package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/testutil/refdata"
)

func TestCluster_ResizeCT(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		disk     string
		size     string
		conf     map[string]string
		auth     Auth
		params   map[string]string
		wantErr  *Error
		wantSize int64  // volume size after the task
		wantConf string // the key's value after the task
	}{
		{name: "relative", disk: "rootfs", size: "+2G", auth: kitOperator,
			wantSize: 10 * gib, wantConf: "local-lvm:vm-101-disk-0,size=10G"},
		{name: "absolute", disk: "rootfs", size: "12G", auth: kitRoot,
			wantSize: 12 * gib, wantConf: "local-lvm:vm-101-disk-0,size=12G"},
		{name: "rounded to extents", disk: "rootfs", size: "+1M", auth: kitRoot,
			wantSize: 8*gib + 4*mib, wantConf: "local-lvm:vm-101-disk-0,size=8193M"},
		{name: "shrink", disk: "rootfs", size: "4G", auth: kitRoot,
			wantErr: Failf("unable to shrink disk size\n")},
		{name: "same size", disk: "rootfs", size: "8G", auth: kitRoot,
			wantErr: Failf("disk is already at specified size\n")},
		{name: "pet volume owned by the keeper", disk: "mp0", size: "+1G", auth: kitOperator,
			conf:    map[string]string{"mp0": "local-lvm:vm-900-disk-0,mp=/pet,size=4G"},
			wantErr: Failf("can't resize mount point owned by another container (900) at /usr/share/perl5/PVE/API2/LXC.pm line 2365.\n")},
		{name: "locked", disk: "rootfs", size: "+1G", auth: kitRoot, conf: map[string]string{"lock": "backup"},
			wantErr: Failf("CT is locked (backup)\n")},
		{name: "digest", disk: "rootfs", size: "+1G", auth: kitRoot, params: map[string]string{"digest": "0123"},
			wantErr: Failf("detected modified configuration - file changed by other user? Try again.\n")},
		{name: "unset mount point", disk: "mp3", size: "+1G", auth: kitRoot,
			wantErr: &Error{Kind: ErrFail, Message: "format error\n", Params: map[string]string{
				"mp": "property is missing and it is not optional", "volume": "property is missing and it is not optional"}}},
		{name: "bind mount", disk: "mp0", size: "+1G", auth: kitRoot, conf: map[string]string{"mp0": "/srv/data,mp=/data"},
			wantErr: Failf("unable to parse volume ID '/srv/data'\n")},
		{name: "unused is not resizable", disk: "unused0", size: "+1G", auth: kitRoot, conf: map[string]string{"unused0": "local-lvm:vm-101-disk-0"},
			wantErr: ParamError(map[string]string{"disk": "value 'unused0' does not have a value in the enumeration '" + resizableKeys() + "'"})},
		{name: "no config options privilege", disk: "rootfs", size: "+1G", auth: kitNobody,
			wantErr: PermError("/vms/101, VM.Config.Options")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.vol("pve", 900, 4*gib)
			k.ct("pve", 101, tt.conf)
			params := map[string]string{"disk": tt.disk, "size": tt.size}
			for key, val := range tt.params {
				params[key] = val
			}
			upid, err := k.c.ResizeCT(tt.auth, "pve", 101, params)
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, err); diff != "" {
					t.Fatalf("error (-want +got):\n%s", diff)
				}
				return
			}
			task := k.run(upid, err)
			if task.ExitStatus != "OK" || task.Type != "resize" || task.ID != "101" {
				t.Fatalf("task %s %s: %s %q", task.Type, task.ID, task.ExitStatus, task.Log)
			}
			if got := k.volume("pve", "local-lvm:vm-101-disk-0").Size; got != tt.wantSize {
				t.Errorf("volume size = %d, want %d", got, tt.wantSize)
			}
			if got := k.guest(101).Config[tt.disk]; got != tt.wantConf {
				t.Errorf("%s = %q, want %q", tt.disk, got, tt.wantConf)
			}
			if got, want := task.Log[1], "  Logical volume pve/vm-101-disk-0 successfully resized."; got != want {
				t.Errorf("log[1] = %q, want %q", got, want)
			}
		})
	}
}

func TestCluster_MoveVolume_fixture(t *testing.T) {
	t.Parallel()
	shared := refdata.Dir(t)
	k := newOpsKit(t)
	k.ct("pve", 900, map[string]string{"protection": "1"}) // rootfs vm-900-disk-0
	k.vol("pve", 900, gib)                                 // vm-900-disk-1
	k.vol("pve", 900, gib)                                 // vm-900-disk-2
	k.edit(900, func(g *Guest) {
		g.Config["mp0"] = "local-lvm:vm-900-disk-1,mp=/a,size=1G"
		g.Config["unused0"] = "local-lvm:vm-900-disk-2"
	})
	k.ct("pve", 101, nil)           // rootfs vm-101-disk-0
	pet := k.vol("pve", 101, 2*gib) // vm-101-disk-1
	k.edit(101, func(g *Guest) { g.Config["mp1"] = pet + ",mp=/srv,backup=1,size=2G" })
	k.writeFile("pve", pet, "srv/data.txt", "survives")

	upid, err := k.c.MoveVolume(kitOperator, "pve", 101, map[string]string{"volume": "mp1", "target-vmid": "900", "target-volume": "unused1"})
	task := k.run(upid, err)

	var logFix struct {
		Data []struct{ T string }
	}
	readFixture(t, shared, "task-log.json", &logFix)
	var wantLog []string
	for _, l := range logFix.Data {
		wantLog = append(wantLog, l.T)
	}
	if diff := cmp.Diff(wantLog, task.Log); diff != "" {
		t.Errorf("task log (-fixture +got):\n%s", diff)
	}
	var statusFix struct {
		Data struct{ Type, ID, Status, ExitStatus string }
	}
	readFixture(t, shared, "task-status-move-volume-ok.json", &statusFix)
	got := struct{ Type, ID, Status, ExitStatus string }{task.Type, task.ID, task.Status, task.ExitStatus}
	if diff := cmp.Diff(statusFix.Data, got); diff != "" {
		t.Errorf("task status (-fixture +got):\n%s", diff)
	}

	if _, ok := k.guest(101).Config["mp1"]; ok {
		t.Error("source key mp1 still set")
	}
	if got, want := k.guest(900).Config["unused1"], "local-lvm:vm-900-disk-3"; got != want {
		t.Errorf("target unused1 = %q, want %q", got, want)
	}
	if k.volume("pve", pet) != nil {
		t.Errorf("%s still exists", pet)
	}
	v := k.volume("pve", "local-lvm:vm-900-disk-3")
	if v == nil || v.Owner != 900 || v.Size != 2*gib {
		t.Fatalf("renamed volume = %+v", v)
	}
	dir, err := k.c.VolumePath("pve", "local-lvm:vm-900-disk-3")
	if err != nil {
		t.Fatal(err)
	}
	if body, err := os.ReadFile(filepath.Join(dir, "srv", "data.txt")); err != nil || string(body) != "survives" {
		t.Errorf("data after move = %q, %v", body, err)
	}
}

func readFixture(t *testing.T, shared, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(shared, "pve-api", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestCluster_MoveVolume_reassignErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params map[string]string
		setup  func(k *opsKit)
		auth   Auth
		want   *Error
	}{
		{name: "storage and target", params: map[string]string{"volume": "mp0", "storage": "local-lvm", "target-vmid": "900"},
			want: Failf("either set storage or target-vmid, but not both\n")},
		{name: "neither", params: map[string]string{"volume": "mp0"}, want: ParamError(map[string]string{
			"storage":     "both 'storage' and 'target-vmid' missing, either needs to be set",
			"target-vmid": "both 'storage' and 'target-vmid' missing, either needs to be set"})},
		{name: "from rootfs", params: map[string]string{"volume": "rootfs", "target-vmid": "900", "target-volume": "unused3"},
			want: Failf("Cannot move to/from 'rootfs'\n")},
		{name: "to rootfs", params: map[string]string{"volume": "mp0", "target-vmid": "900", "target-volume": "rootfs"},
			want: Failf("Cannot move to/from 'rootfs'\n")},
		{name: "unused to used", params: map[string]string{"volume": "unused0", "target-vmid": "900", "target-volume": "mp5"},
			want: Failf("Moving an unused volume to a used one is not possible\n")},
		{name: "unused default target key is unused", params: map[string]string{"volume": "unused0", "target-vmid": "900"},
			setup: func(k *opsKit) { k.edit(900, func(g *Guest) { g.Config["unused0"] = "local-lvm:vm-900-disk-1" }) },
			want:  Failf("Target volume key 'unused0' is already in use for container '900'\n")},
		{name: "no source", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			setup: func(k *opsKit) { k.c.mu.Lock(); delete(k.c.st.Guests, 101); k.c.markGuest(101); k.c.mu.Unlock() },
			want:  Failf("could not find CT 101\n")},
		{name: "no target", params: map[string]string{"volume": "mp0", "target-vmid": "901"},
			want: Failf("could not find CT 901\n")},
		{name: "source locked", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			setup: func(k *opsKit) { k.edit(101, func(g *Guest) { g.Config["lock"] = "backup" }) },
			want:  Failf("CT is locked (backup)\n")},
		{name: "target locked", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			setup: func(k *opsKit) { k.edit(900, func(g *Guest) { g.Config["lock"] = "snapshot" }) },
			want:  Failf("CT is locked (snapshot)\n")},
		{name: "template", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			setup: func(k *opsKit) { k.edit(900, func(g *Guest) { g.Config["template"] = "1" }) },
			want:  Failf("Can't move volumes from or to template CT\n")},
		{name: "source digest", params: map[string]string{"volume": "mp0", "target-vmid": "900", "digest": "abc"},
			want: Failf("Container 101: detected modified configuration - file changed by other user? Try again.\n")},
		{name: "target digest", params: map[string]string{"volume": "mp0", "target-vmid": "900", "target-digest": "abc"},
			want: Failf("Container 900: detected modified configuration - file changed by other user? Try again.\n")},
		{name: "missing key", params: map[string]string{"volume": "mp7", "target-vmid": "900"},
			want: Failf("volume 'mp7' for container '101' does not exist\n")},
		{name: "target mp in use", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			setup: func(k *opsKit) { k.edit(900, func(g *Guest) { g.Config["mp0"] = "local-lvm:vm-900-disk-1,mp=/x" }) },
			want:  Failf("Target volume key 'mp0' is already in use for container '900'\n")},
		{name: "snapshot", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			setup: func(k *opsKit) {
				k.edit(101, func(g *Guest) {
					g.Snapshots = map[string]*Snapshot{"s1": {Name: "s1", Config: map[string]string{"mp0": "local-lvm:vm-101-disk-1,mp=/data"}}}
				})
			},
			want: Failf("Cannot move volume used by a snapshot to another container\n")},
		{name: "bind mount has no rename feature", params: map[string]string{"volume": "mp1", "target-vmid": "900"},
			setup: func(k *opsKit) { k.edit(101, func(g *Guest) { g.Config["mp1"] = "/srv/share,mp=/share" }) },
			want:  Failf("Storage does not support moving of this disk to another container\n")},
		{name: "subvol has no rename feature", params: map[string]string{"volume": "mp1", "target-vmid": "900"},
			setup: func(k *opsKit) {
				k.c.mu.Lock()
				v, _, err := k.c.storage.allocImageLocked("pve", k.c.st.storage("local"), 101, "", "subvol", 0)
				k.c.mu.Unlock()
				if err != nil {
					k.t.Fatal(err)
				}
				k.edit(101, func(g *Guest) { g.Config["mp1"] = v.VolID() + ",mp=/sub" })
			},
			want: Failf("Storage does not support moving of this disk to another container\n")},
		{name: "source running", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			setup: func(k *opsKit) { k.edit(101, func(g *Guest) { g.Running = true }) },
			want:  Failf("Cannot move in-use volume while the source CT is running - detach or shutdown first\n")},
		{name: "target not allowed", params: map[string]string{"volume": "mp0", "target-vmid": "900"}, auth: kitNobody,
			want: PermError("/vms/900, VM.Config.Disk")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", 900, nil)         // vm-900-disk-0
			k.vol("pve", 900, gib)        // vm-900-disk-1
			k.ct("pve", 101, nil)         // vm-101-disk-0
			pet := k.vol("pve", 101, gib) // vm-101-disk-1
			k.edit(101, func(g *Guest) {
				g.Config["mp0"] = pet + ",mp=/data,size=1G"
				g.Config["unused0"] = pet
			})
			if tt.setup != nil {
				tt.setup(k)
			}
			auth := tt.auth
			if auth == (Auth{}) {
				auth = kitOperator
			}
			_, err := k.c.MoveVolume(auth, "pve", 101, tt.params)
			if diff := cmp.Diff(tt.want, err); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCluster_MoveVolume_otherNode(t *testing.T) {
	t.Parallel()
	k := newOpsKitWith(t, Options{Nodes: 2})
	k.ct("pve1", 101, map[string]string{"mp0": "local-lvm:vm-101-disk-0,mp=/x"})
	k.ct("pve2", 900, nil)
	_, err := k.c.MoveVolume(kitOperator, "pve1", 101, map[string]string{"volume": "mp0", "target-vmid": "900"})
	wantError(t, err, 500, "Both containers need to be on the same node (pve1 != pve2)\n")
}

func TestCluster_MoveVolume_reassignTargets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		params     map[string]string
		running    bool // source running (only an unused source may move)
		protection bool
		wantStatus string
		wantKey    string
		wantValue  string
	}{
		{name: "into a mount point", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			wantStatus: "OK", wantKey: "mp0", wantValue: "local-lvm:vm-900-disk-1,mp=/data,backup=1,size=2G"},
		{name: "unused from a running source", params: map[string]string{"volume": "unused0", "target-vmid": "900", "target-volume": "unused4"},
			running: true, wantStatus: "OK", wantKey: "unused4", wantValue: "local-lvm:vm-900-disk-1"},
		{name: "protected target mount point fails after the rename", params: map[string]string{"volume": "mp0", "target-vmid": "900"},
			protection: true, wantStatus: "can't update CT 900 drive 'mp0' - protection mode enabled", wantKey: "mp0"},
		{name: "protected target unused", params: map[string]string{"volume": "mp0", "target-vmid": "900", "target-volume": "unused0"},
			protection: true, wantStatus: "OK", wantKey: "unused0", wantValue: "local-lvm:vm-900-disk-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", 900, nil)
			k.ct("pve", 101, nil)
			pet := k.vol("pve", 101, 2*gib)
			key := tt.params["volume"]
			k.edit(101, func(g *Guest) {
				g.Running = tt.running
				if key == "unused0" {
					g.Config["unused0"] = pet
				} else {
					g.Config["mp0"] = pet + ",mp=/data,backup=1,size=1G"
				}
			})
			if tt.protection {
				k.edit(900, func(g *Guest) { g.Config["protection"] = "1" })
			}
			task := k.run(k.c.MoveVolume(kitOperator, "pve", 101, tt.params))
			if task.ExitStatus != tt.wantStatus {
				t.Fatalf("exitstatus = %q, want %q (log %q)", task.ExitStatus, tt.wantStatus, task.Log)
			}
			if _, ok := k.guest(101).Config[key]; ok {
				t.Errorf("source %s still set", key)
			}
			if got := k.guest(900).Config[tt.wantKey]; got != tt.wantValue {
				t.Errorf("target %s = %q, want %q", tt.wantKey, got, tt.wantValue)
			}
			// The volume was renamed in every case, even when the target
			// config could not be written (orphaned, as on PVE).
			if v := k.volume("pve", "local-lvm:vm-900-disk-1"); v == nil || v.Owner != 900 {
				t.Errorf("renamed volume = %+v", v)
			}
		})
	}
}

func TestCluster_MoveVolume_toStorage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		del        bool
		wantUnused string
		wantOld    bool
	}{
		{name: "keep source as unused", wantUnused: "local-lvm:vm-101-disk-1", wantOld: true},
		{name: "delete source", del: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.c.mu.Lock()
			k.c.st.Storages = append(k.c.st.Storages, &Storage{ID: "fast", Type: "lvmthin", Content: []string{"images", "rootdir"}, VGName: "fast", Pool: "data", Total: 100 * gib})
			k.c.markCore()
			k.c.mu.Unlock()
			k.ct("pve", 101, nil)
			old := k.vol("pve", 101, 2*gib)
			k.edit(101, func(g *Guest) { g.Config["mp0"] = old + ",mp=/data,size=2G" })
			k.writeFile("pve", old, "a/b.txt", "copied")
			params := map[string]string{"volume": "mp0", "storage": "fast"}
			if tt.del {
				params["delete"] = "1"
			}
			task := k.run(k.c.MoveVolume(kitOperator, "pve", 101, params))
			if task.ExitStatus != "OK" || task.ID != "101" {
				t.Fatalf("task %s: %s %q", task.ID, task.ExitStatus, task.Log)
			}
			g := k.guest(101)
			if got, want := g.Config["mp0"], "fast:vm-101-disk-0,mp=/data,size=2G"; got != want {
				t.Errorf("mp0 = %q, want %q", got, want)
			}
			if got := g.Config["unused0"]; got != tt.wantUnused {
				t.Errorf("unused0 = %q, want %q", got, tt.wantUnused)
			}
			if got := g.Config["lock"]; got != "" {
				t.Errorf("lock = %q, want none", got)
			}
			if got := k.volume("pve", old) != nil; got != tt.wantOld {
				t.Errorf("old volume exists = %v, want %v", got, tt.wantOld)
			}
			dir, err := k.c.VolumePath("pve", "fast:vm-101-disk-0")
			if err != nil {
				t.Fatal(err)
			}
			if body, err := os.ReadFile(filepath.Join(dir, "a", "b.txt")); err != nil || string(body) != "copied" {
				t.Errorf("copied data = %q, %v", body, err)
			}
		})
	}
}

func TestCluster_MoveVolume_toStorageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params map[string]string
		setup  func(g *Guest)
		want   *Error
	}{
		{name: "running", params: map[string]string{"volume": "mp0", "storage": "local-lvm"},
			setup: func(g *Guest) { g.Running = true }, want: Failf("cannot move volumes of a running container\n")},
		{name: "locked", params: map[string]string{"volume": "mp0", "storage": "local-lvm"},
			setup: func(g *Guest) { g.Config["lock"] = "mounted" }, want: Failf("CT is locked (mounted)\n")},
		{name: "unused", params: map[string]string{"volume": "unused0", "storage": "local-lvm"},
			want: Failf("cannot move volume 'unused0', only configured volumes can be moved to another storage\n")},
		{name: "snapshots and delete", params: map[string]string{"volume": "mp0", "storage": "local-lvm", "delete": "1"},
			setup: func(g *Guest) {
				g.Snapshots = map[string]*Snapshot{"s": {Name: "s", Config: map[string]string{"mp0": g.Config["mp0"]}}}
			},
			want: Failf("you can't move a volume with snapshots and delete the source\n")},
		{name: "digest", params: map[string]string{"volume": "mp0", "storage": "local-lvm", "digest": "x"},
			want: Failf("detected modified configuration - file changed by other user? Try again.\n")},
		{name: "no storage privilege", params: map[string]string{"volume": "mp0", "storage": "local-lvm"},
			want: PermError("/storage/local-lvm, Datastore.AllocateSpace")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", 101, map[string]string{"mp0": "local-lvm:vm-101-disk-0,mp=/x", "unused0": "local-lvm:vm-101-disk-0"})
			if tt.setup != nil {
				k.edit(101, tt.setup)
			}
			auth := kitOperator
			if strings.HasPrefix(tt.name, "no ") {
				auth = kitNobody
			}
			_, err := k.c.MoveVolume(auth, "pve", 101, tt.params)
			if diff := cmp.Diff(tt.want, err); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if lock := k.guest(101).Config["lock"]; tt.name != "locked" && lock != "" {
				t.Errorf("lock %q left behind", lock)
			}
		})
	}
}
