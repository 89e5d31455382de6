package model

import "testing"

// poolResources sums the running members of each pool as pve-manager's
// resources does: the longest uptime, memory added, CPU weighted by the
// members' CPUs; members without an uptime count for nothing.
func TestPoolResources_figures(t *testing.T) {
	t.Parallel()
	a := &Access{Pools: map[string]*Pool{"web": {ID: "web", VMs: []int{101, 102, 103}}, "idle": {ID: "idle"}}}
	guests := []Resource{
		{ID: "lxc/101", Type: "lxc", Pool: "web", Uptime: 50, Mem: 100, MaxMem: 1000, CPU: 0.5, MaxCPU: 2},
		{ID: "lxc/102", Type: "lxc", Pool: "web", Uptime: 70, Mem: 10, MaxMem: 500, CPU: 0.25, MaxCPU: 2},
		{ID: "lxc/103", Type: "lxc", Pool: "web", Mem: 999, MaxMem: 999, MaxCPU: 8},
	}
	got := poolResources(a, guests)
	if len(got) != 2 || got[0].ID != "/pool/idle" || got[0].PoolStats {
		t.Fatalf("pool entries: %+v", got)
	}
	web := got[1]
	if !web.PoolStats || web.Uptime != 70 || web.Mem != 110 || web.MaxMem != 1500 || web.MaxCPU != 4 {
		t.Errorf("web: %+v", web)
	}
	if want := (0.5*2 + 0.25*2) / 4; web.CPU < want-1e-9 || web.CPU > want+1e-9 {
		t.Errorf("web cpu %v, want %v", web.CPU, want)
	}
	b := string(web.AppendJSON(nil))
	if b != `{"cpu":0.375,"id":"/pool/web","maxcpu":4,"maxmem":1500,"mem":110,"pool":"web","type":"pool","uptime":70}` {
		t.Errorf("web JSON %s", b)
	}
}
