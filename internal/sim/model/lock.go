package model

import (
	"context"
	"sync"
	"time"
)

// configLockTimeout is lock_config's flock timeout (behaviour.md (h) 2).
const configLockTimeout = 10 * time.Second

// configLocks emulates PVE's per-guest flock on
// /run/lock/lxc/pve-config-<vmid>.lock, which serializes every config
// read-modify-write. It is separate from the persisted `lock:` property.
type configLocks struct {
	mu sync.Mutex
	m  map[int]chan struct{}
	// file is the lock file's path format (with the VMID), for the
	// timeout message.
	file string
}

func newConfigLocks() *configLocks {
	return &configLocks{m: map[int]chan struct{}{}, file: "/run/lock/lxc/pve-config-%d.lock"}
}

// newMigrateLocks is GuestHelpers.pm guest_migration_lock's flock set.
func newMigrateLocks() *configLocks {
	return &configLocks{m: map[int]chan struct{}{}, file: "/var/lock/pve-manager/pve-migrate-%d"}
}

func (l *configLocks) ch(vmid int) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.m[vmid]
	if !ok {
		c = make(chan struct{}, 1)
		l.m[vmid] = c
	}
	return c
}

// acquire takes the flock for vmid, waiting at most timeout. The error is
// PVE's exact timeout message, or the worker's "received interrupt" once
// ctx (the cluster's life) ends, also when the flock is free then.
func (l *configLocks) acquire(ctx context.Context, vmid int, timeout time.Duration) (release func(), err error) {
	if ctx.Err() != nil {
		return nil, errInterrupt
	}
	c := l.ch(vmid)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case c <- struct{}{}:
		return func() { <-c }, nil
	case <-t.C:
		return nil, Failf("can't lock file '"+l.file+"' - got timeout\n", vmid)
	case <-ctx.Done():
		return nil, errInterrupt
	}
}
