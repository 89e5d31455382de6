package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// keeperOps creates, repairs and finds the keepers (keeper.go) for one
// Executor, and is what each keeper handle writes through: the runner,
// and the project and declaring manifest the keepers note beside the
// volumes corral creates or adopts (Executor.Project, Executor.Declared,
// as they were when the handles were made).
type keeperOps struct {
	*runner
	project  string
	declared string
}

// keeperOps is the keeper side of e, over its runner.
func (e *Executor) keeperOps() *keeperOps {
	return &keeperOps{runner: e.ops(), project: e.Project, declared: e.Declared}
}

// keeperSet is every keeper of the cluster, per node, oldest first. A node
// has more than one when its volumes outgrow one keeper (plan.Room).
type keeperSet struct {
	mu     sync.Mutex // byNode, pending, and room reservations across keepers
	byNode map[string][]*keeper
	// pending are the keepers being created, per node (keeperOps.createKeepers).
	pending map[string]*keeperCreates
}

// keeperCreates are the keepers being created on a node: done closes when
// the last of them is created or failed.
type keeperCreates struct {
	n    int
	errs []error
	done chan struct{}
}

// expect notes a keeper about to be created on node; finish adds it (or
// its failure) when its create ends.
func (s *keeperSet) expect(node string) (finish func(*keeper, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[string]*keeperCreates{}
	}
	w := s.pending[node]
	if w == nil || w.n == 0 { // none yet, or those before all ended
		w = &keeperCreates{done: make(chan struct{})}
		s.pending[node] = w
	}
	w.n++
	return func(k *keeper, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err == nil {
			s.byNode[node] = append(s.byNode[node], k)
		} else {
			w.errs = append(w.errs, err)
		}
		if w.n--; w.n == 0 {
			close(w.done)
		}
	}
}

// creating reports whether keepers are being created on node now.
func (s *keeperSet) creating(node string) bool {
	s.mu.Lock()
	w := s.pending[node]
	s.mu.Unlock()
	if w == nil {
		return false
	}
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// ready waits until the keepers being created on node are there, and
// fails when one of them could not be created.
func (s *keeperSet) ready(ctx context.Context, node string) error {
	s.mu.Lock()
	w := s.pending[node]
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if len(w.errs) > 0 {
		// The keeper's own error comes first in Apply's; not repeated.
		return fmt.Errorf("the keeper planned on node %s could not be created (its error is reported with corral-keeper's); run corral apply again once that is fixed", node)
	}
	return nil
}

func (ko *keeperOps) keeperSet(obs *plan.Observed) *keeperSet {
	s := &keeperSet{byNode: map[string][]*keeper{}}
	for node, ks := range obs.Keepers {
		for _, k := range ks {
			s.byNode[node] = append(s.byNode[node], (&keeper{
				ops: ko, node: node, vmid: k.VMID,
				records: k.Records, intents: k.Intents, projects: k.Projects, declared: k.Declared, volumes: plan.VolumeEntries(k.Config),
			}).seedFrom(k))
		}
	}
	return s
}

func (s *keeperSet) add(k *keeper) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byNode[k.node] = append(s.byNode[k.node], k)
}

// readEach reads each keeper on node afresh (those the set knows as the
// call starts) and calls fn with it and its config; a keeper destroyed
// meanwhile is skipped. The moves read them so, never trusting what an
// earlier step saw.
func (s *keeperSet) readEach(ctx context.Context, node string, fn func(k *keeper, cc *pve.ContainerConfig) error) error {
	s.mu.Lock()
	ks := slices.Clone(s.byNode[node])
	s.mu.Unlock()
	for _, k := range ks {
		cc, err := k.read(ctx)
		if pve.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(k, cc); err != nil {
			return err
		}
	}
	return nil
}

func (s *keeperSet) byVMID(node string, vmid int) *keeper {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.byNode[node] {
		if k.vmid == vmid {
			return k
		}
	}
	return nil
}

// holder is the keeper on node that records vk, or nil.
func (s *keeperSet) holder(node string, vk plan.VolumeKey) *keeper {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.byNode[node] {
		k.smu.Lock()
		has := k.records[vk] != ""
		k.smu.Unlock()
		if has {
			return k
		}
	}
	return nil
}

// forNew is the keeper on node that takes a new volume, once the keepers
// being created there are: the one that already noted an adoption of it,
// else one with room. The room is
// reserved until done is called, so that apps creating volumes at once do
// not overfill one keeper. The plan created enough keepers; none with
// room means the cluster changed since.
//
// Among keepers with room it takes the one with the fewest reservations
// pending (the one holding a reservation for another volume of the same
// app first, so that an app's volumes share one keeper window): PVE runs
// a keeper's move_volume and create tasks one at a time under its config
// lock, so a drain that filled the first keeper before the next one
// queued every app behind one keeper while the others stood idle.
func (s *keeperSet) forNew(ctx context.Context, node string, vk plan.VolumeKey, storage string) (k *keeper, done func(), err error) {
	if err := s.ready(ctx, node); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.byNode[node] {
		k.smu.Lock()
		_, ok := k.intents[vk]
		k.smu.Unlock()
		if ok {
			return k, func() {}, nil
		}
	}
	line := plan.RecordLen(vk, storage)
	var best *keeper
	bestLoad := 0
	for _, k := range s.byNode[node] {
		k.smu.Lock()
		room := plan.RoomFor(k.volumes, plan.KeeperNotes{Records: k.records, Intents: k.intents, Projects: k.projects, Declared: k.declared})
		sameApp := false
		for r, l := range k.reserved {
			room.Take(l)
			sameApp = sameApp || r.App == vk.App
		}
		fits := room.Take(line)
		load := len(k.reserved)
		k.smu.Unlock()
		if !fits {
			continue
		}
		if sameApp {
			best = k
			break
		}
		if best == nil || load < bestLoad {
			best, bestLoad = k, load
		}
	}
	if best == nil {
		return nil, nil, fmt.Errorf("no keeper on node %s has room for volume %s; run `corral apply` again to plan another keeper", node, vk)
	}
	k = best
	k.smu.Lock()
	if k.reserved == nil {
		k.reserved = map[plan.VolumeKey]int{}
	}
	k.reserved[vk] = line
	k.smu.Unlock()
	return k, func() {
		k.smu.Lock()
		delete(k.reserved, vk)
		k.smu.Unlock()
	}, nil
}

// refreshNotes writes the Notes of every keeper that volumes were carried
// out of (carry) once more from its mount points: one write per keeper at
// the end of a run, instead of one per move, each of which would compete
// (compare-and-swap) with the next move out of the same keeper. The
// Notes are for people; the mount points are the record, and a run
// killed before this leaves a keeper whose Notes the next plan rewrites.
func (s *keeperSet) refreshNotes(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	var stale []*keeper
	for _, ks := range s.byNode {
		for _, k := range ks {
			k.smu.Lock()
			if k.notesStale {
				stale = append(stale, k)
				k.notesStale = false
			}
			k.smu.Unlock()
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, k := range stale {
		errs = append(errs, k.change(ctx, "Notes follow the mount points (volumes carried out)", func(*keeperState) (*pve.ConfigUpdate, error) { return &pve.ConfigUpdate{}, nil }))
	}
	return errors.Join(errs...)
}

// createKeepers starts creating the keepers p plans, all at once, and
// returns at once; wait waits for them and returns their failures. Their
// templates are fetched first, before the apps' changes run (that
// changes obs).
func (ko *keeperOps) createKeepers(ctx context.Context, p *plan.Plan, obs *plan.Observed, keepers *keeperSet) (wait func() error, err error) {
	var creates []plan.KeeperChange
	for _, kc := range p.Keepers {
		if kc.Action != plan.Create {
			continue
		}
		tmpl := keeperTemplate(kc.Node, p, obs)
		if tmpl == "" {
			return nil, fmt.Errorf("keeper on %s: no container template on the node to create it from", kc.Node)
		}
		if err := ko.keeperTemplateOn(ctx, kc.Node, tmpl, obs); err != nil {
			return nil, err
		}
		creates = append(creates, kc)
	}
	errs := make([]error, len(creates))
	// Every create is expected before any starts: one that ended before
	// the next of its node was expected would let that node's waiters go.
	finish := make([]func(*keeper, error), len(creates))
	for i, kc := range creates {
		finish[i] = keepers.expect(kc.Node)
	}
	var wg sync.WaitGroup
	for i, kc := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := ko.ensureKeeper(ctx, kc, nil, p, obs)
			errs[i] = err
			finish[i](k, err)
		}()
	}
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}, nil
}
