package apply

import (
	"context"
	"slices"

	"github.com/corralhq/corral/internal/plan"
)

// guestNodesKey is the context key of ExpectGuestsOn's nodes.
type guestNodesKey struct{}

// ExpectGuestsOn tells the plans made with the returned context on which
// nodes corral's guests are expected (GuestNodes of a plan made earlier
// in the same run): Observe's settle wait reads the running tasks first
// on those only, instead of on every online node. A guess, never a
// trust: a listing that shows corral's guests on another node has that
// node's tasks read and is listed again (settleWait.unread), so the
// tasks of every node the plan sees corral's guests on are read before
// its listing. On a cluster without corral's guests a plan then reads no
// task list (issue 30). Without it, every online node's tasks are read.
func ExpectGuestsOn(ctx context.Context, nodes []string) context.Context {
	return context.WithValue(ctx, guestNodesKey{}, slices.Clip(append([]string{}, nodes...)))
}

// expectedGuestNodes are ExpectGuestsOn's nodes (ok false: none given).
func expectedGuestNodes(ctx context.Context) (nodes []string, ok bool) {
	nodes, ok = ctx.Value(guestNodesKey{}).([]string)
	return nodes, ok
}

// GuestNodes are the nodes obs saw corral's apps, keepers, restores or
// damaged guests on, sorted: where a plan made next in the same run is
// likely to see them (ExpectGuestsOn).
func GuestNodes(obs *plan.Observed) []string {
	var out []string
	add := func(node string) {
		if node != "" && !slices.Contains(out, node) {
			out = append(out, node)
		}
	}
	if obs == nil {
		return nil
	}
	for _, cts := range obs.Apps {
		for _, ct := range cts {
			add(ct.Node)
		}
	}
	for node, ks := range obs.Keepers {
		if len(ks) > 0 {
			add(node)
		}
	}
	for _, r := range obs.Restores {
		for _, ct := range []*plan.CT{r.New, r.Replaced} {
			if ct != nil {
				add(ct.Node)
			}
		}
	}
	for _, d := range obs.Damaged {
		add(d.Node)
	}
	slices.Sort(out)
	return out
}

// watchedNodes are the online nodes of corral's containers in res: the
// nodes whose running tasks Observe's settle wait must have read before
// res was listed (busyTasks looks only at corral's containers). The
// keepers the lock in ctx created (pendingIn) do not count: no task of
// another run can be under way on a container this run created under
// that lock (PVE refuses a create on a VMID whose destroy still runs,
// and any other run's power or move task on that node needs the lock).
func watchedNodes(ctx context.Context, res []resource, online []string) []string {
	own := pendingIn(ctx)
	var out []string
	for _, r := range res {
		if r.Type != "lxc" || !slices.Contains(online, r.Node) || slices.Contains(out, r.Node) || !slices.Contains(plan.ParseTags(r.Tags), plan.TagManaged) {
			continue
		}
		if pk := own[r.Node]; pk != nil && pk.vmid == r.VMID {
			continue
		}
		out = append(out, r.Node)
	}
	return out
}

// firstBusyNodes are the nodes whose tasks Observe's settle wait reads
// before its first listing: the expected ones that are online, or every
// online node when ctx expects none (ExpectGuestsOn).
func firstBusyNodes(ctx context.Context, online []string) []string {
	expected, ok := expectedGuestNodes(ctx)
	if !ok {
		return online
	}
	return slices.DeleteFunc(slices.Clone(expected), func(n string) bool { return !slices.Contains(online, n) })
}
