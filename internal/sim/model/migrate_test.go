package model

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
)

// migKit is a three-node emulator (pve1..pve3) with instant tasks.
func migKit(t *testing.T, shared ...string) *opsKit {
	t.Helper()
	return newOpsKitWith(t, Options{Nodes: 3, SharedStorage: shared})
}

// image allocates an image volume for owner on storage sid as seen from
// node (any storage type), e.g. nfs:900/vm-900-disk-0.raw.
func (k *opsKit) image(node, sid string, owner int, size int64) string {
	k.t.Helper()
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	v, _, err := k.c.storage.allocImageLocked(node, k.c.st.storage(sid), owner, "", "raw", size)
	if err != nil {
		k.t.Fatalf("alloc %s for %d: %v", sid, owner, err)
	}
	return v.VolID()
}

// readFile reads name from a volume's data as node sees it.
func (k *opsKit) readFile(node, volid, name string) (string, error) {
	dir, err := k.c.VolumePath(node, volid)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	return string(b), err
}

var (
	migTimestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d `)
	migDuration  = regexp.MustCompile(`\(duration \d\d:\d\d:\d\d\)`)
)

// migLog is the task log with the timestamps cut and durations made
// "(duration HH:MM:SS)", so that lines compare exactly on a machine of
// any speed; lines without a timestamp (raw command output) get a "| "
// prefix instead, so the test also checks which lines carry one.
func migLog(task Task) []string {
	var out []string
	for _, l := range task.Log {
		l = migDuration.ReplaceAllString(l, "(duration HH:MM:SS)")
		if migTimestamp.MatchString(l) {
			out = append(out, migTimestamp.ReplaceAllString(l, ""))
		} else {
			out = append(out, "| "+l)
		}
	}
	return out
}

func wantLog(t *testing.T, task Task, want []string) {
	t.Helper()
	got := migLog(task)
	if !slices.Equal(got, want) {
		t.Errorf("task log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCluster_MigrateCT_syncErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		setup     func(k *opsKit) Auth
		node      string
		params    map[string]string
		status    int
		msg       string
		params400 map[string]string
	}{
		{name: "target is the local node", node: "pve1", params: map[string]string{"target": "pve1"},
			status: 400, msg: "Parameter verification failed.\n", params400: map[string]string{"target": "target is local node."}},
		{name: "no quorum", node: "pve1", params: map[string]string{"target": "pve2"},
			setup: func(k *opsKit) Auth {
				k.c.SetNodeOnline("pve2", false)
				k.c.SetNodeOnline("pve3", false)
				return kitRoot
			}, status: 500, msg: "cluster not ready - no quorum?\n"},
		{name: "unknown target", node: "pve1", params: map[string]string{"target": "pve9"}, status: 500, msg: "no such cluster node 'pve9'\n"},
		{name: "CT on another node", node: "pve2", params: map[string]string{"target": "pve3"},
			status: 500, msg: "Configuration file 'nodes/pve2/lxc/101.conf' does not exist\n"},
		{name: "running without restart", node: "pve1", params: map[string]string{"target": "pve2"},
			setup:  func(k *opsKit) Auth { k.edit(101, func(g *Guest) { g.Running = true }); return kitRoot },
			status: 500, msg: "can't migrate running container without --online or --restart\n"},
		{name: "two default storages", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "local-lvm,local"},
			status: 400, msg: "Parameter verification failed.\n", params400: map[string]string{"target-storage": "failed to parse storage map: default target ID can only be provided once\n"}},
		{name: "duplicate source", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "a:local-lvm,a:local"},
			status: 400, msg: "Parameter verification failed.\n", params400: map[string]string{"target-storage": "failed to parse storage map: duplicate mapping for source 'a'\n"}},
		{name: "identity with others", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "1,local-lvm"},
			status: 400, msg: "Parameter verification failed.\n", params400: map[string]string{"target-storage": "failed to parse storage map: identity mapping cannot be combined with other mappings\n"}},
		{name: "unknown target storage", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "nosuch"},
			status: 500, msg: "storage 'nosuch' does not exist\n"},
		{name: "target storage not on target node", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "local-lvm:only1"},
			setup: func(k *opsKit) Auth {
				k.c.mu.Lock()
				k.c.st.Storages = append(k.c.st.Storages, &Storage{ID: "only1", Type: "lvmthin", Content: []string{"rootdir", "images"}, VGName: "pve", Pool: "data", Nodes: []string{"pve1"}})
				k.c.mu.Unlock()
				return kitRoot
			}, status: 500, msg: "storage 'only1' is not available on node 'pve2'\n"},
		{name: "target storage disabled", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "off"},
			setup: func(k *opsKit) Auth {
				k.c.mu.Lock()
				k.c.st.Storages = append(k.c.st.Storages, &Storage{ID: "off", Type: "lvmthin", Content: []string{"rootdir"}, VGName: "pve", Pool: "data", Disable: true})
				k.c.mu.Unlock()
				return kitRoot
			}, status: 500, msg: "storage 'off' is disabled\n"},
		{name: "target storage without rootdir", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "local"},
			status: 500, msg: "storage 'local' does not support CT rootdirs\n"},
		{name: "no AllocateSpace on the target storage", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "local-lvm"},
			setup:  func(k *opsKit) Auth { return ctTestLimitedUser(k, "nospace@pve", "Datastore.AllocateSpace") },
			status: 403, msg: "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)\n"},
		{name: "no VM.Config.Disk with a map", node: "pve1", params: map[string]string{"target": "pve2", "target-storage": "local-lvm"},
			setup:  func(k *opsKit) Auth { return ctTestLimitedUser(k, "nodisk@pve", "VM.Config.Disk") },
			status: 403, msg: "Permission check failed (/vms/101, VM.Config.Disk)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := migKit(t)
			k.ct("pve1", 101, nil)
			auth := kitRoot
			if tc.setup != nil {
				auth = tc.setup(k)
			}
			upid, err := k.c.MigrateCT(auth, tc.node, 101, tc.params)
			if upid != "" {
				t.Fatalf("got UPID %s, want a synchronous error", upid)
			}
			wantError(t, err, tc.status, tc.msg)
			if tc.params400 != nil {
				if got := err.(*Error).Params; !equalMaps(got, tc.params400) {
					t.Errorf("params = %q, want %q", got, tc.params400)
				}
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCluster_MigrateCT_copiesAndMoves moves a stopped CT with a rootfs,
// an mp0 and an unused0 of its own: the data arrives on the target's
// local-lvm, the source LVs are gone, the config is on pve2 unlocked.
func TestCluster_MigrateCT_copiesAndMoves(t *testing.T) {
	t.Parallel()
	k := migKit(t)
	k.ct("pve1", 101, map[string]string{"protection": "1"})
	mp0 := k.vol("pve1", 101, 2*gib)
	unused := k.vol("pve1", 101, gib)
	k.edit(101, func(g *Guest) {
		g.Config["mp0"] = mp0 + ",mp=/data,size=2G"
		g.Config["unused0"] = unused
	})
	k.writeFile("pve1", "local-lvm:vm-101-disk-0", "etc/hostname", "ct101\n")
	k.writeFile("pve1", mp0, "marker", "data-101\n")
	k.writeFile("pve1", unused, "old", "unused-101\n")

	task := k.run(k.c.MigrateCT(kitOperator, "pve1", 101, map[string]string{"target": "pve2"}))
	if task.ExitStatus != "OK" || task.Type != "vzmigrate" || task.Node != "pve1" || task.ID != "101" {
		t.Fatalf("task %s %s/%s on %s, want OK vzmigrate/101 on pve1\n%s", task.ExitStatus, task.Type, task.ID, task.Node, strings.Join(task.Log, "\n"))
	}
	if !strings.HasPrefix(task.UPID, "UPID:pve1:") || !strings.Contains(task.UPID, ":vzmigrate:101:") {
		t.Errorf("UPID %s", task.UPID)
	}
	wantLog(t, task, []string{
		"starting migration of CT 101 to node 'pve2' (127.0.0.2)",
		"found local volume 'local-lvm:vm-101-disk-0' (in current VM config)",
		"found local volume 'local-lvm:vm-101-disk-1' (in current VM config)",
		"found local volume 'local-lvm:vm-101-disk-2' (in current VM config)",
		"successfully imported 'local-lvm:vm-101-disk-0'",
		"successfully imported 'local-lvm:vm-101-disk-1'",
		"successfully imported 'local-lvm:vm-101-disk-2'",
		`|   Logical volume "vm-101-disk-0" successfully removed.`,
		`|   Logical volume "vm-101-disk-1" successfully removed.`,
		`|   Logical volume "vm-101-disk-2" successfully removed.`,
		"start final cleanup",
		"migration finished successfully (duration HH:MM:SS)",
		"| TASK OK",
	})
	g := k.guest(101)
	if g.Node != "pve2" || g.Lock() != "" || g.Config["mp0"] != mp0+",mp=/data,size=2G" || g.Config["unused0"] != unused || g.Config["protection"] != "1" {
		t.Errorf("after migration: node %s config %v", g.Node, g.Config)
	}
	for volid, file := range map[string]string{"local-lvm:vm-101-disk-0": "etc/hostname", mp0: "marker", unused: "old"} {
		if k.volume("pve1", volid) != nil {
			t.Errorf("%s still on pve1", volid)
		}
		if _, err := k.readFile("pve2", volid, file); err != nil {
			t.Errorf("%s on pve2: %v", volid, err)
		}
		if v := k.volume("pve2", volid); v == nil || v.Owner != 101 || v.Node != "pve2" {
			t.Errorf("%s on pve2 = %+v", volid, v)
		}
	}
	if body, _ := k.readFile("pve2", mp0, "marker"); body != "data-101\n" {
		t.Errorf("marker on pve2 = %q", body)
	}
	for _, r := range k.c.Resources("vm") {
		if r.VMID == 101 && r.Node != "pve2" {
			t.Errorf("/cluster/resources: CT 101 on %s, want pve2", r.Node)
		}
	}
	if _, err := k.c.CTStatus("pve1", 101); err == nil {
		t.Error("CT 101 still answers on pve1")
	}
}

// TestCluster_MigrateCT_taskErrors: checks that fail inside the task
// end it "migration aborted" with the reason only in the log, change
// nothing and leave the CT unlocked on the source.
func TestCluster_MigrateCT_taskErrors(t *testing.T) {
	t.Parallel()
	// ownedByOther puts a volume of CT 900's in CT 101's config under
	// key (a mount point or an unused volume): either stops the
	// migration with the same log.
	ownedByOther := func(key, opts string) func(k *opsKit) {
		return func(k *opsKit) {
			k.ct("pve1", 900, nil) // takes vm-900-disk-0
			pet := k.vol("pve1", 900, gib)
			k.edit(101, func(g *Guest) { g.Config[key] = pet + opts })
		}
	}
	ownedByOtherLog := []string{
		"starting migration of CT 101 to node 'pve2' (127.0.0.2)",
		"found local volume 'local-lvm:vm-101-disk-0' (in current VM config)",
		"found local volume 'local-lvm:vm-900-disk-1' (in current VM config)",
		"can't migrate local volume 'local-lvm:vm-900-disk-1': owned by other guest (owner = 900)",
		"ERROR: can't migrate CT - check log",
		"aborting phase 1 - cleanup resources",
		"start final cleanup",
		"ERROR: migration aborted (duration HH:MM:SS): can't migrate CT - check log",
		"| TASK ERROR: migration aborted",
	}
	tests := []struct {
		name   string
		setup  func(k *opsKit)
		params map[string]string
		want   []string
	}{
		{name: "volume owned by another CT", setup: ownedByOther("mp0", ",mp=/srv"), want: ownedByOtherLog},
		{name: "unused volume owned by another CT", setup: ownedByOther("unused0", ""), want: ownedByOtherLog},
		{name: "snapshot on lvmthin",
			setup: func(k *opsKit) {
				k.edit(101, func(g *Guest) {
					g.Snapshots = map[string]*Snapshot{"before": {Name: "before", Config: map[string]string{"rootfs": g.Config["rootfs"]}}}
				})
			},
			want: []string{
				"starting migration of CT 101 to node 'pve2' (127.0.0.2)",
				"found local volume 'local-lvm:vm-101-disk-0' (in current VM config)",
				"can't migrate local volume 'local-lvm:vm-101-disk-0': non-migratable snapshot exists",
				"ERROR: can't migrate CT - check log",
				"aborting phase 1 - cleanup resources",
				"start final cleanup",
				"ERROR: migration aborted (duration HH:MM:SS): can't migrate CT - check log",
				"| TASK ERROR: migration aborted",
			}},
		{name: "bind mount",
			setup: func(k *opsKit) { k.edit(101, func(g *Guest) { g.Config["mp0"] = "/srv/data,mp=/data" }) },
			want: []string{
				"ERROR: migration aborted (duration HH:MM:SS): cannot migrate local bind mount point 'mp0'",
				"| TASK ERROR: migration aborted",
			}},
		{name: "locked",
			setup: func(k *opsKit) { k.edit(101, func(g *Guest) { g.Config["lock"] = "backup" }) },
			want: []string{
				"ERROR: migration aborted (duration HH:MM:SS): CT is locked (backup)",
				"| TASK ERROR: migration aborted",
			}},
		{name: "target offline",
			setup: func(k *opsKit) { k.c.SetNodeOnline("pve2", false) },
			want: []string{
				"ERROR: migration aborted (duration HH:MM:SS): Can't connect to destination address using public key",
				"| TASK ERROR: migration aborted",
			}},
		{name: "source storage not on the target",
			setup: func(k *opsKit) {
				k.c.mu.Lock()
				k.c.st.Storages = append(k.c.st.Storages, &Storage{ID: "only1", Type: "lvmthin", Content: []string{"rootdir", "images"}, VGName: "pve", Pool: "data", Nodes: []string{"pve1"}})
				k.c.mu.Unlock()
				v := k.image("pve1", "only1", 101, gib)
				k.edit(101, func(g *Guest) { g.Config["mp0"] = v + ",mp=/x" })
			},
			want: []string{
				"ERROR: migration aborted (duration HH:MM:SS): storage 'only1' is not available on node 'pve2'",
				"| TASK ERROR: migration aborted",
			}},
		{name: "restart mode, the CT does not stop in time",
			params: map[string]string{"restart": "1", "timeout": "1"},
			setup:  func(k *opsKit) { k.edit(101, func(g *Guest) { g.Running = true }) },
			want: []string{
				"shutdown CT 101",
				"ERROR: migration aborted (duration HH:MM:SS): container did not stop",
				"| TASK ERROR: migration aborted",
			}},
		{name: "online",
			params: map[string]string{"online": "1", "restart": "1"},
			setup:  func(k *opsKit) { k.edit(101, func(g *Guest) { g.Running = true }) },
			want: []string{
				"ERROR: migration aborted (duration HH:MM:SS): lxc live migration is currently not implemented",
				"| TASK ERROR: migration aborted",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := migKit(t)
			k.ct("pve1", 101, nil)
			tc.setup(k)
			before := k.guest(101)
			params := map[string]string{"target": "pve2"}
			for key, v := range tc.params {
				params[key] = v
			}
			task := k.run(k.c.MigrateCT(kitRoot, "pve1", 101, params))
			if task.ExitStatus != "migration aborted" {
				t.Errorf("exitstatus %q, want migration aborted", task.ExitStatus)
			}
			wantLog(t, task, tc.want)
			g := k.guest(101)
			if g.Node != "pve1" || g.Lock() != before.Lock() || g.Running != before.Running {
				t.Errorf("after: node %s lock %q running %v; before: lock %q running %v", g.Node, g.Lock(), g.Running, before.Lock(), before.Running)
			}
			if k.volume("pve1", "local-lvm:vm-101-disk-0") == nil {
				t.Error("source rootfs is gone")
			}
			if k.volume("pve2", "local-lvm:vm-101-disk-0") != nil {
				t.Error("a copy was made on pve2")
			}
		})
	}
}

// TestCluster_MigrateCT_renamesTakenName: a stale vm-101-disk-0 on the
// target makes the import pick the lowest free name there.
func TestCluster_MigrateCT_renamesTakenName(t *testing.T) {
	t.Parallel()
	k := migKit(t)
	k.ct("pve1", 101, nil)
	stale := k.vol("pve2", 101, gib) // vm-101-disk-0 on pve2, from an earlier failed migration
	k.writeFile("pve2", stale, "stale", "old")
	k.writeFile("pve1", "local-lvm:vm-101-disk-0", "marker", "fresh")

	task := k.run(k.c.MigrateCT(kitRoot, "pve1", 101, map[string]string{"target": "pve2"}))
	wantLog(t, task, []string{
		"starting migration of CT 101 to node 'pve2' (127.0.0.2)",
		"found local volume 'local-lvm:vm-101-disk-0' (in current VM config)",
		"volume pve/vm-101-disk-0 already exists - importing with a different name",
		"successfully imported 'local-lvm:vm-101-disk-1'",
		"volume 'local-lvm:vm-101-disk-0' is 'local-lvm:vm-101-disk-1' on the target",
		`|   Logical volume "vm-101-disk-0" successfully removed.`,
		"start final cleanup",
		"migration finished successfully (duration HH:MM:SS)",
		"| TASK OK",
	})
	g := k.guest(101)
	if g.Node != "pve2" || !strings.HasPrefix(g.Config["rootfs"], "local-lvm:vm-101-disk-1,") {
		t.Errorf("node %s rootfs %q", g.Node, g.Config["rootfs"])
	}
	if body, _ := k.readFile("pve2", "local-lvm:vm-101-disk-1", "marker"); body != "fresh" {
		t.Errorf("renamed copy marker = %q", body)
	}
	if body, _ := k.readFile("pve2", stale, "stale"); body != "old" {
		t.Errorf("stale volume touched: %q", body)
	}
}

// TestCluster_MigrateCT_staleCopiesOnFailure: a copy that fails after
// another succeeded leaves that copy on the target, logged as stale, and
// the CT unchanged on the source.
func TestCluster_MigrateCT_staleCopiesOnFailure(t *testing.T) {
	t.Parallel()
	k := migKit(t)
	k.ct("pve1", 101, map[string]string{"mp0": "local-lvm:vm-101-disk-1,mp=/data"}) // no such LV on pve1
	task := k.run(k.c.MigrateCT(kitRoot, "pve1", 101, map[string]string{"target": "pve2"}))
	if task.ExitStatus != "migration aborted" {
		t.Errorf("exitstatus %q", task.ExitStatus)
	}
	wantLog(t, task, []string{
		"starting migration of CT 101 to node 'pve2' (127.0.0.2)",
		"found local volume 'local-lvm:vm-101-disk-0' (in current VM config)",
		"found local volume 'local-lvm:vm-101-disk-1' (in current VM config)",
		"successfully imported 'local-lvm:vm-101-disk-0'",
		"ERROR: storage migration for 'local-lvm:vm-101-disk-1' to storage 'local-lvm' failed - no such logical volume pve/vm-101-disk-1",
		"aborting phase 1 - cleanup resources",
		"ERROR: found stale volume copy 'local-lvm:vm-101-disk-0' on node 'pve2'",
		"ERROR: found stale volume copy 'local-lvm:vm-101-disk-1' on node 'pve2'",
		"start final cleanup",
		"ERROR: migration aborted (duration HH:MM:SS): storage migration for 'local-lvm:vm-101-disk-1' to storage 'local-lvm' failed - no such logical volume pve/vm-101-disk-1",
		"| TASK ERROR: migration aborted",
	})
	if k.volume("pve2", "local-lvm:vm-101-disk-0") == nil {
		t.Error("the stale copy on pve2 was removed; PVE leaves it")
	}
	if g := k.guest(101); g.Node != "pve1" || g.Lock() != "" {
		t.Errorf("node %s lock %q", g.Node, g.Lock())
	}
	if k.volume("pve1", "local-lvm:vm-101-disk-0") == nil {
		t.Error("source rootfs removed")
	}
}

// TestCluster_MigrateCT_restartMode stops a running CT, moves it and
// starts it on the target.
func TestCluster_MigrateCT_restartMode(t *testing.T) {
	t.Parallel()
	k := migKit(t)
	k.ct("pve1", 101, nil)
	k.edit(101, func(g *Guest) { g.Running = true })
	task := k.run(k.c.MigrateCT(kitRoot, "pve1", 101, map[string]string{"target": "pve3", "restart": "1"}))
	wantLog(t, task, []string{
		"shutdown CT 101",
		"starting migration of CT 101 to node 'pve3' (127.0.0.3)",
		"found local volume 'local-lvm:vm-101-disk-0' (in current VM config)",
		"successfully imported 'local-lvm:vm-101-disk-0'",
		`|   Logical volume "vm-101-disk-0" successfully removed.`,
		"start final cleanup",
		"start container on target node",
		"# /usr/bin/ssh -e none -o 'BatchMode=yes' -o 'HostKeyAlias=pve3' -o 'UserKnownHostsFile=/etc/pve/nodes/pve3/ssh_known_hosts' -o 'GlobalKnownHostsFile=none' root@127.0.0.3 pct start 101",
		"migration finished successfully (duration HH:MM:SS)",
		"| TASK OK",
	})
	if g := k.guest(101); g.Node != "pve3" || !g.Running {
		t.Errorf("node %s running %v, want running on pve3", g.Node, g.Running)
	}
}

// TestCluster_MigrateCT_restartModeFailureRestartsOnSource: a phase1
// failure after the shutdown starts the CT again on the source.
func TestCluster_MigrateCT_restartModeFailureRestartsOnSource(t *testing.T) {
	t.Parallel()
	k := migKit(t)
	k.ct("pve1", 900, nil)
	pet := k.vol("pve1", 900, gib)
	k.ct("pve1", 101, map[string]string{"mp0": pet + ",mp=/srv"})
	k.edit(101, func(g *Guest) { g.Running = true })
	task := k.run(k.c.MigrateCT(kitRoot, "pve1", 101, map[string]string{"target": "pve2", "restart": "1"}))
	wantLog(t, task, []string{
		"shutdown CT 101",
		"starting migration of CT 101 to node 'pve2' (127.0.0.2)",
		"found local volume 'local-lvm:vm-101-disk-0' (in current VM config)",
		"found local volume 'local-lvm:vm-900-disk-1' (in current VM config)",
		"can't migrate local volume 'local-lvm:vm-900-disk-1': owned by other guest (owner = 900)",
		"ERROR: can't migrate CT - check log",
		"aborting phase 1 - cleanup resources",
		"start final cleanup",
		"start container on source node",
		"ERROR: migration aborted (duration HH:MM:SS): can't migrate CT - check log",
		"| TASK ERROR: migration aborted",
	})
	if g := k.guest(101); g.Node != "pve1" || !g.Running || g.Lock() != "" {
		t.Errorf("node %s running %v lock %q", g.Node, g.Running, g.Lock())
	}
}

// TestCluster_MigrateCT_phase3Problems: a source LV another running CT
// still mounts cannot be removed; the CT is on the target all the same
// and the task ends "migration problems".
func TestCluster_MigrateCT_phase3Problems(t *testing.T) {
	t.Parallel()
	k := migKit(t)
	k.ct("pve1", 101, nil)
	data := k.vol("pve1", 101, gib)
	k.edit(101, func(g *Guest) { g.Config["unused0"] = data })
	k.ct("pve1", 102, map[string]string{"mp0": data + ",mp=/shared"})
	k.edit(102, func(g *Guest) { g.Running = true })
	task := k.run(k.c.MigrateCT(kitRoot, "pve1", 101, map[string]string{"target": "pve2"}))
	if task.ExitStatus != "migration problems" {
		t.Errorf("exitstatus %q", task.ExitStatus)
	}
	got := migLog(task)
	for _, want := range []string{
		"ERROR: removing local copy of 'local-lvm:vm-101-disk-1' failed - lvremove 'pve/vm-101-disk-1' error:   Logical volume pve/vm-101-disk-1 in use.",
		"ERROR: migration finished with problems (duration HH:MM:SS)",
		"| TASK ERROR: migration problems",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if g := k.guest(101); g.Node != "pve2" || g.Lock() != "" {
		t.Errorf("node %s lock %q", g.Node, g.Lock())
	}
	if k.volume("pve1", data) == nil || k.volume("pve2", data) == nil {
		t.Error("want two diverged copies of the in-use volume")
	}
}

// TestCluster_MigrateCT_sharedVolumes: shared volumes are neither copied
// nor owner-checked; the same data is there on the target.
func TestCluster_MigrateCT_sharedVolumes(t *testing.T) {
	t.Parallel()
	k := migKit(t, SharedNFS, SharedRBD)
	k.ct("pve1", 101, nil)
	nfsPet := k.image("pve3", "nfs", 900, gib) // named for a CT that does not even exist
	rbdVol := k.image("pve1", "rbd", 101, gib)
	k.edit(101, func(g *Guest) {
		g.Config["mp0"] = nfsPet + ",mp=/srv"
		g.Config["mp1"] = rbdVol + ",mp=/db"
	})
	if nfsPet != "nfs:900/vm-900-disk-0.raw" || rbdVol != "rbd:vm-101-disk-0" {
		t.Fatalf("volids %s %s", nfsPet, rbdVol)
	}
	k.writeFile("pve1", nfsPet, "marker", "shared")
	task := k.run(k.c.MigrateCT(kitRoot, "pve1", 101, map[string]string{"target": "pve2"}))
	wantLog(t, task, []string{
		"starting migration of CT 101 to node 'pve2' (127.0.0.2)",
		"volume 'nfs:900/vm-900-disk-0.raw' is on shared storage 'nfs'",
		"volume 'rbd:vm-101-disk-0' is on shared storage 'rbd'",
		"found local volume 'local-lvm:vm-101-disk-0' (in current VM config)",
		"successfully imported 'local-lvm:vm-101-disk-0'",
		`|   Logical volume "vm-101-disk-0" successfully removed.`,
		"start final cleanup",
		"migration finished successfully (duration HH:MM:SS)",
		"| TASK OK",
	})
	if body, err := k.readFile("pve2", nfsPet, "marker"); body != "shared" {
		t.Errorf("shared marker from pve2 = %q, %v", body, err)
	}
	if k.volume("pve2", rbdVol) == nil {
		t.Error("rbd volume not visible from pve2")
	}
}

// TestCluster_SharedStorage: one copy of a shared volume that every node
// sees; a CT on another node may use a volume named for any vmid, and
// destroying the owner frees it regardless.
func TestCluster_SharedStorage(t *testing.T) {
	t.Parallel()
	k := migKit(t, SharedNFS)
	k.ct("pve1", 900, nil)
	pet := k.image("pve1", "nfs", 900, gib)
	k.edit(900, func(g *Guest) { g.Config["mp0"] = pet + ",mp=/pet" })
	k.writeFile("pve1", pet, "marker", "pet")
	k.ct("pve2", 101, map[string]string{"mp0": pet + ",mp=/pet"})

	p1, err1 := k.c.VolumePath("pve1", pet)
	p3, err3 := k.c.VolumePath("pve3", pet)
	if err1 != nil || err3 != nil || p1 != p3 {
		t.Fatalf("paths %s (%v) and %s (%v) differ", p1, err1, p3, err3)
	}
	for _, node := range []string{"pve1", "pve2", "pve3"} {
		list, err := k.c.Content(node, "nfs", "", 0)
		// The owner CT 900 is on pve1, but the vmlist is cluster-wide.
		if err != nil || len(list) != 1 || list[0].VolID() != pet || list[0].ContentType != "rootdir" {
			t.Errorf("content of nfs on %s = %v, %v", node, list, err)
		}
	}
	var storages []string
	for _, r := range k.c.Resources("storage") {
		if r.Storage == "nfs" {
			storages = append(storages, r.ID)
			if !r.Shared || r.PluginType != "nfs" || r.Content != "backup,images,rootdir" {
				t.Errorf("resource %+v", r)
			}
		}
	}
	if !slices.Equal(storages, []string{"storage/pve1/nfs", "storage/pve2/nfs", "storage/pve3/nfs"}) {
		t.Errorf("nfs resources %v", storages)
	}

	k.run(k.c.DestroyCT(kitRoot, "pve1", 900, nil))
	if k.volume("pve2", pet) != nil {
		t.Error("destroying owner 900 on pve1 left its shared volume that CT 101 on pve2 uses; PVE frees it")
	}
	if g := k.guest(101); g.Config["mp0"] != pet+",mp=/pet" {
		t.Errorf("CT 101's config changed: %v", g.Config)
	}
}

// TestCluster_MigrateCT_lockDuringTask: GET config shows lock: migrate
// while the task runs, and destroy refuses the CT synchronously.
func TestCluster_MigrateCT_lockDuringTask(t *testing.T) {
	t.Parallel()
	k := newOpsKitWith(t, Options{Nodes: 2, TimeScale: 1, HasTimeScale: true, Durations: map[string]time.Duration{"vzmigrate": time.Hour}})
	k.ct("pve1", 101, nil)
	upid, err := k.c.MigrateCT(kitRoot, "pve1", 101, map[string]string{"target": "pve2"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the CT's lock 'migrate'", func() bool {
		if k.guest(101).Config["lock"] == "migrate" {
			return true
		}
		if task, _ := k.c.Task("pve1", upid); task.Status == "stopped" {
			t.Fatalf("task ended before locking: %v", task.Log)
		}
		return false
	})
	_, err = k.c.DestroyCT(kitRoot, "pve1", 101, nil)
	wantError(t, err, http.StatusInternalServerError, "CT is locked (migrate)\n")
	var lock string
	for _, r := range k.c.Resources("vm") {
		if r.VMID == 101 {
			lock = r.Lock
		}
	}
	if lock != "migrate" {
		t.Errorf("/cluster/resources lock = %q", lock)
	}
}

func TestCluster_MigratePrecondition(t *testing.T) {
	t.Parallel()
	k := migKit(t)
	k.ct("pve2", 101, nil)
	k.c.SetNodeOnline("pve3", false) // not checked
	p, err := k.c.MigratePrecondition("pve2", 101)
	if err != nil || p.Running || !slices.Equal(p.AllowedNodes, []string{"pve1", "pve3"}) || len(p.NotAllowedNodes) != 0 {
		t.Errorf("precondition = %+v, %v", p, err)
	}
	k.edit(101, func(g *Guest) { g.Config["lock"] = "backup" })
	_, err = k.c.MigratePrecondition("pve2", 101)
	wantError(t, err, 500, "CT is locked (backup)\n")
	_, err = k.c.MigratePrecondition("pve1", 101)
	wantError(t, err, 500, "Configuration file 'nodes/pve1/lxc/101.conf' does not exist\n")
}

// TestCluster_NodeOffline_resources: a dead node's CTs keep their last
// status until the RRD entries expire (5 min, scaled), then "unknown"
// without stats; the config stays under the dead node.
func TestCluster_NodeOffline_resources(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	k := newOpsKitWith(t, Options{Nodes: 2, TimeScale: 1, HasTimeScale: true, Now: func() time.Time { return now }})
	k.ct("pve2", 101, nil)
	k.edit(101, func(g *Guest) { g.Running = true })
	status := func() (ct, node, storage string) {
		for _, r := range k.c.Resources("") {
			switch {
			case r.Type == "lxc" && r.VMID == 101:
				ct = r.Status + "@" + r.Node
			case r.ID == "node/pve2":
				node = r.Status
			case r.ID == "storage/pve2/local-lvm":
				storage = r.Status
			}
		}
		return
	}
	tests := []struct {
		name              string
		step              func()
		ct, node, storage string
	}{
		{"online", func() {}, "running@pve2", "online", "available"},
		{"just offline", func() { k.c.SetNodeOnline("pve2", false) }, "running@pve2", "offline", "available"},
		{"299 s later", func() { now = now.Add(299 * time.Second) }, "running@pve2", "offline", "available"},
		{"300 s later", func() { now = now.Add(time.Second) }, "unknown@pve2", "offline", "unknown"},
		{"back online", func() { k.c.SetNodeOnline("pve2", true) }, "running@pve2", "online", "available"},
	}
	for _, tc := range tests {
		tc.step()
		ct, node, storage := status()
		if ct != tc.ct || node != tc.node || storage != tc.storage {
			t.Errorf("%s: ct %s node %s storage %s, want %s %s %s", tc.name, ct, node, storage, tc.ct, tc.node, tc.storage)
		}
	}
	k.c.SetNodeOnline("pve2", false)
	now = now.Add(time.Hour)
	for _, r := range k.c.Resources("vm") {
		b, _ := r.MarshalJSON()
		if strings.Contains(string(b), `"maxmem"`) || strings.Contains(string(b), `"name"`) || !strings.Contains(string(b), `"status":"unknown"`) {
			t.Errorf("expired entry %s", b)
		}
	}
}

// TestMigrateLocks_timeout: the guest migration flock's timeout names its
// own lock file, not the config flock's.
func TestMigrateLocks_timeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, tc := range []struct {
		locks *configLocks
		msg   string
	}{
		{newMigrateLocks(), "can't lock file '/var/lock/pve-manager/pve-migrate-101' - got timeout\n"},
		{newConfigLocks(), "can't lock file '/run/lock/lxc/pve-config-101.lock' - got timeout\n"},
	} {
		release, err := tc.locks.acquire(ctx, 101, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tc.locks.acquire(ctx, 101, time.Millisecond)
		wantError(t, err, http.StatusInternalServerError, tc.msg)
		release()
	}
}

// TestCluster_SharedStorage_addedOnReopen: asking for a shared storage
// when reopening a state made without it adds it.
func TestCluster_SharedStorage_addedOnReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := Open(Options{Dir: dir, Nodes: 2, TimeScale: 0, HasTimeScale: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.SharedStorages(); len(got) != 0 {
		t.Errorf("fresh state has shared storages %v", got)
	}
	c.Close()
	c, err = Open(Options{Dir: dir, Nodes: 2, TimeScale: 0, HasTimeScale: true, SharedStorage: []string{SharedRBD, SharedNFS}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.SharedStorages(); !slices.Equal(got, []string{"rbd", "nfs"}) {
		t.Errorf("shared storages %v, want [rbd nfs]", got)
	}
	if _, err := Open(Options{Dir: t.TempDir(), SharedStorage: []string{"cifs"}}); err == nil || err.Error() != `model: unknown shared storage "cifs" (want nfs or rbd)` {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestMigration_duration(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	k := newOpsKitWith(t, Options{Now: func() time.Time { return now }})
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{
		{0, "00:00:00"},
		{999 * time.Millisecond, "00:00:00"},
		{3725 * time.Second, "01:02:05"},
		{-time.Second, "00:00:00"},
	} {
		if got := (&migration{c: k.c, startedAt: now.Add(-tc.ago)}).duration(); got != tc.want {
			t.Errorf("%v ago: %s, want %s", tc.ago, got, tc.want)
		}
	}
}
