package model

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/testenv"
)

func TestCluster_NextID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		guests  []int
		vmid    string
		want    int
		wantErr *Error
	}{
		{name: "empty datacenter", want: 100},
		{name: "lowest gap", guests: []int{100, 101, 103}, want: 102},
		{name: "asked id is free", guests: []int{100}, vmid: "150", want: 150},
		{name: "asked id is used", guests: []int{101}, vmid: "101",
			wantErr: ParamError(map[string]string{"vmid": "VM 101 already exists"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			for _, vmid := range tt.guests {
				k.ct("pve", vmid, nil)
			}
			got, err := k.c.NextID(tt.vmid)
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, err); diff != "" {
					t.Fatalf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("NextID(%q) = %d, %v; want %d", tt.vmid, got, err, tt.want)
			}
		})
	}
}

// TestCluster_Resources compares the wire form of every resource type
// with testdata/cluster_resources.json (rewrite with -update).
func TestCluster_Resources(t *testing.T) {
	t.Parallel()
	now := time.Unix(1777629600, 0)
	k := newOpsKitWith(t, Options{Now: func() time.Time { return now }})
	k.ct("pve", 101, map[string]string{"cores": "2", "tags": "corral;web", "lock": "backup"})
	k.ct("pve", 900, map[string]string{"memory": "64", "template": "1"})
	k.writeFile("pve", "local-lvm:vm-101-disk-0", "etc/hostname", "web\n")
	k.edit(101, func(g *Guest) {
		g.Running = true
		g.StartedAt = now.Unix() - 90
		// Pin the template's size, which depends on the compressor.
		k.c.st.Volumes[volumeKey("pve", DefaultTemplate)].Size = 1000
	})
	got, err := json.MarshalIndent(k.c.Resources(""), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, filepath.Join("testdata", "cluster_resources.json"), append(got, '\n'))

	for _, tt := range []struct {
		typ   string
		count int
	}{{"vm", 2}, {"node", 1}, {"storage", 2}, {"sdn", 1}} {
		if got := len(k.c.Resources(tt.typ)); got != tt.count {
			t.Errorf("Resources(%q): %d entries, want %d", tt.typ, got, tt.count)
		}
	}
}

func TestCluster_ClusterStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		nodes int
		want  string
	}{
		{1, `[{"id":"node/pve","ip":"127.0.0.1","level":"","local":1,"name":"pve","nodeid":0,"online":1,"type":"node"}]`},
		{2, `[{"id":"cluster","name":"corral-sim","nodes":2,"quorate":1,"type":"cluster","version":2},` +
			`{"id":"node/pve1","ip":"127.0.0.1","level":"","local":1,"name":"pve1","nodeid":1,"online":1,"type":"node"},` +
			`{"id":"node/pve2","ip":"127.0.0.2","level":"","local":0,"name":"pve2","nodeid":2,"online":1,"type":"node"}]`},
	}
	for _, tt := range tests {
		k := newOpsKitWith(t, Options{Nodes: tt.nodes})
		got, err := json.Marshal(k.c.ClusterStatus())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%d nodes:\n got %s\nwant %s", tt.nodes, got, tt.want)
		}
	}
}

func TestCluster_NodeStatus(t *testing.T) {
	t.Parallel()
	now := time.Unix(1777629600, 0)
	k := newOpsKitWith(t, Options{Now: func() time.Time { return now.Add(-time.Hour) }})
	k.c.opts.Now = func() time.Time { return now } // the node booted an hour ago
	k.ct("pve", 101, nil)
	k.edit(101, func(g *Guest) { g.Running = true })

	st, err := k.c.NodeStatus("pve")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Uptime, int64(3600); got != want {
		t.Errorf("uptime = %d, want %d", got, want)
	}
	if got, want := st.Memory.Used, int64(hostBaseMem+guestIdleMem); got != want {
		t.Errorf("memory used = %d, want %d", got, want)
	}
	if got, want := st.PVEVersion, "pve-manager/9.1.9/ee7bad0a3d1546c7"; got != want {
		t.Errorf("pveversion = %q, want %q", got, want)
	}
	if st.RootFS.Total != 100*gib || st.RootFS.Used+st.RootFS.Avail != st.RootFS.Total {
		t.Errorf("rootfs = %+v", st.RootFS)
	}
	if _, err := k.c.NodeStatus("nope"); err == nil {
		t.Error("NodeStatus(nope) succeeded")
	}

	nodes := k.c.Nodes()
	if len(nodes) != 1 || nodes[0].Node != "pve" || nodes[0].Status != "online" || nodes[0].Mem != st.Memory.Used {
		t.Errorf("Nodes() = %+v", nodes)
	}
}

// The hand-written encoder writes what json.Marshal writes of the same
// map, for every kind of resource and awkward strings.
func TestResourceJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, r := range []Resource{
		{ID: "lxc/101", Type: "lxc", Node: "pve", Status: "running", VMID: 101, Name: "web", Tags: "corral;corral-app-web", CPU: 0.0125, MaxCPU: 2, Mem: 1 << 20, MaxMem: 512 << 20, Uptime: 42, Disk: 7, MaxDisk: 8 << 30},
		{ID: "lxc/102", Type: "lxc", Node: "pve", Status: "unknown", VMID: 102, Lock: "create", NoStats: true},
		{ID: "lxc/103", Type: "lxc", Node: "pve", Status: "stopped", VMID: 103, Name: "a<b>&\"c\\ é\n", CPU: 1e-9, Template: true},
		{ID: "node/pve", Type: "node", Node: "pve", Status: "online", CPU: 0.5, MaxCPU: 2, Mem: 3, MaxMem: 4, Disk: 5, MaxDisk: 6, Uptime: 7},
		{ID: "node/pve2", Type: "node", Node: "pve2", Status: "offline", NoStats: true},
		{ID: "storage/pve/local-lvm", Type: "storage", Node: "pve", Status: "available", Storage: "local-lvm", Content: "images,rootdir", PluginType: "lvmthin", Shared: true, Disk: 1, MaxDisk: 2},
		{ID: "sdn/pve/localnetwork", Type: "sdn", Node: "pve", Status: "ok", SDN: "localnetwork"},
	} {
		want, err := json.Marshal(r.fields())
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", r.ID, got, want)
		}
	}
	list, _ := ResourceList{{ID: "sdn/a", Type: "sdn"}, {ID: "sdn/b", Type: "sdn"}}.MarshalJSON()
	if !json.Valid(list) || string(list[:1]) != "[" {
		t.Errorf("list %s", list)
	}
}
