package model

import "time"

// SetNodeOnline takes a node off the cluster or brings it back, as a
// power cut or a network split would (for tests of clients that must
// cope with a node that does not answer). Its guests stay as they were.
func (c *Cluster) SetNodeOnline(node string, online bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkNodeLocked(node); err != nil {
		return err
	}
	n := c.st.node(node)
	switch {
	case n.Online && !online:
		n.OfflineSince = c.now().Unix()
	case online:
		n.OfflineSince = 0
	}
	n.Online = online
	c.markCore()
	return c.saveLocked()
}

// rrdExpiry is how long pmxcfs keeps a node's RRD entries without an
// update (status.c rrd_entry_is_old: 5 minutes). After that, the guests
// and storages of an offline node show status "unknown" in
// /cluster/resources (behaviour.md (i.5)); the emulator scales it like
// task durations.
const rrdExpiry = 300 * time.Second

// rrdExpiredLocked reports whether node's RRD data has expired: it has
// been offline for at least the scaled rrdExpiry.
func (c *Cluster) rrdExpiredLocked(node string) bool {
	n := c.st.node(node)
	if n == nil || n.Online {
		return false
	}
	return c.now().Sub(time.Unix(n.OfflineSince, 0)) >= c.scale(rrdExpiry)
}

// NodeOnline reports whether node answers.
func (c *Cluster) NodeOnline(node string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.st.node(node)
	return n != nil && n.Online
}

// NodeExists reports whether the cluster has node.
func (c *Cluster) NodeExists(node string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.node(node) != nil
}
