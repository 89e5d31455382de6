package model

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ctTestPut is UpdateCTConfig on node "pve", failing the test on error.
func ctTestPut(k *opsKit, auth Auth, vmid int, params map[string]string) {
	k.t.Helper()
	if err := k.c.UpdateCTConfig(auth, "pve", vmid, params); err != nil {
		k.t.Fatalf("PUT %v: %v", params, err)
	}
}

func TestCluster_UpdateCTConfig_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		auth   string // root (default), operator, audit, nosdn
		setup  func(k *opsKit)
		params map[string]string
		status int
		msg    string
		errs   map[string]string
	}{
		{name: "nothing to do", params: map[string]string{}, status: 500, msg: "no options specified\n"},
		{name: "only a digest", params: map[string]string{"digest": "abc"}, status: 500, msg: "no options specified\n"},
		{name: "stale digest", params: map[string]string{"cores": "2", "digest": "0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b"},
			status: 500, msg: "detected modified configuration - file changed by other user? Try again.\n"},
		{name: "locked", setup: func(k *opsKit) { k.edit(105, func(g *Guest) { g.Config["lock"] = "backup" }) },
			params: map[string]string{"cores": "2"}, status: 500, msg: "CT is locked (backup)\n"},
		{name: "unknown option to delete", params: map[string]string{"delete": "foo"},
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"delete": "unknown option 'foo'"}},
		{name: "set and delete", params: map[string]string{"cores": "2", "delete": "cores"},
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"delete": "you can't use '-cores' and -delete cores' at the same time"}},
		{name: "delete and revert", params: map[string]string{"delete": "cores", "revert": "cores"},
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"delete": "you can't use '-delete cores' and '-revert cores' at the same time"}},
		{name: "set and revert", params: map[string]string{"cores": "2", "revert": "cores"},
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"revert": "you can't use '-cores' and '-revert cores' at the same time"}},
		{name: "unknown option to revert", params: map[string]string{"revert": "mp300"},
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"revert": "unknown option 'mp300'"}},
		{name: "required option", params: map[string]string{"delete": "memory"}, status: 500, msg: "unable to delete required option 'memory'\n"},
		{name: "read-only on delete", params: map[string]string{"delete": "unprivileged"}, status: 500, msg: "unable to delete read-only option: 'unprivileged'\n"},
		{name: "read-only on set", params: map[string]string{"unprivileged": "0"}, status: 500, msg: "unable to modify read-only option: 'unprivileged'\n"},
		{name: "protected mount point", setup: func(k *opsKit) { k.edit(105, func(g *Guest) { g.Config["protection"] = "1" }) },
			params: map[string]string{"mp0": "local-lvm:1,mp=/data"}, status: 500, msg: "can't update CT 105 drive 'mp0' - protection mode enabled\n"},
		{name: "protected unused", setup: func(k *opsKit) {
			vol := k.vol("pve", 105, gib)
			k.edit(105, func(g *Guest) { g.Config["protection"] = "1"; g.Config["unused0"] = vol })
		}, params: map[string]string{"delete": "unused0"}, status: 500, msg: "can't remove CT 105 drive 'unused0' - protection mode enabled\n"},
		{name: "storage without rootdir", params: map[string]string{"mp0": "local:1,mp=/data"},
			status: 500, msg: "storage 'local' does not allow content type 'rootdir' (Container)\n"},
		{name: "too many unused volumes", setup: func(k *opsKit) {
			vol := k.vol("pve", 105, gib)
			k.edit(105, func(g *Guest) {
				for i := 0; i < maxUnused; i++ {
					g.Config["unused"+strconv.Itoa(i)] = "local-lvm:vm-105-disk-" + strconv.Itoa(100+i)
				}
				g.Config["mp0"] = vol + ",mp=/data"
			})
		}, params: map[string]string{"delete": "mp0"},
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"mp0": "unable to apply pending change mp0 : Too many unused volumes - please delete them first.\n"}},
		{name: "bind mount from a token", auth: "operator", params: map[string]string{"mp0": "/srv/data,mp=/data"},
			status: 403, msg: "Permission check failed (mount point type bind is only allowed for root@pam)\n"},
		{name: "features from a token", auth: "operator", params: map[string]string{"features": "nesting=1,keyctl=1"},
			status: 403, msg: "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)\n"},
		{name: "features deleted from a token", auth: "operator", setup: func(k *opsKit) { k.edit(105, func(g *Guest) { g.Config["features"] = "nesting=1,fuse=1" }) },
			params: map[string]string{"delete": "features"},
			status: 403, msg: "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)\n"},
		{name: "features of a privileged CT", auth: "operator", setup: func(k *opsKit) { k.edit(105, func(g *Guest) { delete(g.Config, "unprivileged") }) },
			params: map[string]string{"features": "nesting=1"},
			status: 403, msg: "Permission check failed (changing feature flags for privileged container is only allowed for root@pam)\n"},
		{name: "disk key without VM.Config.Disk", auth: "audit", params: map[string]string{"delete": "mp0"},
			status: 403, msg: "Permission check failed (/vms/105, VM.Config.Disk)\n"},
		{name: "bridge without SDN.Use", auth: "nosdn", params: map[string]string{"net1": "name=eth1,bridge=vmbr0,tag=20"},
			status: 403, msg: "Permission check failed (/sdn/zones/localnetwork/vmbr0/20, SDN.Use)\n"},
		{name: "missing CT", setup: func(k *opsKit) { k.edit(105, func(g *Guest) { g.Node = "elsewhere" }) },
			params: map[string]string{"cores": "2"}, status: 500, msg: "Configuration file 'nodes/pve/lxc/105.conf' does not exist\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", 105, nil)
			if tt.setup != nil {
				tt.setup(k)
			}
			auth := kitRoot
			switch tt.auth {
			case "operator":
				auth = kitOperator
			case "audit":
				auth = ctTestLimitedUser(k, "nodisk@pve", "VM.Config.Disk")
			case "nosdn":
				auth = ctTestLimitedUser(k, "nosdn@pve", "SDN.Use")
			}
			before, _ := k.c.ConfigText(105)
			err := k.c.UpdateCTConfig(auth, "pve", 105, tt.params)
			wantError(t, err, tt.status, tt.msg)
			if diff := cmp.Diff(tt.errs, err.(*Error).Params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
			if after, _ := k.c.ConfigText(105); after != before {
				t.Errorf("a refused PUT changed the config:\n%s\nto\n%s", before, after)
			}
		})
	}
}

func TestCluster_UpdateCTConfig_stopped(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.ct("pve", 105, nil)
	pet := k.vol("pve", 999, 4*gib)

	// A new disk: the lowest free name, size= from the request's GiB.
	ctTestPut(k, kitOperator, 105, map[string]string{"mp0": "local-lvm:2,mp=/data,size=99G,backup=1"})
	// Another CT's volume: allowed by Datastore.Allocate, size rescanned.
	ctTestPut(k, kitOperator, 105, map[string]string{"mp1": pet + ",mp=/pet,size=1G"})
	// Fast options and a network interface with a generated MAC.
	ctTestPut(k, kitOperator, 105, map[string]string{"cores": "2", "net1": "name=eth1,bridge=vmbr0,ip=dhcp", "nameserver": "10.0.0.53;1.1.1.1"})
	g := k.guest(105)
	if g.Pending != nil || g.PendingDelete != nil {
		t.Errorf("pending after PUT on a stopped CT: %v %v", g.Pending, g.PendingDelete)
	}
	want := map[string]string{
		"mp0":        "local-lvm:vm-105-disk-1,mp=/data,backup=1,size=2G",
		"mp1":        "local-lvm:vm-999-disk-0,mp=/pet,size=4G",
		"cores":      "2",
		"nameserver": "10.0.0.53 1.1.1.1",
	}
	for key, v := range want {
		if g.Config[key] != v {
			t.Errorf("%s = %q, want %q", key, g.Config[key], v)
		}
	}
	if !strings.HasPrefix(g.Config["net1"], "name=eth1,bridge=vmbr0,hwaddr=BC:24:11:") || !strings.HasSuffix(g.Config["net1"], ",ip=dhcp,type=veth") {
		t.Errorf("net1 = %q", g.Config["net1"])
	}
	if v := k.volume("pve", "local-lvm:vm-105-disk-1"); v == nil || v.Size != 2*gib || v.Owner != 105 {
		t.Errorf("new volume = %+v", v)
	}

	// Detaching puts the volume into the lowest free unusedN, once.
	ctTestPut(k, kitOperator, 105, map[string]string{"delete": "mp0,mp1"})
	g = k.guest(105)
	gotUnused := map[string]string{"unused0": g.Config["unused0"], "unused1": g.Config["unused1"]}
	if diff := cmp.Diff(map[string]string{"unused0": "local-lvm:vm-105-disk-1", "unused1": pet}, gotUnused); diff != "" {
		t.Errorf("unused (-want +got):\n%s", diff)
	}
	// Re-attaching drops the unusedN that holds the same volume.
	ctTestPut(k, kitOperator, 105, map[string]string{"mp2": pet + ",mp=/pet"})
	g = k.guest(105)
	if _, ok := g.Config["unused1"]; ok {
		t.Errorf("unused1 kept after %s became mp2: %v", pet, g.Config)
	}
	// Deleting an owned unusedN frees the volume; a foreign one is only
	// dropped from the config.
	k.writeFile("pve", pet, "keep.txt", "pet data")
	ctTestPut(k, kitOperator, 105, map[string]string{"delete": "mp2"})
	ctTestPut(k, kitOperator, 105, map[string]string{"delete": "unused0,unused1"})
	g = k.guest(105)
	if _, ok := g.Config["unused0"]; ok {
		t.Errorf("unused0 still set: %v", g.Config)
	}
	if v := k.volume("pve", "local-lvm:vm-105-disk-1"); v != nil {
		t.Error("owned unused volume was not freed")
	}
	if v := k.volume("pve", pet); v == nil {
		t.Error("the pet volume was freed by a CT that does not own it")
	}
}

func TestCluster_UpdateCTConfig_running(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	data := k.vol("pve", 105, gib) // vm-105-disk-0 is the rootfs after k.ct
	k.ct("pve", 105, map[string]string{"mp0": data + ",mp=/data,size=1G"})
	k.edit(105, func(g *Guest) { g.Running, g.PID, g.StartedAt = true, 4242, 1 })

	ctTestPut(k, kitOperator, 105, map[string]string{
		"cores":    "4",                              // fast-plug
		"memory":   "1024",                           // hot-plugged
		"mp1":      "local-lvm:1,mp=/cache",          // a new mount point: hot-plugged
		"mp0":      data + ",mp=/data,ro=1",          // changing one: pending
		"features": "nesting=1",                      // pending
		"net0":     "name=eth0,bridge=vmbr0,ip=dhcp", // hot-plugged, hwaddr generated
	})
	ctTestPut(k, kitOperator, 105, map[string]string{"delete": "swap,arch,mp1"})

	current, _, err := k.c.CTConfig(kitRoot, "pve", 105, true, "")
	if err != nil {
		t.Fatal(err)
	}
	merged, digest, err := k.c.CTConfig(kitRoot, "pve", 105, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(digest) != 40 {
		t.Errorf("digest = %q", digest)
	}
	checks := []struct{ conf, key, want string }{
		{"current", "cores", "4"},
		{"current", "memory", "1024"},
		{"current", "mp1", "local-lvm:vm-105-disk-2,mp=/cache,size=1G"},
		{"current", "mp0", data + ",mp=/data,size=1G"},
		{"current", "features", ""},
		{"current", "swap", ""},
		{"current", "arch", "amd64"},
		{"merged", "mp0", data + ",mp=/data,ro=1"},
		{"merged", "features", "nesting=1"},
		{"merged", "arch", ""},
		{"merged", "mp1", ""},
	}
	for _, c := range checks {
		conf := map[string]map[string]string{"current": current, "merged": merged}[c.conf]
		if conf[c.key] != c.want {
			t.Errorf("%s %s = %q, want %q", c.conf, c.key, conf[c.key], c.want)
		}
	}
	if _, ok := merged["pending"]; ok {
		t.Error("GET config has a pending key")
	}

	entries, err := k.c.CTPending("pve", 105)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]PendingEntry{}
	for _, e := range entries {
		byKey[e.Key] = e
	}
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	rows := []struct {
		key, value, pending string
		del                 int
	}{
		{"mp0", data + ",mp=/data,size=1G", data + ",mp=/data,ro=1", 0},
		{"features", "<nil>", "nesting=1", 0},
		{"arch", "amd64", "<nil>", 1},
		{"cores", "4", "<nil>", 0},
		{"digest", digest, "<nil>", 0},
	}
	for _, r := range rows {
		e, ok := byKey[r.key]
		if !ok {
			t.Errorf("pending has no %s row", r.key)
			continue
		}
		if str(e.Value) != r.value || str(e.Pending) != r.pending || e.Delete != r.del {
			t.Errorf("%s row = {%s %s %d}, want {%s %s %d}", r.key, str(e.Value), str(e.Pending), e.Delete, r.value, r.pending, r.del)
		}
	}
	if _, ok := byKey["swap"]; ok {
		t.Error("swap still listed after a hot-plugged delete")
	}

	// revert drops a pending change.
	ctTestPut(k, kitOperator, 105, map[string]string{"revert": "features"})
	if merged, _, _ := k.c.CTConfig(kitRoot, "pve", 105, false, ""); merged["features"] != "" {
		t.Errorf("features after revert = %q", merged["features"])
	}

	// Start applies the rest (the start helper's applyPendingLocked).
	k.edit(105, func(g *Guest) { k.c.markStoppedLocked(g) })
	k.run(k.c.StartCT(kitRoot, "pve", 105, nil))
	g := k.guest(105)
	if g.Config["mp0"] != data+",mp=/data,ro=1,size=1G" {
		t.Errorf("mp0 after start = %q", g.Config["mp0"])
	}
	if _, ok := g.Config["arch"]; ok {
		t.Error("arch survived its pending delete across a start")
	}
	if _, ok := g.Config["mp1"]; ok || g.Config["unused0"] != "local-lvm:vm-105-disk-2" {
		t.Errorf("after start mp1 = %q, unused0 = %q; want mp1 detached into unused0", g.Config["mp1"], g.Config["unused0"])
	}
}

func TestCluster_CTConfig_views(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.ct("pve", 105, map[string]string{"description": "line one\nline two"})
	k.edit(105, func(g *Guest) {
		g.Snapshots = map[string]*Snapshot{"before": {Name: "before", Config: map[string]string{"hostname": "old", "snaptime": "1700000000"}}}
	})
	conf, _, err := k.c.CTConfig(kitRoot, "pve", 105, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := conf["description"], "line one\nline two\n"; got != want {
		t.Errorf("description = %q, want %q", got, want)
	}
	snap, _, err := k.c.CTConfig(kitRoot, "pve", 105, false, "before")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"hostname": "old", "snaptime": "1700000000"}, snap); diff != "" {
		t.Errorf("snapshot config (-want +got):\n%s", diff)
	}
	_, _, err = k.c.CTConfig(kitRoot, "pve", 105, false, "nope")
	wantError(t, err, 500, "snapshot 'nope' does not exist\n")
	_, _, err = k.c.CTConfig(kitRoot, "pve", 105, true, "before")
	wantError(t, err, 400, "Parameter verification failed.\n")
	if diff := cmp.Diff(map[string]string{"snapshot": "cannot use 'snapshot' parameter with 'current'", "current": "cannot use 'snapshot' parameter with 'current'"}, err.(*Error).Params); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
}

func TestCluster_UpdateCTConfig_volumeAccess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		drop []string
		msg  string
	}{
		{name: "without Datastore.Allocate nor Datastore.Audit", drop: []string{"Datastore.Allocate", "Datastore.Audit"},
			msg: "Permission check failed (/storage/local-lvm, Datastore.Audit)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct("pve", 105, nil)
			pet := k.vol("pve", 999, gib)
			auth := ctTestLimitedUser(k, "limited@pve", tt.drop...)
			err := k.c.UpdateCTConfig(auth, "pve", 105, map[string]string{"mp0": pet + ",mp=/pet"})
			wantError(t, err, 403, tt.msg)
		})
	}

	// With Datastore.Audit, VM.Config.Disk on the owner is what counts.
	k := newOpsKit(t)
	k.ct("pve", 105, nil)
	pet := k.vol("pve", 999, gib)
	auth := ctTestLimitedUser(k, "scoped@pve", "Datastore.Allocate")
	k.c.mu.Lock()
	err := k.c.st.Access.SetACL("/vms/999", []string{"NoAccess"}, []string{"scoped@pve"}, nil, nil, true, false)
	k.c.markCore()
	k.c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	err = k.c.UpdateCTConfig(auth, "pve", 105, map[string]string{"mp0": pet + ",mp=/pet"})
	wantError(t, err, 403, "Permission check failed (/vms/999, VM.Config.Disk)\n")
	// Its own volumes need no storage privilege beyond the schema's.
	own := k.vol("pve", 105, gib)
	ctTestPut(k, auth, 105, map[string]string{"mp0": own + ",mp=/own"})
}
