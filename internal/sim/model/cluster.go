package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Cluster. The zero value (plus a Dir) is a one-node
// PVE 9.1 cluster whose tasks take the seeds' real durations.
type Options struct {
	// Dir holds the state file and the data plane (every volume is a real
	// directory under Dir/data). Required.
	Dir string
	// Nodes is the node count: 1 gives node "pve", N>1 gives pve1..pveN.
	Nodes int
	// Version is the emulated PVE release, "9.1" (default) or "8.4".
	Version string
	// SharedStorage adds shared storages visible on every node:
	// SharedNFS (storage "nfs", type nfs) and/or SharedRBD (storage
	// "rbd", type rbd), both with content images,rootdir.
	SharedStorage []string
	// TimeScale multiplies every task duration; 0 makes tasks instant.
	// Nil-able via HasTimeScale so that 0 can be asked for explicitly.
	TimeScale    float64
	HasTimeScale bool
	// Durations overrides the per-task-type durations at scale 1.
	Durations map[string]time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// RealTemplate is the path of a real Debian 12 template archive
	// (EnsureRealTemplate) that stands in for the catalogue's
	// debian-12-standard; "" keeps the tiny built-in one (realtpl.go).
	RealTemplate string
}

// defaultDurations are the seeds' observed task times at scale 1
// (seed 000: create ~11 s; seed 004: backup ~22-25 s, restore ~11-12 s).
var defaultDurations = map[string]time.Duration{
	"vzcreate":      11 * time.Second,
	"vzrestore":     11 * time.Second,
	"vzstart":       3 * time.Second,
	"vzstop":        2 * time.Second,
	"vzshutdown":    4 * time.Second,
	"vzreboot":      6 * time.Second,
	"vzdestroy":     2 * time.Second,
	"move_volume":   2 * time.Second,
	"resize":        1 * time.Second,
	"vztemplate":    1 * time.Second,
	"vzclone":       11 * time.Second, // a full copy of a small rootfs, as a create
	"download":      4 * time.Second,
	"aptemplate":    4 * time.Second,
	"imgdel":        500 * time.Millisecond,
	"vzdump":        22 * time.Second,
	"vzsnapshot":    2 * time.Second,
	"vzdelsnapshot": 1 * time.Second,
	"vzrollback":    3 * time.Second,
	"vzmigrate":     8 * time.Second, // stopped CT, one small rootfs; copies scale by nothing else
	"bootdelay":     5 * time.Second, // a started guest's services (sshd) come up after this
}

// DefaultDuration is how long a task of type typ (or "bootdelay", the
// time a started guest's sshd takes to answer) runs at time scale 1,
// unless Options.Durations says otherwise. The table itself stays
// private: a caller cannot change it for every cluster in the process.
func DefaultDuration(typ string) time.Duration { return defaultDurations[typ] }

// Cluster is the emulated datacenter. All exported methods are safe for
// concurrent use: one read-write mutex guards the state (reads share it;
// a change holds it only to apply itself and append one journal line),
// per-guest config locks (lock.go) serialize read-modify-write of a
// guest like PVE's flock.
//
// Cluster is composed by responsibility, one small type per concern
// (docs/architecture.md has the table): taskRunner (workers and the task
// list, task.go), storage (storages, volumes, content, storage*.go; held
// by name, with only its exported methods embedded as storageAPI),
// appliances (the catalogue's archives, realtpl.go), accessControl
// (users, tokens, roles, ACLs, logins, cluster_access.go), clusterView
// (resources, nodes, status, cluster_view.go), guests (a CT's lookups,
// config and migration locks, status, hooks, held locks, guest.go), the
// CTs' operations by concern (ctConfig, ctPower, ctDisks, ctSnapshots,
// ctDestroyer, ctCreator, vzdump, ctMigrator), pools (cluster_pool.go),
// the firewall's parts (fwConfig, fwAliases, fwIPSets, fwRules,
// fwGroups; firewall*.go), persistence (the journal, journal.go) and ha
// (the HA stack's parts, ha*.go; held by name, the API parts' exported
// methods embedded as haAPI).
//
// storage alone writes the State's storages and volumes, taskRunner its
// tasks and process ids, but the State stays one struct under one lock,
// c.mu: a change that spans parts (a restore's guest, volumes and task)
// is then one atomic step and one journal line, and a snapshot is
// consistent. No part holds the *Cluster: each gets c.mu, the State and
// small interfaces over the parts it calls, wired in parts.go
// (TestParts_reachNoCluster). What spans every concern stays Cluster's
// own: the network (lxc_net.go, network.go), node power and memory
// admission.
type Cluster struct {
	opts Options
	log  *slog.Logger

	mu stateMutex
	st *State

	// appliances serves the catalogue's archives (realtpl.go).
	appliances applianceSource

	ctx    context.Context // cancelled by Close: stops running workers
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// taskRunner runs the workers and keeps the task list (task.go).
	taskRunner
	// storage answers for storages, volumes and content (storage.go);
	// storageAPI is its exported methods, which are the Cluster's, while
	// the other parts call the rest by name (c.storage.volumePath).
	storage storageLayer
	storageAPI
	// accessControl is the locked, persisted face of the State's Access
	// (cluster_access.go).
	accessControl
	// clusterView answers the cluster-wide reads (cluster_view.go).
	clusterView
	// guests holds the CTs' config locks, status, hooks, held locks and
	// destroy (guest.go); ctConfig, ctPower, ctDisks and ctSnapshots its
	// operations by concern.
	guests
	ctConfig
	ctPower
	ctDisks
	ctSnapshots
	// ctDestroyer destroys CTs (lxc_destroy.go).
	ctDestroyer
	// admitMemory turns memory admission on (admission.go). c.mu.
	admitMemory bool
	// guestBlock is the emulator's loopback block for guest addresses
	// (see SetGuestBlock); 0 means DefaultGuestBlock. c.mu.
	guestBlock int

	// idShift: unprivileged CTs' files are shifted on disk (idmap.go).
	idShift atomic.Bool

	// persistence saves the State: the dirty set, the journal and its
	// snapshots (journal.go).
	persistence
	// ctCreator creates CTs from a template or a backup (lxc_create.go,
	// restore.go); vzdump backs them up (vzdump.go).
	ctCreator
	vzdump
	// ctMigrator migrates CTs between nodes (migrate.go).
	ctMigrator
	// pools answers for resource pools (cluster_pool.go); fwConfig,
	// fwAliases, fwIPSets, fwRules and fwGroups for the cluster's, the
	// nodes' and the guests' firewall config (firewall*.go).
	pools
	fwConfig
	fwAliases
	fwIPSets
	fwRules
	fwGroups
	// ha is the HA stack: its API's parts, the CRM loop and the LRM
	// (ha*.go); haAPI is the API parts' exported methods, which are the
	// Cluster's.
	ha haManager
	haAPI
	// The VM parts serve qemu-server's API (qemu_*.go), each over the
	// same vmParts: create, config and status, destroy, disks, template
	// and clone, restore, snapshots, migrate, power and the agent;
	// vmRuntimeHook is the runtime they share (qemu_runtime.go).
	vmCreator
	vmConfig
	vmDestroyer
	vmDisks
	vmCloner
	vmRestorer
	vmSnapshots
	vmMigrator
	vmPower
	vmRuntimeHook
}

// Open loads the cluster in opts.Dir, or creates the default datacenter
// there when the directory holds no state yet. Tasks that were running when
// the previous process died are marked stopped with PVE's
// "unexpected status" (the worker is gone, as after a node crash).
func Open(opts Options) (*Cluster, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	for _, kind := range opts.SharedStorage {
		if err := CheckSharedStorage(kind); err != nil {
			return nil, err
		}
	}
	c := newCluster(opts)
	if err := c.load(); err != nil {
		c.cancel()
		return nil, err
	}
	c.wg.Add(1)
	go c.refreshDiskUsage()
	c.ha.crm.startCRM()
	return c, nil
}

// withDefaults fills in opts' defaults and checks what it cannot default.
func (opts Options) withDefaults() (Options, error) {
	if opts.Dir == "" {
		return opts, errors.New("model: Options.Dir is required")
	}
	if opts.Version == "" {
		opts.Version = "9.1"
	}
	if opts.Version != "9.1" && opts.Version != "8.4" {
		return opts, fmt.Errorf("model: unsupported PVE version %q (want 9.1 or 8.4)", opts.Version)
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if !opts.HasTimeScale && opts.TimeScale == 0 {
		opts.TimeScale = 1
	}
	if opts.TimeScale < 0 {
		return opts, fmt.Errorf("model: time scale must be >= 0, got %v", opts.TimeScale)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return opts, nil
}

// newCluster is an empty Cluster with its parts wired to it.
func newCluster(opts Options) *Cluster {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cluster{opts: opts, log: log.WithGroup("model"), ctx: ctx, cancel: cancel}
	c.appliances.realTemplate = opts.RealTemplate
	wireParts(c)
	return c
}

// load reads the state in the cluster's directory, or creates the
// default datacenter there, then writes one snapshot of it.
func (c *Cluster) load() error {
	opts := c.opts
	st, seq, err := loadState(c.statePath(), c.journalPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
		st, err = c.newDatacenter()
		if err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if st.Version != opts.Version {
			return fmt.Errorf("model: state in %s is PVE %s, asked for %s", opts.Dir, st.Version, opts.Version)
		}
		c.recoverTasks(st)
	}
	if _, err := addSharedStorages(st, opts.SharedStorage); err != nil {
		return err
	}
	st.Access.Clock = c.now
	for _, t := range st.Tasks {
		t.listed = true
	}
	c.st = st
	c.seq = seq
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.useRealTemplatesLocked(); err != nil {
		return err
	}
	return c.compactLocked() // one snapshot, and no torn line left to append after
}

// Close stops all running workers (their tasks end with an error, as if the
// node went down) and waits for them.
func (c *Cluster) Close() error {
	c.cancel()
	c.wg.Wait()
	return c.closeJournal()
}

// Version is the emulated PVE release ("9.1" or "8.4").
func (c *Cluster) Version() string { return c.opts.Version }

// Dir is the state directory.
func (c *Cluster) Dir() string { return c.opts.Dir }

// SetRunHook installs h (nil removes it): it runs after each task step
// that started or stopped a CT (start, stop, shutdown, reboot, forced
// destroy, rollback, backup in stop mode), outside the cluster lock and
// before the task goes on. The guest layer follows the CTs in it, so that
// nothing runs in a CT once its stop is done, as on PVE, rather than
// until its next poll.
func (c *Cluster) SetRunHook(h func()) {
	c.mu.Lock()
	c.runHook = h
	c.mu.Unlock()
}

func (c *Cluster) now() time.Time { return c.opts.Now() }

// DataDir is the root of the data plane.
func (c *Cluster) DataDir() string { return filepath.Join(c.opts.Dir, "data") }

// writeFileAtomic replaces path with data so that readers and a crash see
// either the old or the new content, never a mix, and syncs it to disk.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, true)
}

// writeFile writes data to a temporary file and renames it over path,
// syncing the data first when sync is set.
func writeFile(path string, data []byte, perm os.FileMode, sync bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteFileAtomic is writeFileAtomic for the HTTP layer (certificates, env file).
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm)
}
