package sim

import (
	"strconv"

	"github.com/corralhq/corral/internal/sim/model"
)

// Pool routes (pve-manager PVE/API2/Pool.pm). PVE 8.1 moved them to the
// query form (/pools?poolid=, which can name a nested pool "a/b"); the
// /pools/{poolid} forms are the deprecated ones, still served.

// poolAPI serves /pools.
type poolAPI struct {
	cluster *model.Cluster
}

func (a *poolAPI) register(route routeFunc) {
	route("GET", "/pools", a.getPools)
	route("POST", "/pools", a.postPool)
	route("PUT", "/pools", a.putPool)
	route("DELETE", "/pools", a.deletePool)
	route("GET", "/pools/{poolid}", a.getPool)
	route("PUT", "/pools/{poolid}", a.putPool)
	route("DELETE", "/pools/{poolid}", a.deletePool)
}

// getPools is Pool.pm index: every pool the caller may audit or, with
// poolid, that one pool with its members in a list of one. The query
// form's Pool.Audit check is made with noerr and its result ignored in
// PVE, so it refuses nobody; the emulator does the same.
func (a *poolAPI) getPools(r *request) (any, error) {
	id, ok := r.params["poolid"]
	if !ok {
		return a.cluster.Pools(r.auth), nil
	}
	info, err := a.cluster.Pool(id, r.params["type"])
	if err != nil {
		return nil, err
	}
	return []model.PoolInfo{info}, nil
}

// getPool is read_pool: the index's one entry.
func (a *poolAPI) getPool(r *request) (any, error) {
	return a.cluster.Pool(r.params["poolid"], r.params["type"])
}

func (a *poolAPI) postPool(r *request) (any, error) {
	return nil, a.cluster.AddPool(r.params["poolid"], r.params["comment"])
}

func (a *poolAPI) putPool(r *request) (any, error) {
	u := model.PoolUpdate{
		PoolID: r.params["poolid"], AllowMove: boolParam(r, "allow-move"), Delete: boolParam(r, "delete"),
		Storage: splitList(r.params["storage"]),
	}
	if c, ok := r.params["comment"]; ok {
		u.Comment = &c
	}
	for _, v := range splitList(r.params["vms"]) {
		vmid, err := strconv.Atoi(v)
		if err != nil { // the schema's pve-vmid-list check let it through
			return nil, model.ParamError(map[string]string{"vms": "value does not look like a valid VM ID\n"})
		}
		u.VMs = append(u.VMs, vmid)
	}
	return nil, a.cluster.UpdatePool(r.auth, u)
}

func (a *poolAPI) deletePool(r *request) (any, error) {
	return nil, a.cluster.DeletePool(r.params["poolid"])
}
