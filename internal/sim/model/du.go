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
	c := gs.c
	c.du.mu.Lock()
	e, ok := c.du.m[g.VMID]
	c.du.mu.Unlock()
	if ok && e.pid == g.PID && e.dir == dir {
		return e.bytes
	}
	e = duEntry{pid: g.PID, dir: dir, bytes: usedBytesUnder(dir)}
	c.du.mu.Lock()
	if c.du.m == nil {
		c.du.m = map[int]duEntry{}
	}
	c.du.m[g.VMID] = e
	c.du.mu.Unlock()
	return e.bytes
}

// refreshDiskUsage measures the cached CTs again every duRefresh until
// the cluster closes.
func (gs *guests) refreshDiskUsage() {
	c := gs.c
	defer c.wg.Done()
	t := time.NewTicker(duRefresh)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.measureDiskUsage()
		}
	}
}

// measureDiskUsage measures every cached CT again, without the cluster
// lock, and forgets those that no longer run that boot.
func (gs *guests) measureDiskUsage() {
	c := gs.c
	c.du.mu.Lock()
	entries := make(map[int]duEntry, len(c.du.m))
	for vmid, e := range c.du.m {
		entries[vmid] = e
	}
	c.du.mu.Unlock()
	for vmid, e := range entries {
		if c.GuestPID(vmid) != e.pid {
			c.du.mu.Lock()
			if cur, ok := c.du.m[vmid]; ok && cur.pid == e.pid {
				delete(c.du.m, vmid)
			}
			c.du.mu.Unlock()
			continue
		}
		bytes := usedBytesUnder(e.dir)
		c.du.mu.Lock()
		if cur, ok := c.du.m[vmid]; ok && cur.pid == e.pid && cur.dir == e.dir && cur.bytes != bytes {
			c.du.gen.Add(1)
			cur.bytes = bytes
			c.du.m[vmid] = cur
		}
		c.du.mu.Unlock()
	}
}
