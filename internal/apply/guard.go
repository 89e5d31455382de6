package apply

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// The attach guard. A volume mounted by two containers at once is an ext4
// file system written by two kernels' views at once: corrupted. PVE does
// not stop a config from naming a volume another guest uses, so corral
// checks, right before it attaches (or frees) a volume, on a fresh read of
// every guest config on the node, current values and pending changes
// alike, that nothing but the keeper (and the container being changed)
// references it. Nothing read earlier counts: the check is the last read
// before the write.

// Reference is one guest config entry that names a volume.
type Reference struct {
	// Node is set when the guest was read on another node than the one
	// being changed (a volume on shared storage).
	Node    string
	VMID    int
	Type    string // lxc | qemu
	Name    string
	Key     string // rootfs, mpN, unusedN, scsiN, …
	Pending bool   // a pending change, applied at the guest's next start
	// Snapshot is set for a reference in a snapshot's config (see
	// snapshotReferences), which always names its Node; App is the
	// container's corral app, if any, for the command that removes it.
	Snapshot string
	App      string
}

func (r Reference) String() string {
	if r.Snapshot != "" {
		return r.snapshotString()
	}
	what := "CT"
	if r.Type == "qemu" {
		what = "VM"
	}
	s := fmt.Sprintf("%s %d", what, r.VMID)
	if r.Name != "" {
		s += " (" + r.Name + ")"
	}
	if r.Node != "" {
		s += " on node " + r.Node
	}
	s += " " + r.Key
	if r.Pending {
		s += " (pending change)"
	}
	return s
}

// snapshotString names the snapshot, its container, node and key, and
// the command that removes the snapshot.
func (r Reference) snapshotString() string {
	s := fmt.Sprintf("%s%s %d", plan.SnapshotRefPrefix+r.Snapshot+" of ", guestWord(r.Type), r.VMID)
	if r.Name != "" {
		s += " (" + r.Name + ")"
	}
	tool := "pct"
	if r.Type == "qemu" {
		tool = "qm"
	}
	fix := fmt.Sprintf("`%s delsnapshot %d %s` on node %s", tool, r.VMID, r.Snapshot, r.Node)
	if r.App != "" {
		fix = fmt.Sprintf("`corral snapshot %s %s --delete` (or %s)", r.App, r.Snapshot, fix)
	}
	return fmt.Sprintf("%s on node %s as %s; %s removes that snapshot", s, r.Node, r.Key, fix)
}

// VolumeInUseError says a volume is referenced by a guest other than the
// ones allowed; nothing was changed.
type VolumeInUseError struct {
	VolID string
	Refs  []Reference
}

func (e *VolumeInUseError) Error() string {
	var refs []string
	for _, r := range e.Refs {
		refs = append(refs, r.String())
	}
	if slices.ContainsFunc(e.Refs, func(r Reference) bool { return r.Snapshot != "" }) {
		return fmt.Sprintf("volume %s is kept by %s; corral frees no volume a snapshot keeps (a rollback to it needs the volume): run again once the snapshot is removed",
			e.VolID, strings.Join(refs, ", "))
	}
	return fmt.Sprintf("volume %s is referenced by %s; corral never gives one volume to two guests (both would write the same file system): "+
		"remove the reference from that guest (detach it while the guest is stopped) or, if that guest is this app's container with its tags edited, put its tags back, then run again",
		e.VolID, strings.Join(refs, ", "))
}

// NodeReferences reads every guest config on node (current values and
// pending changes) and returns who references which volume.
func NodeReferences(ctx context.Context, c *pve.Client, node string) (map[string][]Reference, error) {
	return references(ctx, c, node, false)
}

// references reads the guest configs of node, or with all those of every
// node (each reference then names its node when it is not node's).
func references(ctx context.Context, c *pve.Client, node string, all bool) (map[string][]Reference, error) {
	return referencesSkip(ctx, c, node, all, "", 0)
}

// skipNodeKey carries the offline node whose guests an app recovery may
// leave unread (skipOfflineNode).
type skipNodeKey struct{}

// skipOfflineNode marks ctx so that the attach guard leaves unread the
// guests of node when node does not answer: the recovery of an app from
// that node (apply --recover) takes over volumes its old container there
// references, which the plan already knows and the operator consented to.
func skipOfflineNode(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, skipNodeKey{}, node)
}

func skippedNode(ctx context.Context) string {
	n, _ := ctx.Value(skipNodeKey{}).(string)
	return n
}

// referencesSkip is references, leaving out the guests of node skip
// whose configs cannot be read (the node is offline).
func referencesSkip(ctx context.Context, c *pve.Client, node string, all bool, skip string, unread int) (map[string][]Reference, error) {
	res, err := listGuests(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("list guests: %w", err)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].VMID < res[j].VMID })
	// Read the configs a few at a time (the client's own bound applies
	// too): on a node with hundreds of guests one after another is what
	// made every attach slower as a drain filled the node.
	res = slices.DeleteFunc(res, func(r resource) bool {
		return (!all && r.Node != node) || (r.Type != "lxc" && r.Type != "qemu") || (unread != 0 && r.VMID == unread)
	})
	entries := make([][]pve.PendingEntry, len(res))
	errs := make([]error, len(res))
	inParallel(len(res), func(i int) {
		if r := res[i]; r.Type == "qemu" {
			entries[i], errs[i] = c.VMPending(ctx, r.Node, r.VMID)
		} else {
			entries[i], errs[i] = c.Pending(ctx, r.Node, r.VMID)
		}
	})
	out := map[string][]Reference{}
	for i, r := range res {
		where := ""
		if r.Node != node {
			where = r.Node
		}
		err := errs[i]
		if pve.IsNotFound(err) {
			continue // destroyed since the list
		}
		if err != nil && skip != "" && r.Node == skip && ctx.Err() == nil {
			continue // its node does not answer; see skipOfflineNode
		}
		if err != nil {
			return nil, fmt.Errorf("read config of %s %d on node %s to check which volumes it uses: %w", r.Type, r.VMID, r.Node, err)
		}
		for _, en := range entries[i] {
			if !volumeKey(r.Type, en.Key) {
				continue
			}
			if en.Value != nil {
				if v := refVolume(string(*en.Value)); v != "" {
					out[v] = append(out[v], Reference{Node: where, VMID: r.VMID, Type: r.Type, Name: r.Name, Key: en.Key})
				}
			}
			if en.Pending != nil {
				if v := refVolume(string(*en.Pending)); v != "" {
					out[v] = append(out[v], Reference{Node: where, VMID: r.VMID, Type: r.Type, Name: r.Name, Key: en.Key, Pending: true})
				}
			}
		}
	}
	return out, nil
}

// sweepConcurrency is how many guest configs one guard read has in
// flight.
const sweepConcurrency = 8

// inParallel runs fn(0) … fn(n-1), sweepConcurrency at a time, and
// returns when all have.
func inParallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, sweepConcurrency)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// volumeKey reports whether a config key of a guest of type typ can name
// a volume.
func volumeKey(typ, key string) bool {
	if key == "rootfs" || isMP(key) || isUnused(key) {
		return true
	}
	if typ != "qemu" {
		return false
	}
	for _, p := range []string{"scsi", "virtio", "sata", "ide", "efidisk", "tpmstate"} {
		if isIndexed(key, p) {
			return true
		}
	}
	return false
}

// refVolume is the volume a config value names ("" for none, a bind mount
// or a device).
func refVolume(v string) string {
	vol := plan.ParseMountPoint(v).Volume
	if vol == "" || strings.HasPrefix(vol, "/") || !strings.Contains(vol, ":") || vol == "none" {
		return ""
	}
	return vol
}

// onSharedStorage reports whether one of volids is on a storage that node
// lists as shared (NFS, CIFS, RBD, …).
func onSharedStorage(ctx context.Context, c *pve.Client, node string, volids []string) (bool, error) {
	shared, err := sharedStorages(ctx, c, node)
	if err != nil {
		return false, err
	}
	for _, volid := range volids {
		if sid, _, _ := strings.Cut(volid, ":"); shared[sid] {
			return true, nil
		}
	}
	return false, nil
}

// sharedStorages are the storages node lists as shared. In a cluster of
// node alone (the node list this run read says so) none is: sharedness
// only decides whether another node's guests are read, and there are
// none, so the storage list is not read (issue 30: a one-node destroy
// --delete-volumes read it for its snapshot guard alone).
func sharedStorages(ctx context.Context, c *pve.Client, node string) (map[string]bool, error) {
	if nodes, ok := c.KnownNodes(); ok && len(nodes) == 1 && nodes[0].Node == node {
		return map[string]bool{}, nil
	}
	storages, err := c.StorageList(ctx, node, "")
	if err != nil {
		return nil, fmt.Errorf("list storages of node %s: %w", node, err)
	}
	shared := map[string]bool{}
	for _, s := range storages {
		if bool(s.Shared) {
			shared[s.Storage] = true
		}
	}
	return shared, nil
}

// The guard's reads are shared (a group commit for reads): apps that
// attach at the same time on one node wait for one read of the node's
// guests instead of each reading them all, as long as that read started
// after they asked. So every guard still decides on a read made after it
// was called, which is all the single read gave: nothing is cached
// beyond one read, and no read a caller did not wait for counts.

// sweepKey is what one read covers: a node's guests, or with all every
// node's (shared storage), leaving out an offline node's (skip).
type sweepKey struct {
	node string
	all  bool
	skip string
	// unread is a guest whose config the read leaves out, as every
	// caller of the read allows its references (referencedBy); 0 none.
	unread int
}

// sweep is one read of the guests; done closes when refs and err are set.
type sweep struct {
	fn   func() (map[string][]Reference, error)
	refs map[string][]Reference
	err  error
	done chan struct{}
}

// sweepGroup runs at most one read per key at a time; callers that
// arrive while one runs share the next.
type sweepGroup struct {
	mu      sync.Mutex
	running map[sweepKey]bool
	next    map[sweepKey]*sweep
}

// do returns the references of a read of key that started after do was
// called: the next one to start, shared with every caller that joins it
// before it starts. fn is the read (the first joiner's).
func (g *sweepGroup) do(ctx context.Context, key sweepKey, fn func() (map[string][]Reference, error)) (map[string][]Reference, error) {
	g.mu.Lock()
	if g.next == nil {
		g.next, g.running = map[sweepKey]*sweep{}, map[sweepKey]bool{}
	}
	s := g.next[key]
	if s == nil {
		s = &sweep{fn: fn, done: make(chan struct{})}
		g.next[key] = s
	}
	g.startLocked(key)
	g.mu.Unlock()
	select {
	case <-s.done:
		return s.refs, s.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startLocked starts the waiting read of key unless one runs.
func (g *sweepGroup) startLocked(key sweepKey) {
	s := g.next[key]
	if s == nil || g.running[key] {
		return
	}
	delete(g.next, key)
	g.running[key] = true
	go func() {
		s.refs, s.err = s.fn()
		close(s.done)
		g.mu.Lock()
		g.running[key] = false
		g.startLocked(key)
		g.mu.Unlock()
	}()
}
