package model

import (
	"fmt"
	"time"
)

// HoldLock sets CT vmid's config lock to lock for d, as another operation
// (a backup job, say) would, then clears it if it is still that lock. For
// fault injection: callers see "CT is locked (<lock>)" meanwhile.
func (gs *guests) HoldLock(vmid int, lock string, d time.Duration) error {
	st := gs.state()
	switch lock {
	case "backup", "create", "destroyed", "disk", "fstrim", "migrate", "mounted", "rollback", "snapshot", "snapshot-delete":
	default:
		return Failf("invalid lock '%s'\n", lock)
	}
	gs.stateMu.Lock()
	g := st.Guests[vmid]
	if g == nil {
		gs.stateMu.Unlock()
		return Failf("no CT %d\n", vmid)
	}
	if err := checkLock(g); err != nil {
		gs.stateMu.Unlock()
		return err
	}
	g.Config["lock"] = lock
	gs.journal.markGuest(vmid)
	err := gs.journal.saveLocked()
	gs.stateMu.Unlock()
	if err != nil {
		return fmt.Errorf("hold lock: %w", err)
	}
	gs.wg.Add(1)
	go func() {
		defer gs.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-gs.ctx.Done():
		}
		gs.stateMu.Lock()
		defer gs.stateMu.Unlock()
		if g := st.Guests[vmid]; g != nil && g.Config["lock"] == lock {
			delete(g.Config, "lock")
			gs.journal.markGuest(vmid)
			if err := gs.journal.saveLocked(); err != nil {
				gs.log.Error("save state after a held lock", "vmid", vmid, "lock", lock, "err", err)
			}
		}
	}()
	return nil
}

// Unlock is `pct unlock VMID` on the node (root's shell, no API call):
// the CT's config lock is removed, whatever it was.
func (gs *guests) Unlock(vmid int) error {
	st := gs.state()
	gs.stateMu.Lock()
	defer gs.stateMu.Unlock()
	g := st.Guests[vmid]
	if g == nil {
		return Failf("no CT %d\n", vmid)
	}
	delete(g.Config, "lock")
	gs.journal.markGuest(vmid)
	if err := gs.journal.saveLocked(); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}
