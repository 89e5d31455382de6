package model

import (
	"fmt"
	"time"
)

// HoldLock sets CT vmid's config lock to lock for d, as another operation
// (a backup job, say) would, then clears it if it is still that lock. For
// fault injection: callers see "CT is locked (<lock>)" meanwhile.
func (gs *guests) HoldLock(vmid int, lock string, d time.Duration) error {
	c := gs.c
	switch lock {
	case "backup", "create", "destroyed", "disk", "fstrim", "migrate", "mounted", "rollback", "snapshot", "snapshot-delete":
	default:
		return Failf("invalid lock '%s'\n", lock)
	}
	c.mu.Lock()
	g := c.st.Guests[vmid]
	if g == nil {
		c.mu.Unlock()
		return Failf("no CT %d\n", vmid)
	}
	if err := checkLock(g); err != nil {
		c.mu.Unlock()
		return err
	}
	g.Config["lock"] = lock
	c.markGuest(vmid)
	err := c.saveLocked()
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("hold lock: %w", err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.ctx.Done():
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if g := c.st.Guests[vmid]; g != nil && g.Config["lock"] == lock {
			delete(g.Config, "lock")
			c.markGuest(vmid)
			if err := c.saveLocked(); err != nil {
				c.log.Error("save state after a held lock", "vmid", vmid, "lock", lock, "err", err)
			}
		}
	}()
	return nil
}

// Unlock is `pct unlock VMID` on the node (root's shell, no API call):
// the CT's config lock is removed, whatever it was.
func (gs *guests) Unlock(vmid int) error {
	c := gs.c
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.st.Guests[vmid]
	if g == nil {
		return Failf("no CT %d\n", vmid)
	}
	delete(g.Config, "lock")
	c.markGuest(vmid)
	if err := c.saveLocked(); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}
