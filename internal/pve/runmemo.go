package pve

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// runMemo keeps, for one command's run, the answers of reads that say how
// the cluster is set up rather than what is on it: the node list, a
// node's bridges and its storage list, and the templates a storage holds
// (until corral itself writes to a storage or downloads an appliance).
// One corral apply reads them for its
// preflight, the plan it shows, the plan under the lock and the final
// check (issue 30: they were a third of a one-app apply's requests). A
// change to them during the run is not missed in a way that loses data:
// a node gone offline fails the reads of its guests, a bridge, storage or
// template removed fails the task that names it, a template another
// client downloads meanwhile fails corral's own download of it, and each
// ends the run with an error, never with a guess. What is on the nodes (guests, configs,
// volumes, tasks, HA) is never kept.
type runMemo struct {
	mu      sync.Mutex
	answers map[string]any

	// idMu guards nextID, the VMID the next NextID hands out (0: none
	// read yet); held across the one read so concurrent first callers
	// do not both take its answer.
	idMu   sync.Mutex
	nextID int

	// storageWrites is set by corral's first write under a storage's
	// path or to a node's appliance list (a download, an upload, a
	// volume's delete): from then on templates are read fresh, since a
	// download's task adds its template after the POST has answered.
	storageWrites atomic.Bool
}

// wrote notes a write (any method but GET) to escPath.
func (m *runMemo) wrote(escPath string) {
	if strings.Contains(escPath, "/storage/") || strings.HasSuffix(escPath, "/aplinfo") {
		m.storageWrites.Store(true)
	}
}

// templatesWritten says whether corral wrote to a storage in this run,
// so that templates must be read fresh.
func (m *runMemo) templatesWritten() bool { return m.storageWrites.Load() }

// MemoizeSetup makes c keep the node list, each node's bridges, its
// full storage list and each storage's templates (StorageContent with
// content "vztmpl") for the rest of its life, read at most once each
// (errors are not kept). For a client that lives as long as one command
// (corral apply, destroy); a long-lived one (the agent's) must not, or it
// would never see a node or storage added.
func (c *Client) MemoizeSetup() {
	c.memo = &runMemo{answers: map[string]any{}}
}

// memoSlice is read's answer for key, read once while c memoizes (each
// caller gets its own copy of the slice) and every time otherwise.
func memoSlice[T any](ctx context.Context, c *Client, key string, read func(context.Context) ([]T, error)) ([]T, error) {
	m := c.memo
	if m == nil {
		return read(ctx)
	}
	m.mu.Lock()
	v, ok := m.answers[key]
	m.mu.Unlock()
	if ok {
		return slices.Clone(v.([]T)), nil
	}
	out, err := read(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.answers[key] = slices.Clone(out)
	m.mu.Unlock()
	return out, nil
}

// nextIDOnce is NextID while c memoizes: /cluster/nextid is read once,
// then each call hands out one more than the last. PVE's answer is only
// advisory anyway (another client may take the id before the create
// that uses it, which then fails with IsAlreadyExists and is retried
// with the next id), so counting locally risks nothing a fresh read
// does not; it saves a read per create (issue 30).
func (m *runMemo) nextIDOnce(ctx context.Context, read func(context.Context) (int, error), take bool) (int, error) {
	m.idMu.Lock()
	defer m.idMu.Unlock()
	if m.nextID == 0 {
		id, err := read(ctx)
		if err != nil {
			return 0, err
		}
		m.nextID = id
	}
	id := m.nextID
	if take {
		m.nextID++
	}
	return id, nil
}

// KnownNodes is the node list this run has already read, without a
// request: ok is false when c does not memoize (MemoizeSetup) or has
// not read it yet. A check that only needs to know whether other nodes
// exist (a volume on shared storage matters only to guests of another
// node) takes it instead of a read of its own.
func (c *Client) KnownNodes() (nodes []Node, ok bool) {
	m := c.memo
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.answers["nodes"]
	if !ok {
		return nil, false
	}
	return slices.Clone(v.([]Node)), true
}
