package model

import (
	"maps"
	"slices"
	"strconv"
)

// The /pools routes on the Cluster: the pool state is the Access's
// (pool.go); these take the State's lock, save what they change, and
// build the member lists from the guests and storages.

// pools answers for resource pools. It holds no *Cluster: the State's
// lock and the State, the cluster view for the members' figures and the
// journal. Cluster embeds it, so its methods are the Cluster's.
type pools struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	// view lists the members as /cluster/resources does (clusterView).
	view    interface{ Resources(typ string) []Resource }
	journal coreJournal
}

// coreJournal is what a part that changes the cluster's config files
// (the Access, the firewall) needs of persistence: to mark them changed
// and to save.
type coreJournal interface {
	markCore()
	saveLocked() error
}

// PoolSummary is one entry of GET /pools without poolid.
// Fields are in key order, as PVE's canonical JSON writes them.
type PoolSummary struct {
	Comment string `json:"comment,omitempty"`
	PoolID  string `json:"poolid"`
}

// PoolInfo is GET /pools/{poolid} (and one entry of GET /pools?poolid=).
// read_pool answers the index's entry as it is, poolid included, though
// its returns schema does not declare it.
type PoolInfo struct {
	Comment string     `json:"comment,omitempty"`
	Members []Resource `json:"members"`
	PoolID  string     `json:"poolid"`
}

// Pools is GET /pools: the pools where auth has Pool.Audit, by id.
func (pl *pools) Pools(auth Auth) []PoolSummary {
	pl.stateMu.RLock()
	defer pl.stateMu.RUnlock()
	a := pl.state().Access
	out := []PoolSummary{}
	for _, id := range slices.Sorted(maps.Keys(a.Pools)) {
		if !auth.IsRoot() && a.Check(auth, "/pool/"+id, []string{"Pool.Audit"}, false) != nil {
			continue
		}
		out = append(out, PoolSummary{PoolID: id, Comment: a.Pools[id].Comment})
	}
	return out
}

// Pool is one pool with its members as Pool.pm index lists them: the
// guests (by VMID as strings sort, of type typ when set, gone ones
// left out) with their /cluster/resources figures, then unless typ
// names a guest type the storages, each as seen from the first node that
// has it. 500 "pool '<id>' does not exist\n".
func (pl *pools) Pool(id, typ string) (PoolInfo, error) {
	pl.stateMu.RLock()
	p := pl.state().Access.Pools[id]
	var vms []int
	var storages []string
	if p != nil {
		vms, storages = poolSortedVMIDs(p.VMs), slices.Clone(p.Storage)
	}
	pl.stateMu.RUnlock()
	if p == nil {
		return PoolInfo{}, Failf("pool '%s' does not exist\n", id)
	}
	info := PoolInfo{PoolID: id, Comment: p.Comment, Members: []Resource{}}
	byID := map[string]Resource{}
	for _, r := range pl.view.Resources("") {
		r.Pool = "" // extract_vm_stats' entry: no pool
		if _, seen := byID[r.ID]; !seen {
			byID[r.ID] = r
		}
		if r.Type == "storage" {
			if _, seen := byID["storage:"+r.Storage]; !seen {
				byID["storage:"+r.Storage] = r
			}
		}
	}
	for _, vmid := range vms {
		for _, kind := range []string{"lxc", "qemu"} { // a VMID is one kind's
			r, ok := byID[kind+"/"+strconv.Itoa(vmid)]
			if ok && (typ == "" || typ == kind) {
				info.Members = append(info.Members, r)
			}
		}
	}
	if typ == "" || typ == "storage" {
		for _, sid := range storages {
			if r, ok := byID["storage:"+sid]; ok {
				info.Members = append(info.Members, r)
			}
		}
	}
	return info, nil
}

// AddPool is POST /pools.
func (pl *pools) AddPool(id, comment string) error {
	return pl.change(func(st *State) error { return st.Access.AddPool(id, comment) })
}

// UpdatePool is PUT /pools and PUT /pools/{poolid}.
func (pl *pools) UpdatePool(auth Auth, u PoolUpdate) error {
	return pl.change(func(st *State) error { return st.Access.UpdatePool(auth, u) })
}

// DeletePool is DELETE /pools and DELETE /pools/{poolid}.
func (pl *pools) DeletePool(id string) error {
	return pl.change(func(st *State) error {
		guest := func(vmid int) bool { return st.Guests[vmid] != nil || st.VMs[vmid] != nil }
		storage := func(sid string) bool { return st.storage(sid) != nil }
		return st.Access.DeletePool(id, guest, storage)
	})
}

// change runs fn on the State under its lock and, when it succeeds,
// saves what it changed.
func (pl *pools) change(fn func(st *State) error) error {
	pl.stateMu.Lock()
	defer pl.stateMu.Unlock()
	if err := fn(pl.state()); err != nil {
		return err
	}
	pl.journal.markCore()
	return pl.journal.saveLocked()
}

// PoolExists is check_pool_exist (403 when the pool does not exist).
func (pl *pools) PoolExists(id string) error {
	pl.stateMu.RLock()
	defer pl.stateMu.RUnlock()
	return pl.state().Access.PoolExists(id)
}
