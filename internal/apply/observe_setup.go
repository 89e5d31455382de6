package apply

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// observeStorages reads the storages of the online nodes. With
// ObserveOptions.DeferSetup it leaves out the templates of template-only
// storages; and when nothing observed can look up a volume but the
// keepers' records (recordsOnly), it reads neither the nodes' storage
// lists: only the content of the storages the records name, where the
// planner looks their volumes up (issue 30: a no-op plan read the list
// for the checks of changes only). Either way Observed.SetupDeferred
// tells the planner, which plans nothing but a no-op on it.
func (o *observation) observeStorages(ctx context.Context, opts ObserveOptions) error {
	if !opts.DeferSetup {
		return o.storages(ctx, false)
	}
	o.obs.SetupDeferred = true
	if !opts.NoHA || !recordsOnly(o.obs) {
		return o.storages(ctx, true)
	}
	o.obs.StoragesDeferred = true
	for _, node := range o.online() {
		for _, sid := range recordStorages(o.obs, node) {
			if err := o.content(ctx, node, sid, ""); err != nil {
				// A storage gone from the node: its list says so.
				o.obs.StoragesDeferred = false
				return o.storages(ctx, true)
			}
		}
	}
	return nil
}

// recordsOnly says that the keepers' records are the only volumes a plan
// of obs can look up without planning a change: no interrupted adoption
// (Keeper.Intents name a source volume), move, restore or rescue, no
// damaged keeper or carrier, no stale copy, no offline node and no VM of
// an app (its disks are not keepers' records).
func recordsOnly(obs *plan.Observed) bool {
	if len(obs.Offline)+len(obs.Carriers)+len(obs.LeftoverCarriers)+len(obs.BadCarriers)+
		len(obs.Restores)+len(obs.VMRestores)+len(obs.Rescues)+len(obs.Damaged)+len(obs.Stale)+len(obs.VMs)+len(obs.MarkedVMs) > 0 {
		return false
	}
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			if len(k.Intents) > 0 {
				return false
			}
		}
	}
	return true
}

// recordStorages are the storages the records of node's keepers name,
// sorted.
func recordStorages(obs *plan.Observed, node string) []string {
	seen := map[string]bool{}
	for _, k := range obs.Keepers[node] {
		for _, volid := range k.Records {
			if sid, _, ok := strings.Cut(volid, ":"); ok {
				seen[sid] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for sid := range seen {
		out = append(out, sid)
	}
	sort.Strings(out)
	return out
}

// ObserveSetup reads what ObserveOptions.DeferSetup left out of obs: the
// bridges of each online node, the templates of the storages that hold
// templates only (a storage that also holds volumes was listed whole),
// and, when those were left out as well, the storage lists and the
// content of the storages the records did not name. Nothing in it
// depends on when the guests were listed.
func ObserveSetup(ctx context.Context, c *pve.Client, obs *plan.Observed) error {
	o := &observation{c: c, obs: obs}
	for _, node := range o.online() {
		if err := o.nodeSetup(ctx, node); err != nil {
			return err
		}
		if err := observeBridges(ctx, c, obs, node); err != nil {
			return err
		}
	}
	obs.SetupDeferred, obs.StoragesDeferred = false, false
	return nil
}

// nodeSetup reads the storages of node that observeStorages left out.
func (o *observation) nodeSetup(ctx context.Context, node string) error {
	obs := o.obs
	switch {
	case obs.StoragesDeferred:
		done := map[string]bool{}
		for _, sid := range recordStorages(obs, node) {
			done[sid] = true
		}
		return o.nodeStorages(ctx, node, false, done)
	case obs.SetupDeferred:
		for _, sid := range sortedKeys(obs.Storages[node]) {
			cts := obs.Storages[node][sid]
			if !slices.Contains(cts, "vztmpl") || slices.Contains(cts, "rootdir") || slices.Contains(cts, "images") {
				continue
			}
			if err := o.content(ctx, node, sid, "vztmpl"); err != nil {
				return err
			}
		}
	}
	return nil
}
