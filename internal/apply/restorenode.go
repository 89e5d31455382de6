package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/plan"
)

// restoreNode is the node a restore of app name goes to, and the archive
// must be read on: the node of the container it replaces, else the node
// whose keeper records the volumes it restores (the app was destroyed,
// perhaps after a move), else any node whose storage lists the archive.
// A restore anywhere else would leave the app's volumes recorded on two
// nodes, or look for the replaced container where it is not; so when
// the archive is not readable there (a node-local backup storage of
// another node) it is refused before any change. A restore of an app
// whose move is under way is refused too: its volumes are in a carrier.
func (rs *restorer) restoreNode(ctx context.Context, obs *plan.Observed, opts RestoreOptions, name string, old *plan.CT) (string, error) {
	if probs := movingRefusals(obs, opts.App, name); len(probs) > 0 {
		return "", &RestoreRefusedError{App: opts.App, TokenID: rs.client.TokenID(), Problems: probs}
	}
	switch {
	case opts.Replace && old != nil:
		where := fmt.Sprintf("app %s runs on node %s (ct %d)", opts.App, old.Node, old.VMID)
		fix := "move the app back first (corral move " + opts.App + " --to NODE, or node: NODE in the manifest and corral apply), then restore"
		return rs.archiveOn(ctx, obs, opts, old.Node, where, fix)
	case name == opts.App && old == nil:
		nodes := recordNodes(obs, name)
		if len(nodes) > 1 {
			return "", &RestoreRefusedError{App: opts.App, TokenID: rs.client.TokenID(), Problems: []string{fmt.Sprintf(
				"app %s's volumes are recorded by keepers on several nodes (%s): corral cannot tell which copy is the app's; `corral volumes` lists them — keep one copy (free the other with corral volumes rm VOLID once you are sure it is not the one you want), then restore",
				name, strings.Join(nodes, ", "))}}
		}
		if len(nodes) == 1 {
			where := fmt.Sprintf("app %s has no container and its volumes are recorded by the keeper on node %s", name, nodes[0])
			fix := "restore it under another name (--as NAME) to keep both, or copy the archive to a storage node " + nodes[0] + " reads"
			return rs.archiveOn(ctx, obs, opts, nodes[0], where, fix)
		}
	}
	return rs.archiveNode(ctx, obs, opts.Archive, old)
}

// archiveOn returns node when its storage lists the archive, else a
// refusal naming where the archive is, why the restore goes to node
// (where) and how to go on (fix; NODE stands for the archive's node).
func (rs *restorer) archiveOn(ctx context.Context, obs *plan.Observed, opts RestoreOptions, node, where, fix string) (string, error) {
	found, err := rs.archiveNode(ctx, obs, opts.Archive, &plan.CT{Node: node})
	if err != nil {
		return "", err
	}
	if found == node {
		return node, nil
	}
	sid, _, _ := strings.Cut(opts.Archive, ":")
	return "", &RestoreRefusedError{App: opts.App, TokenID: rs.client.TokenID(), Problems: []string{fmt.Sprintf(
		"archive %s is on storage %s of node %s, which node %s cannot read (a node-local storage: PVE restores an archive only on a node whose storage holds it), and %s; "+
			"restoring on node %s would leave the app's volumes recorded on two nodes. To restore it, %s; "+
			"to make later backups readable from every node, back up to a shared storage (corral backup --storage <shared>)",
		opts.Archive, sid, found, node, where, found, strings.ReplaceAll(fix, "NODE", found))}}
}

// movingRefusals say why a restore of app (as name) waits for a move: a
// carrier holds or is about to hold the app's volumes, which the restore
// would neither see nor record.
func movingRefusals(obs *plan.Observed, apps ...string) []string {
	var out []string
	for _, app := range slices.Compact(slices.Clone(apps)) {
		if car := obs.Carriers[app]; car != nil {
			out = append(out, fmt.Sprintf("app %s is being moved from %s to %s (carrier ct %d on node %s holds %d of its volumes): finish the move first with corral apply (or corral move %s --to %s), then restore",
				app, car.Notes.From, car.Notes.To, car.VMID, car.Node, len(car.Holds()), app, car.Notes.To))
		}
		for _, car := range obs.BadCarriers {
			if slices.Contains(car.Apps(), app) {
				out = append(out, car.Refusal(app))
			}
		}
	}
	return out
}

// recordNodes are the nodes whose keepers record a volume of app (under
// its own name, not a -replaced-/-restored- one), sorted.
func recordNodes(obs *plan.Observed, app string) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(obs.Keepers)) {
		for _, k := range obs.Keepers[n] {
			for vk := range k.Records {
				if vk.App == app && vk.Name == baseName(vk.Name) && !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
	}
	return out
}
