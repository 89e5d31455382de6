package apply

import (
	"fmt"

	"github.com/corralhq/corral/internal/plan"
)

// keeperSet is every keeper of the cluster, per node, oldest first. A node
// has more than one when its volumes outgrow one keeper (plan.Room).
type keeperSet struct {
	byNode map[string][]*keeper
}

func (e *Executor) keeperSet(obs *plan.Observed) *keeperSet {
	s := &keeperSet{byNode: map[string][]*keeper{}}
	for node, ks := range obs.Keepers {
		for _, k := range ks {
			s.byNode[node] = append(s.byNode[node], &keeper{
				e: e, node: node, vmid: k.VMID,
				records: k.Records, intents: k.Intents, volumes: plan.VolumeEntries(k.Config),
			})
		}
	}
	return s
}

func (s *keeperSet) add(k *keeper) { s.byNode[k.node] = append(s.byNode[k.node], k) }

func (s *keeperSet) byVMID(node string, vmid int) *keeper {
	for _, k := range s.byNode[node] {
		if k.vmid == vmid {
			return k
		}
	}
	return nil
}

// holder is the keeper on node that records vk, or nil.
func (s *keeperSet) holder(node string, vk plan.VolumeKey) *keeper {
	for _, k := range s.byNode[node] {
		if k.records[vk] != "" {
			return k
		}
	}
	return nil
}

// forNew is the keeper on node that takes a new volume: the one that
// already noted an adoption of it, else the first with room. The plan
// created enough keepers; none with room means the cluster changed since.
func (s *keeperSet) forNew(node string, vk plan.VolumeKey, storage string) (*keeper, error) {
	for _, k := range s.byNode[node] {
		if _, ok := k.intents[vk]; ok {
			return k, nil
		}
	}
	for _, k := range s.byNode[node] {
		room := plan.RoomFor(k.volumes, k.records, k.intents)
		if room.Take(plan.RecordLen(vk, storage)) {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no keeper on node %s has room for volume %s; run `corral apply` again to plan another keeper", node, vk)
}
