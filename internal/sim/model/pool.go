package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Pools are user.cfg's "pool:" lines (pve-access-control AccessControl.pm
// parse_user_config; pve-manager PVE/API2/Pool.pm): a named set of guests
// and storages, up to three levels deep ("prod/web/db"), whose ACL path
// /pool/<id> grants roles on its members. They live in the Access state
// because PVE keeps them in user.cfg, under the same lock.

// Pool is one pool.
type Pool struct {
	ID      string `json:"poolid"`
	Comment string `json:"comment,omitempty"`
	// VMs are the member guests, sorted. A guest is in at most one pool.
	VMs []int `json:"vms,omitempty"`
	// Storage are the member storages, sorted; a storage may be in many.
	Storage []string `json:"storage,omitempty"`
}

// PoolUpdate is one PUT /pools request.
type PoolUpdate struct {
	PoolID  string
	Comment *string // nil: unchanged
	VMs     []int
	Storage []string
	// AllowMove takes a guest out of its current pool (allow-move).
	AllowMove bool
	// Delete removes the listed members instead of adding them.
	Delete bool
}

// poolOf is the pool guest vmid belongs to, "" for none ($usercfg->{vms}).
func (a *Access) poolOf(vmid int) string {
	for id, p := range a.Pools {
		if slices.Contains(p.VMs, vmid) {
			return id
		}
	}
	return ""
}

// PoolExists is RPCEnvironment check_pool_exist: nil, or 403 "Permission
// check failed (pool '<id>' does not exist)".
func (a *Access) PoolExists(id string) error {
	if a.Pools[id] == nil {
		return PermError(fmt.Sprintf("pool '%s' does not exist", id))
	}
	return nil
}

// AddPool is POST /pools (Pool.pm create_pool): a nested pool needs its
// parent, and every level's name must start with a letter. Errors are 500
// "create pool failed: …".
func (a *Access) AddPool(id, comment string) error {
	const op = "create pool failed"
	if a.Pools[id] != nil {
		return accessLockedFail(op, fmt.Sprintf("pool '%s' already exists\n", id))
	}
	leaf := id
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		parent := id[:i]
		if a.Pools[parent] == nil {
			return accessLockedFail(op, fmt.Sprintf("parent '%s' of pool '%s' does not exist\n", parent, id))
		}
		leaf = id[i+1:]
	}
	if leaf == "" || !isLetter(leaf[0]) {
		return accessLockedFail(op, "pool name must start with a letter\n")
	}
	if a.Pools == nil {
		a.Pools = map[string]*Pool{}
	}
	a.Pools[id] = &Pool{ID: id, Comment: comment}
	return nil
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// UpdatePool is PUT /pools (Pool.pm update_pool) by auth: the comment,
// then each guest, then each storage, each member checked with
// check_perm_modify on its own path. Every failure is 500 "update pools
// failed: …" (lock_user_config wraps them, permission errors too), and
// nothing changes unless all pass.
func (a *Access) UpdatePool(auth Auth, u PoolUpdate) error {
	const op = "update pools failed"
	fail := func(err error) error {
		msg := err.Error()
		if e, ok := err.(*Error); ok {
			msg = e.Message
		}
		return accessLockedFail(op, msg)
	}
	p := a.Pools[u.PoolID]
	if p == nil {
		return accessLockedFail(op, fmt.Sprintf("pool '%s' does not exist\n", u.PoolID))
	}
	next := &Pool{ID: p.ID, Comment: p.Comment, VMs: slices.Clone(p.VMs), Storage: slices.Clone(p.Storage)}
	if u.Comment != nil {
		next.Comment = *u.Comment
	}
	moved := map[int]string{} // vmid → the pool it leaves
	for _, vmid := range u.VMs {
		if err := a.poolUpdateVM(auth, next, u, vmid, moved); err != nil {
			return fail(err)
		}
	}
	for _, sid := range u.Storage {
		if !auth.IsRoot() {
			if err := a.checkPermModify(auth, "/storage/"+sid); err != nil {
				return fail(err)
			}
		}
		has := slices.Contains(next.Storage, sid)
		switch {
		case u.Delete && !has:
			return fail(Failf("Storage '%s' is not a pool member\n", sid))
		case u.Delete:
			next.Storage = slices.DeleteFunc(next.Storage, func(s string) bool { return s == sid })
		case has:
			return fail(Failf("Storage '%s' is already a pool member\n", sid))
		default:
			next.Storage = append(next.Storage, sid)
		}
	}
	for vmid, from := range moved {
		old := a.Pools[from]
		old.VMs = slices.DeleteFunc(old.VMs, func(v int) bool { return v == vmid })
	}
	slices.Sort(next.VMs)
	slices.Sort(next.Storage)
	a.Pools[u.PoolID] = next
	return nil
}

// poolUpdateVM adds guest vmid to (or with Delete removes it from) next,
// as update_pool's loop body does; a move out of another pool is noted
// in moved and needs Pool.Allocate on that pool.
func (a *Access) poolUpdateVM(auth Auth, next *Pool, u PoolUpdate, vmid int, moved map[int]string) error {
	if !auth.IsRoot() {
		if err := a.checkPermModify(auth, "/vms/"+strconv.Itoa(vmid)); err != nil {
			return err
		}
	}
	has := slices.Contains(next.VMs, vmid)
	if u.Delete {
		if !has {
			return Failf("VM %d is not a pool member\n", vmid)
		}
		next.VMs = slices.DeleteFunc(next.VMs, func(v int) bool { return v == vmid })
		return nil
	}
	if has {
		return Failf("VM %d is already a pool member\n", vmid)
	}
	if from := a.poolOf(vmid); from != "" && from != next.ID {
		if !u.AllowMove {
			return Failf("VM %d belongs already to pool '%s' and 'allow-move' is not set\n", vmid, from)
		}
		if err := a.Check(auth, "/pool/"+from, []string{"Pool.Allocate"}, false); err != nil {
			return err
		}
		moved[vmid] = from
	}
	next.VMs = append(next.VMs, vmid)
	return nil
}

// DeletePool is DELETE /pools (Pool.pm delete_pool): only an empty pool
// goes, where members that no longer exist (guestExists,
// storageExists) do not count. Errors are 500 "delete pool failed: …".
// The ACL entries on /pool/<id> and below go with it; as PVE's
// delete_pool_acl looks the pool up as one child of /pool, a nested
// pool's entries stay.
func (a *Access) DeletePool(id string, guestExists func(int) bool, storageExists func(string) bool) error {
	const op = "delete pool failed"
	p := a.Pools[id]
	if p == nil {
		return accessLockedFail(op, fmt.Sprintf("pool '%s' does not exist\n", id))
	}
	for _, sub := range slices.Sorted(maps.Keys(a.Pools)) {
		if strings.HasPrefix(sub, id+"/") && !strings.Contains(sub[len(id)+1:], "/") {
			return accessLockedFail(op, fmt.Sprintf("pool '%s' is not empty (contains pool '%s')\n", id, sub))
		}
	}
	for _, vmid := range poolSortedVMIDs(p.VMs) {
		if guestExists(vmid) {
			return accessLockedFail(op, fmt.Sprintf("pool '%s' is not empty (contains VM %d)\n", id, vmid))
		}
	}
	for _, sid := range p.Storage {
		if storageExists(sid) {
			return accessLockedFail(op, fmt.Sprintf("pool '%s' is not empty (contains storage '%s')\n", id, sid))
		}
	}
	delete(a.Pools, id)
	if !strings.Contains(id, "/") {
		p := "/pool/" + id
		a.ACL = slices.DeleteFunc(a.ACL, func(e ACLEntry) bool {
			return e.Path == p || strings.HasPrefix(e.Path, p+"/")
		})
	}
	return nil
}

// poolSortedVMIDs orders VMIDs as Perl's `sort keys` does: as strings
// (1000 before 200).
func poolSortedVMIDs(vms []int) []int {
	out := slices.Clone(vms)
	slices.SortFunc(out, func(x, y int) int { return strings.Compare(strconv.Itoa(x), strconv.Itoa(y)) })
	return out
}

// addToPool is add_vm_to_pool: a create, restore or clone with pool=<id>
// puts the new guest there (nothing when the pool is gone by then).
func (a *Access) addToPool(vmid int, id string) {
	p := a.Pools[id]
	if p == nil {
		return
	}
	a.removeFromPool(vmid)
	p.VMs = append(p.VMs, vmid)
	slices.Sort(p.VMs)
}

// removeFromPool is remove_vm_from_pool.
func (a *Access) removeFromPool(vmid int) {
	if id := a.poolOf(vmid); id != "" {
		p := a.Pools[id]
		p.VMs = slices.DeleteFunc(p.VMs, func(v int) bool { return v == vmid })
	}
}

// roles is the role set RPCEnvironment.pm compute_api_permission gives
// id on path: the ACL's (aclRoles), plus for a guest or storage that is
// in a pool the roles id holds on /pool/<pool>, never propagated. A
// NoAccess from the ACL stands; a NoAccess from a pool beats the ACL's
// other roles.
func (a *Access) roles(id, path string, token bool) map[string]bool {
	roles := a.aclRoles(id, path, token)
	pool := a.poolRoles(id, path, token)
	if len(pool) == 0 {
		return roles
	}
	if _, ok := roles[roleNoAccess]; ok {
		return roles
	}
	if _, ok := pool[roleNoAccess]; ok {
		return map[string]bool{roleNoAccess: false}
	}
	for r := range pool {
		if _, ok := roles[r]; !ok {
			roles[r] = false
		}
	}
	return roles
}

// poolRoles are the roles id holds on the pools path (/vms/<vmid> or
// /storage/<sid>) is a member of.
func (a *Access) poolRoles(id, path string, token bool) map[string]bool {
	var pools []string
	if rest, ok := strings.CutPrefix(path, "/vms/"); ok {
		if vmid, err := strconv.Atoi(rest); err == nil {
			if p := a.poolOf(vmid); p != "" {
				pools = append(pools, p)
			}
		}
	} else if sid, ok := strings.CutPrefix(path, "/storage/"); ok && !strings.Contains(sid, "/") {
		for pid, p := range a.Pools {
			if slices.Contains(p.Storage, sid) {
				pools = append(pools, pid)
			}
		}
	}
	out := map[string]bool{}
	for _, p := range pools {
		for r := range a.aclRoles(id, "/pool/"+p, token) {
			out[r] = true
		}
	}
	return out
}
