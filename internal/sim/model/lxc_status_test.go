package model

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/testutil/refdata"
)

// ctTestFixtureCTs seeds the CTs of fixture lxc-list.json.
func ctTestFixtureCTs(k *opsKit) {
	k.ct("pve", 101, map[string]string{"hostname": "web-01", "cores": "2", "memory": "1024", "swap": "512", "tags": "app;web"})
	k.ct("pve", 900, map[string]string{"hostname": "vol-holder-900", "cores": "1", "memory": "64", "swap": "0", "tags": "pet-volumes"})
	k.ct("pve", 102, map[string]string{"hostname": "worker-02", "cores": "1", "lock": "backup"})
	k.ct("pve", 9000, map[string]string{"hostname": "tmpl-debian", "cores": "1", "template": "1"})
	k.edit(900, func(g *Guest) { g.Config["rootfs"] = "local-lvm:vm-900-disk-0,size=1G" })
	k.edit(102, func(g *Guest) { g.Config["rootfs"] = "local-lvm:vm-102-disk-0,size=4G" })
	k.edit(9000, func(g *Guest) { g.Config["rootfs"] = "local-lvm:vm-9000-disk-0" }) // no size: 4 GiB
	k.edit(101, func(g *Guest) { g.Running, g.PID, g.StartedAt = true, 239874, k.c.now().Unix()-3605 })
}

func TestCluster_ListCTs_fixture(t *testing.T) {
	t.Parallel()
	shared := refdata.Dir(t)
	var fixture struct{ Data []map[string]any }
	readFixture(t, shared, "lxc-list.json", &fixture)

	k := newOpsKit(t)
	ctTestFixtureCTs(k)
	list, err := k.c.ListCTs("pve")
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	byID := map[float64]map[string]any{}
	for _, ct := range got {
		byID[ct["vmid"].(float64)] = ct
	}
	if len(got) != len(fixture.Data) {
		t.Fatalf("listed %d CTs, want %d", len(got), len(fixture.Data))
	}
	for _, want := range fixture.Data {
		vmid := want["vmid"].(float64)
		have := byID[vmid]
		if have == nil {
			t.Errorf("CT %v not listed", vmid)
			continue
		}
		if diff := cmp.Diff(keySet(want), keySet(have)); diff != "" {
			t.Errorf("CT %v fields (-fixture +got):\n%s", vmid, diff)
		}
		compare := []string{"vmid", "type", "status", "name", "cpus", "tags", "lock", "template", "maxmem", "maxswap", "pid", "uptime"}
		if want["status"] == "stopped" {
			compare = append(compare, "maxdisk", "mem", "disk", "cpu")
		}
		for _, f := range compare {
			if !cmp.Equal(want[f], have[f]) {
				t.Errorf("CT %v %s = %v, want %v", vmid, f, have[f], want[f])
			}
		}
	}
}

func keySet(m map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func TestCluster_CTStatus(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	ctTestFixtureCTs(k)
	k.edit(900, func(g *Guest) { delete(g.Config, "cores"); g.Config["cpulimit"] = "1.5"; g.Config["hostname"] = "" })
	s, err := k.c.CTStatus("pve", 900)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUs != 1.5 || s.Name != "CT900" || s.Status != "stopped" || s.PID != 0 {
		t.Errorf("status = %+v, want cpus 1.5 from cpulimit, name CT900, stopped", s)
	}
	k.edit(900, func(g *Guest) { delete(g.Config, "cpulimit") })
	if s, _ := k.c.CTStatus("pve", 900); s.CPUs != 8 {
		t.Errorf("cpus without cores or cpulimit = %v, want the node's 8", s.CPUs)
	}
	s, err = k.c.CTStatus("pve", 101)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "running" || s.PID != 239874 || s.Uptime != 3605 || s.Mem == 0 || s.MaxDisk != 8*gib {
		t.Errorf("running status = %+v", s)
	}
	_, err = k.c.CTStatus("pve", 555)
	wantError(t, err, 500, "Configuration file 'nodes/pve/lxc/555.conf' does not exist\n")
	_, err = k.c.ListCTs("nope")
	wantError(t, err, 400, "Parameter verification failed.\n")
}
