package model

import (
	"sync"
	"sync/atomic"
)

// stateMutex is the State's lock (Cluster.mu). It counts the times it
// is locked for writing, so that a reader can tell whether the State
// changed since an earlier read (ReadKey): every change of the State
// holds this lock for writing, and the count moves before the change.
type stateMutex struct {
	sync.RWMutex
	writes atomic.Uint64
}

// Lock locks for writing and counts the write.
func (m *stateMutex) Lock() {
	m.RWMutex.Lock()
	m.writes.Add(1)
}

// ReadKey names what a read of the cluster answers from: the State's
// write count, the disk-usage figures' generation, the clock's second
// and which nodes' RRD data has expired. Two reads under the same key
// give the same answer to the same request by the same caller, which
// lets the HTTP layer keep encoded answers (sim's readCache). A key
// taken before a read is never newer than what the read sees: the read
// may see later changes, never earlier state than its key names.
type ReadKey struct {
	writes, du uint64
	second     int64
	// expired has bit i set when node i's RRD data has expired
	// (rrdExpiredLocked, which moves with the clock, not the State).
	expired uint64
}

// ReadKey is the key of a read that starts now.
func (c *Cluster) ReadKey() ReadKey {
	c.mu.RLock()
	defer c.mu.RUnlock()
	k := ReadKey{writes: c.mu.writes.Load(), du: c.du.gen.Load(), second: c.now().Unix()}
	for i, n := range c.st.Nodes {
		if !n.Online && i < 64 && c.rrdExpiredLocked(n.Name) {
			k.expired |= 1 << i
		}
	}
	return k
}

// After reports whether k names a later state than o, or the same: a
// key taken later is never before one taken earlier.
func (k ReadKey) After(o ReadKey) bool {
	return k.writes >= o.writes && k.du >= o.du && k.second >= o.second
}
