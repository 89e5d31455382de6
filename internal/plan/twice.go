package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/ui/human"
)

// keptRecord is one keeper's record of a volume.
type keptRecord struct {
	keeper *Keeper
	volid  string
}

// describe names the record for a user: keeper, node, volid and size.
func (r keptRecord) describe(obs *Observed) string {
	s := fmt.Sprintf("keeper ct %d on node %s (%s", r.keeper.VMID, r.keeper.Node, r.volid)
	if size, ok := obs.Volumes[volKey(r.keeper.Node, r.volid)]; ok {
		s += ", " + human.Size(size)
	} else {
		s += ", not on the storage"
	}
	return s + ")"
}

// recordsOf are the keepers' records of app's volumes, by key, in node
// order.
func recordsOf(app string, obs *Observed) map[VolumeKey][]keptRecord {
	out := map[VolumeKey][]keptRecord{}
	for _, n := range slices.Sorted(maps.Keys(obs.Keepers)) {
		for _, k := range obs.Keepers[n] {
			for vk, volid := range k.Records {
				if vk.App == app {
					out[vk] = append(out[vk], keptRecord{k, volid})
				}
			}
		}
	}
	return out
}

// doubleRecords refuses app when one of its volumes has two copies
// corral knows of: a record in two keepers, or a record in a keeper on
// another node than the one the app's container runs on (a node-local
// volume there is not the one the container mounts). Which copy holds the
// app's data only a person can tell, so nothing is planned for the app
// until one is freed. A move under way is exempt: its carrier and the
// keepers hand the volumes over in steps (finishMove).
func doubleRecords(app string, obs *Observed) []string {
	if obs.Carriers[app] != nil {
		return nil
	}
	var ct *CT
	if cts := obs.Apps[app]; len(cts) == 1 {
		ct = cts[0]
	}
	recs := recordsOf(app, obs)
	var out []string
	for _, vk := range slices.SortedFunc(maps.Keys(recs), func(x, y VolumeKey) int { return strings.Compare(x.String(), y.String()) }) {
		rs := recs[vk]
		switch {
		case len(rs) > 1:
			var names []string
			for _, r := range rs {
				names = append(names, r.describe(obs))
			}
			out = append(out, fmt.Sprintf("app %s: volume %s is recorded twice, by %s: corral cannot tell which copy is the app's data and changes nothing of the app; `corral volumes` lists both — keep the one you want and free the other with corral volumes rm VOLID (docs/moving.md)",
				app, vk.Name, strings.Join(names, " and by ")))
		case ct != nil && rs[0].keeper.Node != ct.Node && !obs.onShared(rs[0].volid):
			out = append(out, fmt.Sprintf("app %s: volume %s is recorded by %s, but the app's container ct %d runs on node %s, which cannot mount a volume of node %s: corral cannot tell which is the app's data and changes nothing of the app; "+
				"compare it with what ct %d mounts and keep one copy as docs/moving.md (\"A volume recorded on two nodes\") shows",
				app, vk.Name, rs[0].describe(obs), ct.VMID, ct.Node, rs[0].keeper.Node, ct.VMID))
		}
	}
	return out
}

// otherNodeRecord is the refusal for app a, planned on node, whose volume
// v is recorded only by a keeper on another node n (r): the data is there.
// A container would already have been refused (doubleRecords), so the app
// has none: it is created on n with its data, and moved from there.
func otherNodeRecord(a *App, v Volume, node string, r keptRecord, obs *Observed) string {
	if a.Node != "" {
		// corral move refuses an app pinned with node:; the pin moves it.
		return fmt.Sprintf("app %s: volume %s is recorded by %s, and the app has no container; the manifest places it on node %s, where that data is not: set node: %s and apply (the app is created there on its volume), then set node: %s again and apply (the app moves there with its data)",
			a.Name, v.Name, r.describe(obs), node, r.keeper.Node, node)
	}
	return fmt.Sprintf("app %s: volume %s is recorded by %s, and the app has no container; the manifest places it on node %s, where that data is not: set node: %s (the app is created there on its volume), then move it with corral move %s --to %s",
		a.Name, v.Name, r.describe(obs), node, r.keeper.Node, a.Name, node)
}
