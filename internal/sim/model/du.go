package model

import (
	"sync"
	"sync/atomic"
	"time"
)

// duRefresh is how often the disk usage of running CTs is measured again.
// A real node's pvestatd updates its figures every 10 s.
const duRefresh = 5 * time.Second

// diskUsage caches what each running CT's rootfs holds, so that list and
// status requests read a figure from memory instead of walking a
// thousand directories each time. A CT's figure is measured when it is
// first asked for in a boot (its PID) and then by a refresher every
// duRefresh, outside the cluster lock.
type diskUsage struct {
	mu sync.Mutex
	m  map[int]duEntry
	// gen counts the changed figures (ReadKey): a refresh that measures
	// another size moves it.
	gen atomic.Uint64
}

type duEntry struct {
	pid   int
	dir   string
	bytes int64
}

// guestDiskLocked is the bytes under CT g's rootfs directory dir (c.mu
// held, for reading at least).
func (gs *guests) guestDiskLocked(g *Guest, dir string) int64 {
	gs.du.mu.Lock()
	e, ok := gs.du.m[g.VMID]
	gs.du.mu.Unlock()
	if ok && e.pid == g.PID && e.dir == dir {
		return e.bytes
	}
	e = duEntry{pid: g.PID, dir: dir, bytes: usedBytesUnder(dir)}
	gs.du.mu.Lock()
	if gs.du.m == nil {
		gs.du.m = map[int]duEntry{}
	}
	gs.du.m[g.VMID] = e
	gs.du.mu.Unlock()
	return e.bytes
}

// refreshDiskUsage measures the cached CTs again every duRefresh until
// the cluster closes.
func (gs *guests) refreshDiskUsage() {
	defer gs.wg.Done()
	t := time.NewTicker(duRefresh)
	defer t.Stop()
	for {
		select {
		case <-gs.ctx.Done():
			return
		case <-t.C:
			gs.measureDiskUsage()
		}
	}
}

// measureDiskUsage measures every cached CT again, without the cluster
// lock, and forgets those that no longer run that boot.
func (gs *guests) measureDiskUsage() {
	gs.du.mu.Lock()
	entries := make(map[int]duEntry, len(gs.du.m))
	for vmid, e := range gs.du.m {
		entries[vmid] = e
	}
	gs.du.mu.Unlock()
	for vmid, e := range entries {
		if gs.GuestPID(vmid) != e.pid {
			gs.du.mu.Lock()
			if cur, ok := gs.du.m[vmid]; ok && cur.pid == e.pid {
				delete(gs.du.m, vmid)
			}
			gs.du.mu.Unlock()
			continue
		}
		bytes := usedBytesUnder(e.dir)
		gs.du.mu.Lock()
		if cur, ok := gs.du.m[vmid]; ok && cur.pid == e.pid && cur.dir == e.dir && cur.bytes != bytes {
			gs.du.gen.Add(1)
			cur.bytes = bytes
			gs.du.m[vmid] = cur
		}
		gs.du.mu.Unlock()
	}
}
