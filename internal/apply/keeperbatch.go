package apply

import (
	"context"
	"fmt"
	"maps"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// A drain sends the volumes of a hundred apps to one keeper. Taken one
// app at a time, each costs a protection window of its own (protection
// off and on, an intent write, a record write: ten requests around its
// two move_volume tasks), and the apps queue behind each other's
// windows. takeBatched is a group commit instead: a move that wants the
// keeper queues its volumes; whoever gets the keeper's turn takes every
// queued move in one window: one intent write naming all their volumes,
// the move_volume tasks one after another (PVE locks the keeper's config
// for each anyway), one write recording them all. Every volume is still
// named by an intent line before it moves, so a kill at any point leaves
// what a kill inside one adoption leaves (diff.go finishes or forgets
// each intent on its own).

// takeReq is one move's volumes for a keeper's next protection window.
type takeReq struct {
	owner int // the CT on the keeper's node that holds them as unusedN (a carrier)
	vols  []takeVol
	err   error
	done  chan struct{}
}

// takeVol is one volume of a takeReq: its key, its volid and the owner's
// unusedN entry that holds it.
type takeVol struct {
	vk     plan.VolumeKey
	volid  string
	srcKey string
}

// takeBatched moves r's volumes into the keeper and records them, in
// the same protection window as every other move queued meanwhile.
func (k *keeper) takeBatched(ctx context.Context, r *takeReq) error {
	r.done = make(chan struct{})
	k.qmu.Lock()
	k.queue = append(k.queue, r)
	k.qmu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-r.done: // taken in the window of whoever had the turn before
		return r.err
	default:
	}
	k.qmu.Lock()
	batch := k.queue
	k.queue = nil
	k.qmu.Unlock()
	err := k.unprotectedHeld(ctx, func() error { return k.takeAll(ctx, batch) })
	for _, b := range batch {
		if b.err == nil {
			b.err = err
		}
		close(b.done)
	}
	return r.err
}

// takeAll is the body of one window: intents, moves, records. A move
// that fails fails its own request; the others go on.
func (k *keeper) takeAll(ctx context.Context, batch []*takeReq) error {
	var targets map[plan.VolumeKey]string
	n := 0
	for _, r := range batch {
		n += len(r.vols)
	}
	if err := k.change(ctx, fmt.Sprintf("note adoption of %d volumes", n), func(s *keeperState) (*pve.ConfigUpdate, error) {
		targets = map[plan.VolumeKey]string{}
		taken := maps.Clone(s.conf)
		if s.notes.Intents == nil {
			s.notes.Intents = map[plan.VolumeKey]plan.AdoptIntent{}
		}
		for _, r := range batch {
			for _, v := range r.vols {
				t := freeKey(taken, "unused")
				taken[t] = v.volid
				targets[v.vk] = t
				s.notes.Intents[v.vk] = plan.AdoptIntent{Source: v.volid, Key: t}
				k.noteProject(s, v.vk.App)
			}
		}
		return &pve.ConfigUpdate{}, nil
	}); err != nil {
		return err
	}
	moved := map[plan.VolumeKey]bool{}
	for _, r := range batch {
		for _, v := range r.vols {
			if err := k.moveIn(ctx, v.vk.App, r.owner, v.srcKey, v.volid, targets[v.vk]); err != nil {
				r.err = err
				break
			}
			moved[v.vk] = true
		}
	}
	if len(moved) == 0 {
		return nil
	}
	cc, err := k.read(ctx)
	if err != nil {
		return err
	}
	recs := map[plan.VolumeKey]string{}
	for _, r := range batch {
		for _, v := range r.vols {
			if !moved[v.vk] {
				continue
			}
			if id := cc.Values[targets[v.vk]]; id != "" {
				recs[v.vk] = id
			} else if r.err == nil {
				r.err = fmt.Errorf("keeper %d: %s empty after moving %s into it", k.vmid, targets[v.vk], v.volid)
			}
		}
	}
	return k.mountAll(ctx, fmt.Sprintf("record %d volumes", len(recs)), recs)
}

// moveIn is move_volume of owner's srcKey (volid) to the keeper's
// target entry, waited for.
func (k *keeper) moveIn(ctx context.Context, app string, owner int, srcKey, volid, target string) error {
	var upid string
	err := k.ops.locked().Do(ctx, func() (err error) {
		upid, err = k.ops.client.MoveVolume(ctx, k.node, owner, &pve.VolumeMove{
			Volume: srcKey, TargetVMID: k.vmid, TargetVolume: target,
		})
		return err
	})
	if err == nil {
		err = k.ops.wait(ctx, app, upid)
	}
	if err != nil {
		return fmt.Errorf("move %s to keeper %d: %w", volid, k.vmid, err)
	}
	return nil
}
