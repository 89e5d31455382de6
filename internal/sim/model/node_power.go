package model

// SetNodeOnline takes a node off the cluster or brings it back, as a
// power cut or a network split would (for tests of clients that must
// cope with a node that does not answer). Its guests stay as they were.
func (c *Cluster) SetNodeOnline(node string, online bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkNodeLocked(node); err != nil {
		return err
	}
	c.st.node(node).Online = online
	c.markCore()
	return c.saveLocked()
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
