package apply

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// corral's lock. Every command that changes the cluster (apply, destroy,
// restore, rollback, backup pruning, volume removal) first takes a lease
// on each node it changes: a line in the Notes of the node's first keeper
// (its lowest VMID), written with the same compare-and-swap on the config
// digest as every keeper write, so of two corral processes exactly one
// succeeds. The holder renews the lease while it works; a lease that ran
// out was left by a process that died, and the next corral takes it over.
// Several nodes are locked in name order, so two corrals never wait for
// each other in a circle. Read-only commands take no lock.

// LockOptions configure Executor.Lock.
type LockOptions struct {
	// Command names the holder's work in messages ("apply", "destroy").
	Command string
	// Wait bounds how long Lock waits for another holder (--lock-timeout);
	// 0 fails at once.
	Wait time.Duration
	// TTL is how long a lease lasts unless renewed (default 2 minutes;
	// renewed every TTL/3).
	TTL time.Duration
	// Template makes a node's keeper where it has none (the lock lives
	// in it); "" takes a template the node has.
	Template    string
	RootStorage string
	// OnWait is told once per holder that Lock waits for.
	OnWait func(msg string)
	// Beside says the caller plans again under the lock with
	// Lock.Context and applies that plan, which creates a node's keeper
	// where it has none: on such a node Lock returns while the keeper
	// that holds the lease is still being created, and the plan's apps
	// are created beside it (lockclaim.go). Without it, Lock returns once
	// that keeper is there, as other commands need it.
	Beside bool
	// HandOverListing says the caller plans under the lock with
	// Lock.Context right after Lock, reading every online node's tasks
	// first (no ExpectGuestsOn): the lock's last listing is handed to
	// that plan when it can be (lockhand.go).
	HandOverListing bool
}

var errLeaseBroken = errors.New("lease lost")

// LockHeldError says another corral holds a node's lease.
type LockHeldError struct {
	Node   string
	Keeper int
	Lease  *plan.Lease
}

func (e *LockHeldError) Error() string {
	return fmt.Sprintf("node %s is locked by %s (lease in keeper %d, until %s); wait for it to finish, or pass --lock-timeout to wait longer; "+
		"if that corral is gone, `corral unlock --node %s` breaks the lease", e.Node, e.Lease, e.Keeper, e.Lease.Until.UTC().Format(time.RFC3339), e.Node)
}

// Lock is a set of held leases.
type Lock struct {
	e      *Executor
	lease  plan.Lease
	ttl    time.Duration
	held   []*keeper
	stop   chan struct{}
	done   chan struct{}
	lost   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	lostTo error
	// pending are the keepers Lock is still creating, per node, whose
	// Notes hold the lease from their first moment (lockclaim.go); bg
	// outlives Lock's context for their waits, until Release.
	pending  map[string]*pendingKeeper
	bg       context.Context
	bgCancel context.CancelFunc
	// created wakes renew when a pending keeper's create ends, so that
	// a lease the create outlived is renewed at once rather than at the
	// next tick.
	created chan struct{}
	// foundCreated is when this corral first found another's lease
	// written by a keeper's create in a keeper no longer being created,
	// per lease ID (othersLive).
	foundCreated map[string]time.Time
	// ending and released are the keepers (keeperID) whose lease a
	// run's last write tried to release, and did (leaseend.go).
	ending, released map[string]bool
	// handNode is the node locked last with LockOptions.HandOverListing
	// ("" without): only its scan is made to be handed over. handed is
	// that scan's listing, for the plan under the lock (lockhand.go).
	handNode string
	handed   *handedListing
}

// Lost is closed when a lease could not be renewed (it was broken, or
// PVE was unreachable past its expiry): stop changing the cluster.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err says why the lock was lost, or nil.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostTo
}

// Holder names this process as a lease holder: user@host:pid.
func Holder() string {
	host, _ := os.Hostname()
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return fmt.Sprintf("%s@%s:%d", name, host, os.Getpid())
}

// Lock takes the lease on every node of nodes (offline nodes are left
// out; the caller has already left their apps alone), making a node's
// keeper first where it has none.
func (e *Executor) Lock(ctx context.Context, obs *plan.Observed, nodes []string, opts LockOptions) (*Lock, error) {
	if opts.TTL <= 0 {
		opts.TTL = 2 * time.Minute
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	now := time.Now()
	l := &Lock{e: e, ttl: opts.TTL, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{}),
		lease:   plan.Lease{ID: hex.EncodeToString(id), Holder: Holder(), Command: opts.Command, Since: now},
		pending: map[string]*pendingKeeper{}, created: make(chan struct{}, 1), foundCreated: map[string]time.Time{}}
	l.bg, l.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	for _, node := range nodes {
		if opts.HandOverListing && !slices.Contains(obs.Offline, node) {
			l.handNode = node // the last one wins
		}
	}
	for _, node := range nodes {
		if slices.Contains(obs.Offline, node) {
			continue
		}
		if err := l.lockNode(ctx, e.keeperOps(), obs, node, opts); err != nil {
			l.release()
			return nil, err
		}
	}
	for _, pk := range l.pending {
		go func() {
			if pk.wait(l.bg) != nil && l.bg.Err() == nil {
				l.lose(fmt.Errorf("%w: the keeper %d on node %s that holds the lock could not be created: %w", errLeaseBroken, pk.vmid, pk.node, pk.err))
				return
			}
			select {
			case l.created <- struct{}{}:
			default: // a wake-up is already due; it renews every lease
			}
		}()
	}
	go l.renew()
	return l, nil
}

// lockNode takes the lease on node, in the keeper it is creating there
// when it had none (lockclaim.go), else in its oldest keeper.
func (l *Lock) lockNode(ctx context.Context, ko *keeperOps, obs *plan.Observed, node string, opts LockOptions) error {
	l.handed = nil // only a listing made once every node is locked is handed over
	k, spare, pk, err := l.lockKeeper(ctx, ko, obs, node, opts)
	if err != nil {
		return err
	}
	if pk != nil && opts.Beside {
		l.pending[node] = pk
		l.held = append(l.held, k)
		return nil
	}
	if pk != nil {
		if err := pk.wait(ctx); err != nil {
			l.abandon(ctx, pk)
			return fmt.Errorf("lock node %s: %w", node, err)
		}
		l.held = append(l.held, k)
		obs.Keepers[node] = append(obs.Keepers[node], plan.NewKeeper(k.vmid, node, map[string]string{}))
		return nil
	}
	if err := l.take(ctx, k, node, opts); err != nil {
		return err
	}
	l.held = append(l.held, k)
	if spare != nil {
		// Under the lock: no other corral puts a volume in it meanwhile.
		l.handed = nil
		return ko.removeEmptyKeeper(ctx, spare)
	}
	return nil
}

// lose ends the lock: err says why.
func (l *Lock) lose(err error) {
	l.mu.Lock()
	if l.lostTo == nil {
		l.lostTo = err
	}
	l.mu.Unlock()
	l.once.Do(func() { close(l.lost) })
}

// take writes the lease into k's Notes, waiting up to opts.Wait while
// another live lease is there.
func (l *Lock) take(ctx context.Context, k *keeper, node string, opts LockOptions) error {
	deadline := time.Now().Add(opts.Wait)
	told := ""
	for {
		var held *plan.Lease
		// The first try starts from the plan's read of the keeper
		// (seededChange): its digest makes the write fail if anything
		// changed since, and a lease found there is read again.
		err := k.seededChange(ctx, "take the lock", func(s *keeperState) (*pve.ConfigUpdate, error) {
			held = nil
			now := time.Now()
			// A live lease of another corral is waited for; one that ran
			// out, or whose holder was a process of this machine that is
			// gone (killed), is taken over.
			if cur := s.notes.Lease; l.othersLive(cur, s.conf) {
				held = cur
				return nil, nil
			}
			lease := l.lease
			lease.Until = now.Add(l.ttl)
			s.notes.Lease = &lease
			return &pve.ConfigUpdate{}, nil
		})
		if err != nil {
			return fmt.Errorf("lock node %s: %w", node, err)
		}
		at := k.vmid
		if held == nil {
			other, vmid, err := l.otherLease(ctx, k, 0)
			if err == nil && other == nil {
				return nil
			}
			// Not held after all: the lease comes out again.
			if cerr := l.clear(ctx, k); err != nil || cerr != nil {
				return fmt.Errorf("lock node %s: %w", node, errors.Join(err, cerr))
			}
			held, at = other, vmid
		}
		herr := &LockHeldError{Node: node, Keeper: at, Lease: held}
		if time.Now().After(deadline) {
			return herr
		}
		if opts.OnWait != nil && told != held.ID {
			told = held.ID
			opts.OnWait(fmt.Sprintf("waiting for the lock on node %s: held by %s (up to %s more; --lock-timeout)", node, held, time.Until(deadline).Round(time.Second)))
		}
		// Jittered: two corrals that each saw the other's lease in
		// another keeper (otherLease) do not retry in step.
		pause := time.Second/2 + time.Duration(mathrand.Int64N(int64(time.Second)))
		t := time.NewTimer(min(pause, max(time.Until(deadline), 10*time.Millisecond)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// renew extends every lease every TTL/3 until Release, and at once when
// a keeper the lock is creating is there.
func (l *Lock) renew() {
	defer close(l.done)
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		woke := false
		select {
		case <-l.stop:
			return
		case <-tick.C:
		case <-l.created:
			woke = true
		}
		for _, k := range l.held {
			if l.isEnding(k) {
				continue // released by the run's last write (leaseend.go)
			}
			pk := l.pending[k.node]
			if pk != nil && !pk.ended() {
				if err := l.renewPending(pk); err != nil {
					l.lose(err)
					return
				}
				continue
			}
			// Woken by a create's end, only a lease with less left than
			// a tick's renewal leaves is renewed at once: a create that
			// ended early left one as fresh as a renewal's, and the next
			// tick renews it (a write and its read fewer in a short run).
			if woke && (pk == nil || time.Until(pk.until) > 2*l.ttl/3) {
				continue
			}
			if err := l.renewHeld(k); err != nil {
				l.lose(err)
				return
			}
			if pk != nil {
				pk.until = time.Now().Add(l.ttl)
			}
		}
	}
}

// renewPending keeps the lease of a keeper still being created, whose
// config is locked: it holds while the create runs and for a life after
// (lockclaim.go), so the holder checks that the create task still runs,
// and gives the lock up once it has not seen it running for two thirds
// of a life (PVE unreachable), before others may take the lease.
func (l *Lock) renewPending(pk *pendingKeeper) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	st, err := l.e.Client.TaskStatus(ctx, pk.upid)
	cancel()
	if err == nil && st.Status == "running" {
		pk.seenRunning = time.Now()
		return nil
	}
	if pk.ended() || time.Since(pk.seenRunning) < 2*l.ttl/3 {
		return nil // renewed by the wake-up its end sends, or still in time
	}
	why := "its task is not seen running"
	if err != nil {
		why = fmt.Sprintf("its task's status cannot be read: %v", err)
	}
	return fmt.Errorf("%w: the keeper %d on node %s that holds the lock is still being created after %s and %s since %s; run again once its create task ends (Datacenter > Tasks)",
		errLeaseBroken, pk.vmid, pk.node, time.Since(l.lease.Since).Round(time.Second), why, pk.seenRunning.UTC().Format(time.RFC3339))
}

// renewHeld moves the lease in k's Notes a life ahead (and clears the
// life a keeper's create wrote: from now on it is renewed in the Notes).
// Its error, if any, means the lock is lost.
func (l *Lock) renewHeld(k *keeper) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	err := k.change(ctx, "renew the lock", func(s *keeperState) (*pve.ConfigUpdate, error) {
		if l.isEnding(k) {
			return nil, nil // the run's last write releases it (leaseend.go)
		}
		if s.notes.Lease == nil || s.notes.Lease.ID != l.lease.ID {
			return nil, fmt.Errorf("%w: the lock on node %s was broken while this corral held it", errLeaseBroken, k.node)
		}
		s.notes.Lease.Until, s.notes.Lease.Life = time.Now().Add(l.ttl), 0
		return &pve.ConfigUpdate{}, nil
	})
	if err != nil && (errors.Is(err, errLeaseBroken) || l.expired(k)) {
		return err
	}
	return nil
}

// expired is a conservative guess that the lease on k ran out while PVE
// could not be reached; renew then gives up.
func (l *Lock) expired(k *keeper) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := k.read(ctx)
	if err != nil {
		return false
	}
	cur := plan.ParseLease(cc.Values["description"])
	return cur == nil || cur.ID != l.lease.ID || time.Now().After(cur.Until)
}

// Release gives every lease back. It uses its own short deadline, so it
// works after the command's context was cancelled (Ctrl-C).
func (l *Lock) Release() {
	if l == nil {
		return
	}
	close(l.stop)
	<-l.done
	l.release()
}

func (l *Lock) release() {
	for _, k := range l.held {
		if l.isReleased(k) {
			continue // the run's last write released it (leaseend.go)
		}
		if pk := l.pending[k.node]; pk != nil && pk.vmid == k.vmid {
			// Its config can be written once it is created. A create
			// that failed took the lease with it; one whose wait failed
			// (PVE unreachable) may have not, so the lease is cleared
			// all the same (a keeper that is not there is no error here).
			ctx, cancel := context.WithTimeout(l.bg, 3*time.Minute)
			_ = pk.wait(ctx)
			cancel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = l.clear(ctx, k)
		cancel()
	}
	l.held = nil
	l.bgCancel()
}

// lockKeeper is the keeper that holds node's lease: its oldest. On a
// node without one it starts creating one with the lease in its Notes
// (lockclaim.go) and returns it as pk when that claim holds the lock;
// when another corral's claim stood beside it, the lease comes out of it,
// the oldest keeper is returned, and ours is spare when that is another.
func (l *Lock) lockKeeper(ctx context.Context, ko *keeperOps, obs *plan.Observed, node string, opts LockOptions) (k, spare *keeper, pk *pendingKeeper, err error) {
	if prob := obs.DamagedKeeperProblem(node); prob != "" {
		// Its lease would go unseen, and a new keeper would stand beside it.
		return nil, nil, nil, fmt.Errorf("lock node %s: %s", node, prob)
	}
	if ks := obs.Keepers[node]; len(ks) > 0 {
		return (&keeper{ops: ko, node: node, vmid: ks[0].VMID}).seedFrom(ks[0]), nil, nil, nil
	}
	tmpl := opts.Template
	if obs.SetupDeferred {
		// An observation that left the templates unread (a destroy's,
		// or a no-op plan's when a lease held elsewhere made apply lock
		// anyway): the keeper's create needs them.
		if err := ObserveSetup(ctx, ko.client, obs); err != nil {
			return nil, nil, nil, fmt.Errorf("lock node %s: %w", node, err)
		}
	}
	if tmpl == "" && len(obs.Templates[node]) > 0 {
		tmpl = obs.Templates[node][0]
	}
	if tmpl == "" {
		return nil, nil, nil, fmt.Errorf("lock node %s: it has no keeper to hold corral's lock and no container template to create one from", node)
	}
	storage := opts.RootStorage
	if storage == "" {
		storage = "local-lvm"
	}
	if err := ko.keeperTemplateOn(ctx, node, tmpl, obs); err != nil {
		return nil, nil, nil, err
	}
	pk, alone, err := l.claimEmptyNode(ctx, ko, node, tmpl, storage)
	if err == nil && alone {
		return &keeper{ops: ko, node: node, vmid: pk.vmid, records: map[plan.VolumeKey]string{}}, nil, pk, nil
	}
	if err == nil {
		k, spare, err = l.yieldClaim(ctx, ko, obs, pk)
	}
	if err != nil && pk != nil {
		l.abandon(ctx, pk)
	}
	return k, spare, nil, err
}

// oldestKeeper lists node's keepers afresh (waiting for guests still being
// created, which may be keepers) and returns the lowest VMID.
func (ko *keeperOps) oldestKeeper(ctx context.Context, node string) (int, error) {
	res, err := guestsSettled(ctx, ko.client, ObserveOptions{}, nil)
	if err != nil {
		return 0, err
	}
	oldest := 0
	for _, r := range res {
		if r.Node == node && r.Type == "lxc" && slices.Contains(plan.ParseTags(r.Tags), plan.TagKeeper) && (oldest == 0 || r.VMID < oldest) {
			oldest = r.VMID
		}
	}
	if oldest == 0 {
		return 0, fmt.Errorf("node %s: the keeper corral just created is not listed", node)
	}
	return oldest, nil
}

// removeEmptyKeeper destroys a keeper this process just created and that
// lost the race to be the node's first; it refuses if it holds anything.
func (ko *keeperOps) removeEmptyKeeper(ctx context.Context, k *keeper) error {
	cc, err := k.read(ctx)
	if err != nil {
		return err
	}
	if plan.VolumeEntries(cc.Values) > 0 {
		return nil // it holds volumes after all: keep it
	}
	// Untag it first, so that another corral listing the guests from now
	// on no longer takes it for a keeper (nor its cleared protection for
	// one to repair).
	if err := k.ops.putConfig(ctx, k.node, k.vmid, &pve.ConfigUpdate{Tags: []string{plan.TagManaged}}); err != nil {
		return fmt.Errorf("remove the spare keeper %d: %w", k.vmid, err)
	}
	if err := k.setProtection(ctx, false); err != nil {
		return err
	}
	upid, err := ko.client.DestroyContainer(ctx, k.node, k.vmid, pve.DestroyOptions{Purge: true})
	if err != nil {
		return fmt.Errorf("remove the spare keeper %d: %w", k.vmid, err)
	}
	return ko.wait(ctx, plan.KeeperName, upid)
}

// BreakLease removes the lease on node's keepers (it is in the first one,
// or in a younger one a lock created on an empty node: lockclaim.go).
// Unless force, only a lease that ran out, or whose holder is a process of
// this machine that is gone, is broken.
func (e *Executor) BreakLease(ctx context.Context, obs *plan.Observed, node string, force bool) (*plan.Lease, error) {
	ks := obs.Keepers[node]
	if len(ks) == 0 {
		return nil, fmt.Errorf("node %s has no keeper, so no lock", node)
	}
	var broken *plan.Lease
	for _, pk := range ks {
		k := &keeper{ops: e.keeperOps(), node: node, vmid: pk.VMID}
		err := k.change(ctx, "break the lock", func(s *keeperState) (*pve.ConfigUpdate, error) {
			cur := s.notes.Lease
			if cur == nil {
				return nil, nil
			}
			if !force && time.Now().Before(cur.Until) && !holderGone(cur.Holder) {
				return nil, fmt.Errorf("node %s is locked by %s, which may still be running (its lease runs until %s); "+
					"if you are sure it is gone, run `corral unlock --node %s --force`", node, cur, cur.Until.UTC().Format(time.RFC3339), node)
			}
			if broken == nil {
				broken = cur
			}
			s.notes.Lease = nil
			return &pve.ConfigUpdate{}, nil
		})
		if err != nil {
			return broken, err
		}
	}
	return broken, nil
}

// holderGone reports whether holder (user@host:pid) names a process of
// this machine that no longer runs.
func holderGone(holder string) bool {
	at := strings.LastIndex(holder, "@")
	colon := strings.LastIndex(holder, ":")
	if at < 0 || colon < at {
		return false
	}
	host, _ := os.Hostname()
	if holder[at+1:colon] != host {
		return false
	}
	pid, err := strconv.Atoi(holder[colon+1:])
	if err != nil || pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	err = p.Signal(syscall.Signal(0))
	return errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH)
}
