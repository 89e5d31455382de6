package model

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

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

// NodePower says how a node leaves or comes back (SetNodePower).
type NodePower struct {
	// PowerOff: the node goes offline by a power cut or a fence: its
	// running guests stop with it. Without it the node is cut off (a
	// network split): its guests keep running where nobody can reach them.
	PowerOff bool
	// NoStartAll: on the return of a powered-off node, its guests with
	// onboot=1 are not started (the operator masked pve-guests.service
	// before the boot). By default they are, as PVE's boot does
	// (pve-guests runs startall).
	NoStartAll bool
}

// SetNodePower is SetNodeOnline with the manner of leaving or coming
// back. A powered-off node that comes back boots: a new boot time, and
// (unless p.NoStartAll) a vzstart of each of its CTs with onboot=1 that
// is not a template, holds no lock and is no HA resource, in VMID order, as pve-guests'
// startall does. It returns the UPIDs of those starts.
func (c *Cluster) SetNodePower(node string, online bool, p NodePower) ([]string, error) {
	c.mu.Lock()
	if err := c.checkNodeLocked(node); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	n := c.st.node(node)
	var boot []int
	switch {
	case !online && p.PowerOff:
		n.PoweredOff = true
		for _, g := range c.st.Guests {
			if g.Node == node && g.Running {
				c.markStoppedLocked(g)
			}
		}
	case online && !n.Online && n.PoweredOff:
		n.PoweredOff = false
		n.Booted = c.now().Unix()
		if !p.NoStartAll {
			for vmid, g := range c.st.Guests {
				// startall leaves HA resources to HA (behaviour.md (i.2)).
				if g.Node == node && !g.Running && !g.IsTemplate() && g.Lock() == "" && truthy01(g.Config["onboot"]) && !c.ha.guest.haManagedLocked(vmid) {
					boot = append(boot, vmid)
				}
			}
		}
	}
	c.mu.Unlock()
	if err := c.SetNodeOnline(node, online); err != nil {
		return nil, err
	}
	slices.Sort(boot)
	var upids []string
	for _, vmid := range boot {
		upid, err := c.StartCT(Auth{UserID: "root@pam"}, node, vmid, nil)
		if err != nil {
			return upids, fmt.Errorf("startall on %s: CT %s: %w", node, strconv.Itoa(vmid), err)
		}
		upids = append(upids, upid)
	}
	return upids, nil
}

func truthy01(v string) bool { return v == "1" || v == "yes" || v == "true" || v == "on" }
